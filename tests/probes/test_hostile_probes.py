"""The canary's readers against hostile bytes (issue 10): the probe client over real HTTP to
the hostile fixture, fuzzed with random nesting, sizes and encodings, never raises and every
judge concludes; discovery documents that cannot be parsed are one typed error; a probe set
that raised, or was answered only with 4xx, is frozen (never clean)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ground.settings import ProbeConfig
from probes.client import ProbeClient
from probes.contracts import judge_latency, judge_refusal, judge_structured
from probes.errors import MalformedDiscoveryPayload
from probes.probeset import ProbeSetResult, judge_language, reply_outcome
from probes.structured import validate_object
from probes.types import Contract, Endpoint, Outcome, OutcomeStatus, Transcript
from probes.unjudged import refused_everything, unjudged_outcomes, unjudged_set
from quarantine.verdicts import RoundVerdict, round_verdict
from tests.fixtures.hostile import Hostile, Reply, head, raw_reply

KEY = "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"
ENDPOINT = Endpoint(
    model_id="hostile/model",
    tag="hostile/fp8",
    provider_name="Hostile",
    supported_parameters=("response_format",),
)


def fragments(text: str, n: int = 8) -> list[str]:
    low = text.lower()
    return [KEY[i : i + n] for i in range(len(KEY) - n + 1) if KEY[i : i + n] in low]


def judge_all(t: Transcript) -> list[Outcome]:
    """Every judge a probe set runs on a transcript."""
    out = [
        judge_latency(t, 5.0),
        judge_refusal(t, "en"),
        judge_structured(t, ENDPOINT),
        judge_language(t, "en"),
    ]
    reply = reply_outcome(t, "en")
    return out + ([reply] if reply is not None else [])


# ---- fuzz: SSE and JSON parsing of the probe client ---------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=30,
)


def _nest(depth: int, inner: str = "1") -> str:
    return "[" * depth + inner + "]" * depth


@st.composite
def data_payloads(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["chunk", "value", "nested", "bigint", "bytes", "surrogate"]))
    if kind == "chunk":
        payload: dict[str, Any] = {
            "id": draw(st.text(max_size=20)),
            "provider": draw(st.sampled_from(["Hostile", "Other"]) | json_values),
            "choices": draw(
                st.lists(
                    st.fixed_dictionaries(
                        {"delta": st.fixed_dictionaries({"content": json_values}),
                         "finish_reason": json_values}
                    ),
                    max_size=2,
                )
                | json_values
            ),
        }  # fmt: skip
        payload.update(
            draw(st.dictionaries(st.sampled_from(["error", "usage", "provider"]), json_values, max_size=2))
        )  # fmt: skip
        return json.dumps(payload).encode()
    if kind == "value":
        return json.dumps(draw(json_values)).encode()
    if kind == "nested":
        return _nest(draw(st.sampled_from([10, 64, 65, 1000, 100_000]))).encode()
    if kind == "bigint":
        return b'{"choices": [{"delta": {"content": "x"}}], "n": ' + b"7" * draw(st.sampled_from([99, 101, 5000])) + b"}"  # fmt: skip
    if kind == "surrogate":
        return b'{"provider": "Hostile", "choices": [{"delta": {"content": "a\\udc00b"}}]}'
    return draw(st.binary(max_size=200))


@st.composite
def hostile_replies(draw: st.DrawFn) -> Reply:
    kind = draw(st.sampled_from(["sse", "json", "status"]))
    encoding = draw(st.sampled_from(["utf-8", "utf-16", "latin-1"]))
    if kind == "status":
        body = draw(data_payloads())
        status = draw(st.sampled_from([400, 403, 404, 429, 500, 502]))
        return raw_reply(status, body)
    if kind == "json":
        return raw_reply(200, draw(data_payloads()))
    lines: list[bytes] = []
    for _ in range(draw(st.integers(0, 6))):
        sep = draw(st.sampled_from([b"\n\n", b"\r\n\r\n", b"\n", b"\r"]))
        lines.append(b"data: " + draw(data_payloads()) + sep)
    if draw(st.booleans()):
        lines.append(b": keep-alive\n\n")
    if draw(st.booleans()):
        lines.append(b"data: [DONE]\n\n")
    if encoding != "utf-8":  # a whole stream in another encoding
        lines = [line.decode("utf-8", "replace").encode(encoding, "replace") for line in lines]
    return Reply([head(200, {"Content-Type": "text/event-stream"}), *lines])


async def _probe(base_url: str, contract: Contract) -> Transcript:
    async with ProbeClient(base_url, KEY, ProbeConfig(ttft_threshold_s=2.0, total_timeout_s=5.0, max_bytes=300_000)) as c:  # fmt: skip
        return await c.probe(ENDPOINT, contract, [{"role": "user", "content": "hi"}], locale="en")


def test_c2_fuzz_probe_client_sse_and_json_parsing_never_raises(hostile: Hostile) -> None:
    """Random replies (SSE with random chunk shapes, nesting up to 100k, 5,000-digit integers,
    lone surrogates, random bytes, other encodings and line ends; JSON bodies; error statuses):
    `probe()` returns a transcript, every judge concludes, the transcript serialises (C2)."""

    @settings(max_examples=80, deadline=None)
    @given(reply=hostile_replies(), contract=st.sampled_from(list(Contract)))
    def check(reply: Reply, contract: Contract) -> None:
        parts = list(reply.parts)
        hostile.handler = lambda req: Reply(list(parts))
        t = asyncio.run(_probe(hostile.base_url, contract))
        outcomes = judge_all(t)
        assert all(isinstance(o.status, OutcomeStatus) for o in outcomes)
        json.loads(t.model_dump_json())
        for o in outcomes:
            json.loads(o.model_dump_json())

    check()


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (_nest(100_000), "invalid_json"),
        ('{"name": "Mara", "mood": "calm", "age": ' + "9" * 5000 + "}", "invalid_json"),
        ('{"name": "Mara", "mood": "calm", "age": NaN}', "invalid_json"),
        ('{"name": ' + _nest(1000, '"x"') + ', "mood": "calm", "age": 3}', "invalid_json"),
        ('{"name": ' + _nest(10, '"x"') + ', "mood": "calm", "age": 3}', "schema_violation"),
    ],
)
def test_c6_deep_or_huge_structured_output_is_a_typed_failure(text: str, reason: str) -> None:
    """Structured output nested 100k deep, with a 5,000-digit integer or NaN: `invalid_json`
    (a quality failure of the endpoint), never an exception (C6)."""
    problem = validate_object(text)
    assert problem is not None and problem[0] == reason


# ---- discovery ----------------------------------------------------------------------------

DISCOVERY = [
    b'{"data": ' + _nest(100_000).encode() + b"}",
    b'{"data": {"endpoints": [{"tag": "a", "provider_name": "A", "status": 1e999}]}}',
    b'{"data": {"endpoints": [{"tag": "a", "provider_name": "A", "status": NaN}]}}',
    b'{"data": {"endpoints": [{"tag": "a", "provider_name": "A", "status": '
    + b"9" * 5000
    + b"}]}}",
    b'{"data": {"endpoints": [{"tag": "a", "provider_name": "A", "pricing": {"prompt": "'
    + b"1" * 5000
    + b'"}}]}}',
    b'{"data": {"endpoints": [{"tag": "' + KEY.encode() + b'", "provider_name": 5}]}}',
    b'{"data": {"endpoints": [{"tag": "a", "provider_name": "A", "context_length": "'
    + KEY.encode()
    + b'"}]}}',
    b'{"data": {"endpoints": 7}}',
]


@pytest.mark.parametrize("body", DISCOVERY)
async def test_c1_unparseable_discovery_is_one_typed_error_without_the_key(
    hostile: Hostile, body: bytes
) -> None:
    """Deep, overflowing, huge or ill-typed discovery documents raise only
    MalformedDiscoveryPayload, with a one-line message, no chained cause and no key (C1)."""
    hostile.handler = lambda req: raw_reply(200, body)
    async with ProbeClient(hostile.base_url, KEY) as client:
        with pytest.raises(MalformedDiscoveryPayload) as info:
            await client.discover("hostile/model")
    message = str(info.value)
    assert len(message.splitlines()) == 1 and fragments(message) == []
    assert info.value.__cause__ is None and info.value.__suppress_context__


# ---- frozen, never clean ------------------------------------------------------------------


def _transcript(contract: Contract, status: int) -> Transcript:
    return Transcript(
        request_id="r", model_id="m", tag="hostile/fp8", pinned_provider="Hostile",
        contract=contract, locale="en", http_status=status,
    )  # fmt: skip


@pytest.mark.parametrize("statuses", [[400] * 5, [400, 403, 422, 400, 413]])
def test_q1_an_endpoint_answering_every_probe_with_a_4xx_is_frozen(statuses: list[int]) -> None:
    """Every probe answered 400/403/422: the judges alone would say inconclusive (a clean
    round before issue 23, unjudged since: no evidence of health either); the set is frozen
    instead (Q1, Q5)."""
    contracts = [Contract.LANGUAGE, Contract.REFUSAL, Contract.START, Contract.START, Contract.STRUCTURED]  # fmt: skip
    ts = [_transcript(c, s) for c, s in zip(contracts, statuses, strict=True)]
    outcomes = {
        Contract.LATENCY: judge_latency(ts[0], 5.0),
        Contract.LANGUAGE: judge_language(ts[0], "en"),
        Contract.REFUSAL: judge_refusal(ts[1], "en"),
        Contract.STRUCTURED: judge_structured(ts[4], ENDPOINT),
        Contract.START: Outcome(
            contract=Contract.START, status=OutcomeStatus.INCONCLUSIVE, reason="too_few_replies"
        ),
    }
    result = ProbeSetResult(tag="hostile/fp8", locale="en", transcripts=ts, outcomes=outcomes)
    assert round_verdict("hostile/fp8", list(result.outcomes.values())).verdict is RoundVerdict.UNJUDGED  # fmt: skip
    frozen = refused_everything(result)
    assert round_verdict("hostile/fp8", list(frozen.outcomes.values())).verdict is RoundVerdict.FROZEN  # fmt: skip
    assert {o.reason for o in frozen.outcomes.values()} == {"http_4xx_only"}


def test_q1_rate_limits_or_one_answered_probe_keep_the_judges_verdicts() -> None:
    """A 429 among the 4xx, or one 200, leaves the set as the judges made it; a failure is
    kept as a failure (Q1)."""
    ts = [_transcript(Contract.REFUSAL, 403), _transcript(Contract.START, 429)]
    result = ProbeSetResult(tag="t", locale="en", transcripts=ts, outcomes={})
    assert refused_everything(result) is result
    fail = Outcome(contract=Contract.REFUSAL, status=OutcomeStatus.FAIL, reason="moderation_403")
    only_4xx = ProbeSetResult(
        tag="t", locale="en", transcripts=[ts[0]], outcomes={Contract.REFUSAL: fail}
    )
    assert refused_everything(only_4xx).outcomes[Contract.REFUSAL] == fail


def test_c2_a_probe_set_that_raised_is_frozen_with_typed_outcomes() -> None:
    """An exception while probing or judging an endpoint: every contract TRANSPORT
    `invalid_response` naming only the exception type (the round goes on, frozen) (C2, Q1)."""
    result = unjudged_set(ENDPOINT, "en", RecursionError(f"boom {KEY}"))
    assert set(result.outcomes) == set(Contract)
    assert {(o.status, o.reason) for o in result.outcomes.values()} == {
        (OutcomeStatus.TRANSPORT, "invalid_response")
    }
    assert fragments(result.model_dump_json()) == []
    assert round_verdict("hostile/fp8", list(result.outcomes.values())).verdict is RoundVerdict.FROZEN  # fmt: skip
    votes = unjudged_outcomes(ENDPOINT, "en", ValueError(KEY), attempts=2)
    assert [o.status for o in votes] == [OutcomeStatus.TRANSPORT] * 2
