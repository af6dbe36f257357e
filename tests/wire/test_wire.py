"""The one wire module: key scrubbing before cutting, total bounded JSON, Retry-After,
and the same hostile envelopes parsed alike by the probe path and the router path."""

from __future__ import annotations

import contextlib
import itertools
import json
import math
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import SecretStr

from probes.client import ProbeClient
from probes.types import Contract, Endpoint, Transcript
from routing.deadline import AttemptBudget
from routing.upstream import Upstream
from tests.fixtures.hostile import Hostile, json_reply, raw_reply
from wire import jsonio
from wire.errors import ErrorInfo, parse_error
from wire.retry_after import parse_retry_after
from wire.text import MIN_FRAGMENT, Scrubber, StreamScrubber, upstream_text, valid_unicode

KEY = "sk-or-v1-" + "0123456789abcdef" * 4  # lower-case hex, like a real key


def fragments(text: str, secret: str = KEY, n: int = MIN_FRAGMENT) -> list[str]:
    """Every n-character piece of `secret` found in `text`, case-insensitively."""
    low = text.lower()
    return [secret[i : i + n] for i in range(len(secret) - n + 1) if secret[i : i + n] in low]


# ---- scrubbing ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        KEY,
        f"Authorization: Bearer {KEY}",
        f"bad key {KEY.upper()} given",
        f"prefix{KEY[5:30]}suffix",
        f"{KEY[:8]} and {KEY[-8:]}",
        json.dumps({"headers": {"authorization": f"Bearer {KEY}"}}),
    ],
)
def test_r10_scrubber_removes_the_key_its_bearer_form_case_variants_and_fragments(
    text: str,
) -> None:
    """Whole key, header form, upper case and 8+ character fragments all become ***."""
    out = Scrubber(KEY)(text)
    assert fragments(out) == [] and "***" in out


def test_r10_scrubber_keeps_short_coincidences_and_clean_text() -> None:
    """A 7-character overlap is not a fragment; text without the key is returned as is."""
    s = Scrubber(KEY)
    assert s(f"x{KEY[:7]}y") == f"x{KEY[:7]}y"
    assert s("no secret here") == "no secret here"
    assert Scrubber(None)(KEY) == KEY and "0123" not in repr(Scrubber(KEY))


def test_r10_key_is_scrubbed_before_the_cut() -> None:
    """A key straddling the cut would leave its head behind if the cut came first."""
    text = "x" * 490 + KEY
    assert len(fragments(text[:500])) > 0  # what the old cut-then-scrub kept
    assert fragments(upstream_text(text, Scrubber(KEY), 500)) == []


def test_r10_deep_metadata_is_scrubbed_at_any_depth() -> None:
    """Keys anywhere in metadata, keys of objects included, never survive."""
    meta: dict[str, Any] = {"raw": {"a": [{"b": {KEY: f"Bearer {KEY}"}}]}}
    out = Scrubber(KEY).deep(meta)
    assert fragments(json.dumps(out)) == []


@settings(max_examples=200, deadline=None)
@given(
    before=st.text(max_size=600),
    after=st.text(max_size=600),
    start=st.integers(0, len(KEY) - MIN_FRAGMENT),
    length=st.integers(MIN_FRAGMENT, len(KEY)),
    upper=st.booleans(),
    where=st.sampled_from(["message", "error_type", "provider_name", "provider_code", "meta"]),
)
def test_r10_property_random_envelopes_never_yield_a_key_fragment(
    before: str, after: str, start: int, length: int, upper: bool, where: str
) -> None:
    """Any envelope with a key fragment embedded anywhere parses to a key-free ErrorInfo."""
    piece = KEY[start : start + length]
    piece = piece.upper() if upper else piece
    value = before + piece + after
    err: dict[str, Any] = {"code": 502, "message": "m", "metadata": {}}
    if where == "message":
        err["message"] = value
    elif where == "meta":
        err["metadata"] = {"raw": {"deep": [value]}}
    else:
        err["metadata"][where] = value
    info = parse_error({"error": err}, scrub=Scrubber(KEY))
    assert info is not None and fragments(info.model_dump_json()) == []


