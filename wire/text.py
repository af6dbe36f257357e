"""Where upstream bytes become strings of ours: scrub the key first, then cut.

Every string we keep from a provider's reply (an error message, a metadata value, a
provider name, a reply text) passes through `upstream_text` or a `Scrubber`, in that order:
scrubbing after a cut would let the part of the key before the cut survive.

A `Scrubber` removes, case-insensitively:
- the key itself, and so its `Bearer <key>` header form;
- any fragment of it of `MIN_FRAGMENT` (8) or more characters (a provider that echoes the
  header cut to its first 20 characters still leaks 20 characters of it).
Each removed run becomes `***`. Keys shorter than `MIN_FRAGMENT` are removed whole only.
"""

from __future__ import annotations

from typing import Any

MIN_FRAGMENT = 8
REDACTED = "***"
MAX_TEXT_CHARS = 500  # an error message or metadata value kept from upstream


class Scrubber:
    """Removes one secret, its case variants and its 8+ character fragments from text."""

    __slots__ = ("_grams", "_secret")

    def __init__(self, secret: str | None) -> None:
        self._secret = (secret or "").lower()
        s = self._secret
        n = MIN_FRAGMENT if len(s) >= MIN_FRAGMENT else len(s)
        self._grams: tuple[str, ...] = (
            tuple(dict.fromkeys(s[i : i + n] for i in range(len(s) - n + 1))) if s else ()
        )

    def __bool__(self) -> bool:
        return bool(self._secret)

    def __repr__(self) -> str:  # never the secret
        return f"Scrubber(active={bool(self)})"

    def __call__(self, text: str) -> str:
        if not self._grams or not text:
            return text
        folded = text.lower()
        if len(folded) != len(text):  # a case mapping changed the length: match exactly
            folded = text
        if not any(g in folded for g in self._grams):  # the common case, at C speed
            return text
        return self._redact(text, folded)

    def _redact(self, text: str, folded: str) -> str:
        n = len(self._grams[0])
        out: list[str] = []
        i = keep_from = 0
        while i <= len(folded) - n:
            if folded[i : i + n] not in self._secret:
                i += 1
                continue
            j = i + n  # extend the run while it is still part of the secret
            while j < len(folded) and folded[i : j + 1] in self._secret:
                j += 1
            out.append(text[keep_from:i])
            out.append(REDACTED)
            i = keep_from = j
        out.append(text[keep_from:])
        return "".join(out)

    def deep(self, value: Any, *, limit: int = MAX_TEXT_CHARS, depth: int = 8) -> Any:
        """`value` (JSON-like) with every string, keys included, passed through
        `upstream_text`; containers deeper than `depth` become one scrubbed, cut string."""
        if isinstance(value, str):
            return upstream_text(value, self, limit)
        if value is None or isinstance(value, bool | int | float):
            return value
        if depth <= 0 or not isinstance(value, dict | list | tuple):
            return upstream_text(_short_repr(value), self, limit)
        if isinstance(value, dict):
            return {
                upstream_text(str(k), self, 100): self.deep(v, limit=limit, depth=depth - 1)
                for k, v in list(value.items())[:50]
            }
        return [self.deep(v, limit=limit, depth=depth - 1) for v in list(value)[:50]]


NO_SECRET = Scrubber(None)


def _short_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:  # a hostile __repr__ is not ours to debug
        text = f"<{type(value).__name__}>"
    return text[: MAX_TEXT_CHARS * 4]


def upstream_text(value: object, scrub: Scrubber, limit: int = MAX_TEXT_CHARS) -> str:
    """`value` as a string of ours: decoded (bytes as UTF-8 with replacements, lone
    surrogates replaced), scrubbed of the key, then cut to `limit` characters."""
    if isinstance(value, bytes | bytearray):
        text = bytes(value[: limit * 8 + 256]).decode("utf-8", errors="replace")
    elif isinstance(value, str):
        text = value
    else:
        text = _short_repr(value)
    # Cut generously before scrubbing (bounded work), scrub, then cut exactly.
    text = scrub(text[: limit * 4 + 256])
    text = text.encode("utf-8", errors="replace").decode("utf-8")  # lone surrogates -> ?
    return text[:limit]
