"""JSON decoding that is total and bounded, for bytes we did not write.

`loads` never raises anything but `WireJSONError` (a `ValueError`): a body nested 100,000
deep (`RecursionError` inside the C decoder), a 5,000-digit integer (Python's
int-string limit), invalid UTF-8 or a stray BOM all become one clear error. After decoding,
the value's nesting depth is checked against `max_depth` (default `MAX_DEPTH`), so code that
walks it (schema validation, scrubbing) never recurses without bound.

`strict=True` (a client's request body) also refuses what JSON itself does not allow but
Python's decoder accepts: `NaN`, `Infinity`, numbers that overflow to infinity (`1e999`),
and strings holding lone surrogates (`"\\ud800"`), which cannot be re-encoded as UTF-8.

Bounds (module constants; documented in the README's security section):
    MAX_DEPTH       64 levels of arrays/objects
    MAX_INT_DIGITS  100 digits in an integer

Speed: this is the gateway's per-chunk hot path (one call per SSE chunk), so a document is
first given to orjson, which is strict JSON already (no NaN, no Infinity, no overflowing
number, no lone surrogate, no BOM). What it accepts decodes to the same value as Python's
decoder, except integers beyond 64 bits, which orjson turns into floats: a document with a
run of 19 or more digits anywhere skips orjson. Whatever orjson refuses goes to the
standard decoder, whose answer (a value, or our error) is the result: orjson only decides
faster, never differently (`tests/wire` checks this as a property).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import orjson

from ground.errors import CanaryError

MAX_DEPTH = 64
MAX_INT_DIGITS = 100


class WireJSONError(CanaryError, ValueError):
    """Bytes that are not acceptable JSON; the message says why, in a few words."""


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise WireJSONError(f"an integer has more than {MAX_INT_DIGITS} digits")
    return int(text)


def _strict_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise WireJSONError(f"number {text[:20]!r} overflows")
    return value


def _no_constant(name: str) -> Any:
    raise WireJSONError(f"{name} is not JSON")


# Built once: `json.loads` with keyword arguments builds a new decoder on every call.
_LENIENT = json.JSONDecoder(parse_int=_int)
_STRICT = json.JSONDecoder(parse_int=_int, parse_float=_strict_float, parse_constant=_no_constant)


def depth_exceeds(value: Any, max_depth: int) -> bool:
    """Whether `value` nests arrays/objects deeper than `max_depth` (iterative)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > max_depth:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _has_lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            try:
                node.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


# Every byte of a document mapped to its shape: a digit to "0", an opening bracket to "[",
# anything else to " ". One C-speed pass answers both questions the fast path asks.
_SHAPE = bytes(
    ord("0") if chr(i).isdigit() and i < 128 else ord("[") if i in b"[{" else ord(" ")
    for i in range(256)
)
_LONG_RUN = b"0" * 19  # an integer this long may not fit orjson's 64 bits


def loads(
    raw: bytes | bytearray | str,
    *,
    max_depth: int = MAX_DEPTH,
    strict: bool = False,
) -> Any:
    """Decode `raw`. Bytes: a leading UTF-8 BOM is dropped and invalid UTF-8 replaced (refused
    when `strict`). A str is decoded as it is (a BOM inside an SSE data line is malformed)."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if _LONG_RUN in data.translate(_SHAPE):
        return _standard_loads(raw, max_depth=max_depth, strict=strict)
    return _screened(raw, max_depth=max_depth, strict=strict)


def loads_each(
    docs: Sequence[str], *, max_depth: int = MAX_DEPTH
) -> tuple[list[Any], Exception | None]:
    """`loads` of each of `docs` (lenient), in order, up to the first that fails: (the values
    before it, its `WireJSONError` or None). The SSE chunks of one read: the screen for
    integers orjson would round is one pass over all of them (a run of digits that spans
    two documents only sends them the slower way)."""
    screened = _LONG_RUN not in "".join(docs).encode("utf-8", "surrogatepass").translate(_SHAPE)
    values: list[Any] = []
    for doc in docs:
        try:
            if screened:
                values.append(_screened(doc, max_depth=max_depth, strict=False))
            else:
                values.append(loads(doc, max_depth=max_depth))
        except WireJSONError as exc:
            return values, exc
    return values, None


def _screened(raw: bytes | bytearray | str, *, max_depth: int, strict: bool) -> Any:
    """`loads` of a document with no run of 19 digits: orjson first, the standard decoder for
    what orjson refuses (it says what is wrong, or accepts what JSON does not)."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _standard_loads(raw, max_depth=max_depth, strict=strict)
    # a document nested deeper than max_depth has more brackets than that (and is longer)
    if len(raw) > max_depth and _brackets(raw) > max_depth and depth_exceeds(value, max_depth):
        raise WireJSONError(f"nested deeper than {max_depth} levels")
    return value


def _brackets(raw: bytes | bytearray | str) -> int:
    if isinstance(raw, str):
        return raw.count("[") + raw.count("{")
    return raw.count(b"[") + raw.count(b"{")


def _standard_loads(raw: bytes | bytearray | str, *, max_depth: int, strict: bool) -> Any:
    """`loads` with Python's decoder alone (the reference `loads` must agree with)."""
    if isinstance(raw, bytes | bytearray):
        try:
            text = bytes(raw).decode("utf-8-sig", errors="strict" if strict else "replace")
        except UnicodeDecodeError as exc:
            raise WireJSONError(f"not UTF-8 at byte {exc.start}") from None
    else:
        text = raw
    try:
        value = (_STRICT if strict else _LENIENT).decode(text)
    except WireJSONError:
        raise
    except RecursionError:
        raise WireJSONError(f"nested deeper than {max_depth} levels") from None
    except ValueError as exc:  # JSONDecodeError and the int-string limit
        first = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise WireJSONError(f"not JSON: {first}") from None
    if text.count("[") + text.count("{") > max_depth and depth_exceeds(value, max_depth):
        raise WireJSONError(f"nested deeper than {max_depth} levels")
    if strict and _has_lone_surrogate(value):
        raise WireJSONError("a string holds a lone surrogate (not valid Unicode)")
    return value