_RANDOM_KEY = "sk-or-v1-5f0c9e1b7a3d4c2e8f6a0b1c9d7e5f3a2b4c6d8e0f1a3b5c7d9e2f4a6b8c0d1e3f"


@given(
    before=st.text(max_size=6), after=st.text(max_size=6), start=st.integers(0, 64),
    length=st.integers(0, 12), upper=st.booleans(),
)  # fmt: skip
def test_r10_a_short_text_is_scrubbed_by_its_windows_as_a_long_one_by_the_grams(
    before: str, after: str, start: int, length: int, upper: bool
) -> None:
    """Short texts (a usage key, a provider name) are looked up window by window against a
    key of 66 distinct grams: a fragment of 8 or more is removed, anything shorter kept."""
    piece = _RANDOM_KEY[start : start + length]
    text = before + (piece.upper() if upper else piece) + after
    out = Scrubber(_RANDOM_KEY)(text)
    assert fragments(out, _RANDOM_KEY) == []
    if fragments(text, _RANDOM_KEY) == []:
        assert out == text


# ---- bounded JSON -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "strict"),
    [
        (b"[" * 100_000 + b"]" * 100_000, False),
        (b'{"a":' * 100 + b"1" + b"}" * 100, False),
        (b"1" * 5000, False),
        (b'{"x": NaN}', True),
        (b'{"x": -Infinity}', True),
        (b'{"x": 1e999}', True),
        (b'{"x": "\\ud800"}', True),
        (b'{"x": "\xff"}', True),
        (b"not json", False),
    ],
)
def test_r7_jsonio_is_total_and_bounded(raw: bytes, strict: bool) -> None:
    """Hostile JSON becomes one WireJSONError (a ValueError), never RecursionError et al."""
    with pytest.raises(jsonio.WireJSONError):
        jsonio.loads(raw, strict=strict)


def test_r7_jsonio_accepts_ordinary_json_and_a_bom() -> None:
    assert jsonio.loads(b'\xef\xbb\xbf{"a": [1, 2.5, "x"]}', strict=True) == {"a": [1, 2.5, "x"]}
    assert jsonio.loads(b'{"x": NaN}')["x"] != 0  # lenient mode for provider replies


@settings(max_examples=150, deadline=None)
@given(
    st.binary(max_size=2000)
    | st.text(max_size=2000).map(lambda t: t.encode("utf-8", "surrogatepass"))
)
def test_r7_jsonio_fuzz_raises_only_its_own_error(raw: bytes) -> None:
    """Random bytes decode or raise WireJSONError, nothing else."""
    for strict in (False, True):
        with contextlib.suppress(jsonio.WireJSONError):
            jsonio.loads(raw, strict=strict)


_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


def _same(a: Any, b: Any) -> bool:
    """Equal values of equal types (1 is not 1.0; NaN is NaN; -0.0 is not 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (a != a and b != b) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


@settings(max_examples=300, deadline=None)
@given(
    value=_JSON_VALUES,
    ascii_only=st.booleans(),
    as_bytes=st.booleans(),
    cut=st.integers(0, 400),
    insert=st.sampled_from(["", "[", "{", "]", ",", "9" * 19, "\\ud800", "NaN", "\ufeff", "1e999"]),
)
def test_r7_jsonio_fast_path_decodes_exactly_as_the_standard_decoder(
    value: Any, ascii_only: bool, as_bytes: bool, cut: int, insert: str
) -> None:
    """orjson only decides faster, never differently: for documents and near-documents
    (big integers, NaN, surrogates, a BOM, nesting, broken syntax), `loads` gives the same
    value of the same types as Python's decoder alone, or both refuse (jsonio docstring)."""
    text = json.dumps(value, ensure_ascii=ascii_only)
    cut = min(cut, len(text))
    text = text[:cut] + insert + text[cut:] if insert else text
    raw: str | bytes = text.encode("utf-8", "surrogatepass") if as_bytes else text
    for strict in (False, True):
        try:
            reference = jsonio._standard_loads(raw, max_depth=jsonio.MAX_DEPTH, strict=strict)
        except jsonio.WireJSONError:
            with pytest.raises(jsonio.WireJSONError):
                jsonio.loads(raw, strict=strict)
            continue
        assert _same(jsonio.loads(raw, strict=strict), reference), (raw, strict)


# ---- Retry-After --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("7", 7.0),
        ("Tue, 01 Dec 2026 12:00:05 GMT", 5.0),
        ("Tue, 01 Dec 2026 12:00:05", 5.0),  # no zone: GMT, the RFC's only one
        ("Tue, 01 Dec 2026 12:00:05 -0000", 5.0),
        ("Tue, 01 Dec 2026 11:00:00 GMT", 0.0),
        ("inf", None),
        ("9" * 400, None),
        ("", None),
    ],
)
def test_r5_retry_after_both_forms_and_zone_less_dates(value: str, expected: float | None) -> None:
    """Seconds or HTTP date, a zone-less date read as GMT, a naive `now` read as UTC."""
    for now in (datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC), datetime(2026, 12, 1, 12, 0, 0)):
        assert parse_retry_after(value, now) == expected


# ---- the probe path and the router path agree ---------------------------------------------

ENVELOPES: list[tuple[int, bytes, dict[str, str]]] = [
    (
        429,
        json.dumps(
            {
                "error": {
                    "code": "429",
                    "message": f"rate limited for Bearer {KEY}",
                    "metadata": {
                        "error_type": f"rate_{KEY[:20]}",
                        "provider_name": KEY.upper(),
                        "provider_code": KEY[10:40],
                    },
                }
            }
        ).encode(),
        {"Retry-After": "3"},
    ),
    (
        502,
        json.dumps(
            {
                "error": {
                    "code": 502,
                    "message": "x" * 495 + KEY,
                    "metadata": {"raw": {"echo": [{"authorization": f"Bearer {KEY}"}]}},
                }
            }
        ).encode(),
        {},
    ),
    (403, json.dumps({"error": f"moderation: {KEY}"}).encode(), {}),
    (500, b'{"error": {"message": "' + b"[" * 5000 + b'"}}', {}),
    (503, b"<html>" + KEY.encode() + b"</html>", {"Retry-After": "Tue, 01 Dec 2099 00:00:00"}),
]


def _endpoint() -> Endpoint:
    return Endpoint(model_id="hostile/model", tag="hostile/fp8", provider_name="Hostile")


async def _through_both_paths(hostile: Hostile) -> tuple[Transcript, ErrorInfo | None]:
    """The hostile reply read by the canary's probe client and by the gateway's upstream."""
    async with ProbeClient(hostile.base_url, api_key=KEY) as client:
        t = await client.probe(
            _endpoint(), Contract.START, [{"role": "user", "content": "hi"}], locale="en"
        )
    upstream = Upstream(hostile.base_url, SecretStr(KEY))
    try:
        async with upstream.call({"model": "m", "messages": []}, AttemptBudget(2.0, 5.0)) as call:
            info = await call.start()
    finally:
        await upstream.aclose()
    return t, info


@pytest.mark.parametrize(("status", "body", "headers"), ENVELOPES)
async def test_r2_c2_probe_and_router_parse_hostile_envelopes_alike(
    hostile: Hostile, status: int, body: bytes, headers: dict[str, str]
) -> None:
    """The same error reply read by the canary's client and the gateway's upstream client
    gives the same ErrorInfo (code, message, type, provider fields, metadata), key-free."""
    hostile.handler = lambda req: raw_reply(status, body, headers)
    t, info = await _through_both_paths(hostile)
    assert t.error is not None and info is not None
    probe = t.error.model_dump(exclude={"in_band", "retry_after_s"})
    routed = info.model_dump(exclude={"in_band", "retry_after_s"})
    assert probe == routed
    assert probe["code"] == status
    assert (t.error.retry_after_s is None) == (info.retry_after_s is None)
    assert fragments(t.model_dump_json()) == [] and fragments(info.model_dump_json()) == []


async def test_r2_probe_and_router_agree_on_a_clean_envelope(hostile: Hostile) -> None:
    """A plain envelope: both read code, message and error_type the same way."""
    payload = {"error": {"code": 429, "message": "slow down",
                         "metadata": {"error_type": "rate_limit_exceeded"}}}  # fmt: skip
    hostile.handler = lambda req: json_reply(429, payload, {"Retry-After": "2"})
    t, info = await _through_both_paths(hostile)
    assert t.error is not None and info is not None
    assert (t.error.code, t.error.message, t.error.error_type, t.error.retry_after_s) == (
        429, "slow down", "rate_limit_exceeded", 2.0,
    ) == (info.code, info.message, info.error_type, info.retry_after_s)  # fmt: skip


# ---- a reply in pieces --------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    before=st.text(max_size=80),
    after=st.text(max_size=80),
    start=st.integers(0, len(KEY) - MIN_FRAGMENT),
    length=st.integers(MIN_FRAGMENT, len(KEY)),
    upper=st.booleans(),
    cuts=st.lists(st.integers(0, 400), max_size=12),
)
def test_r10_stream_scrubber_finds_a_key_split_across_pieces(
    before: str, after: str, start: int, length: int, upper: bool, cuts: list[int]
) -> None:
    """A key piece split at random points across stream pieces never survives in what is
    released; text without the key comes out unchanged (R10)."""
    piece = KEY[start : start + length]
    text = before + (piece.upper() if upper else piece) + after
    bounds = sorted({0, len(text), *(c for c in cuts if c < len(text))})
    s = StreamScrubber(Scrubber(KEY))
    out = "".join(s.feed(text[a:b]) for a, b in itertools.pairwise(bounds)) + s.flush()
    assert fragments(out) == [] and "***" in out
    clean = StreamScrubber(Scrubber(KEY))
    plain = before + after
    if not fragments(plain):
        released = "".join(clean.feed(plain[a:b]) for a, b in itertools.pairwise(bounds))
        assert valid_unicode(released + clean.flush()) == valid_unicode(plain)


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(_JSON_VALUES, max_size=6),
    ascii_only=st.booleans(),
    broken=st.lists(
        st.tuples(
            st.integers(0, 5),
            st.integers(0, 400),
            st.sampled_from(
                [
                    "[",
                    "{",
                    "]",
                    ",",
                    "9" * 19,
                    "\\ud800",
                    "\ud800",
                    "NaN",
                    "\ufeff",
                    "1e999",
                    "deep",
                ]
            ),
        ),
        max_size=3,
    ),
)
def test_issue26_loads_each_decodes_as_loads_does_one_by_one(
    values: list[Any], ascii_only: bool, broken: list[tuple[int, int, str]]
) -> None:
    """The batch of one read decodes exactly as `loads` of each document in turn: the same
    values up to the first document `loads` refuses, then that refusal."""
    docs = [json.dumps(v, ensure_ascii=ascii_only) for v in values]
    for at, cut, insert in broken:
        if at < len(docs) and insert == "deep":  # valid JSON nested past MAX_DEPTH
            docs[at] = "[" * (jsonio.MAX_DEPTH + 6) + "]" * (jsonio.MAX_DEPTH + 6)
        elif at < len(docs):
            doc = docs[at]
            docs[at] = doc[: min(cut, len(doc))] + insert + doc[min(cut, len(doc)) :]
    expected: list[Any] = []
    refused = False
    for doc in docs:
        try:
            expected.append(jsonio.loads(doc))
        except jsonio.WireJSONError:
            refused = True
            break
    got, error = jsonio.loads_each(docs)
    assert (error is not None) == refused and isinstance(error, jsonio.WireJSONError | None)
    assert len(got) == len(expected) and all(map(_same, got, expected)), (docs, got, expected)
