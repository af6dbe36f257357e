"""Contracts rotated across rounds (SPEC C13): the last way a round saves money before a
budget freezes it. A rotated probe set sends the start samples and *one* of the endpoint's
single-request contracts (language, refusal, structured where advertised), in turn from
round to round and staggered across endpoints, plus every single contract the endpoint is
failing in its current streak, so a failing host is decided at its next round. Contracts
not sent are not skipped silently: each gets an `inconclusive` outcome `rotated_out`, which
makes it *unjudged* for the round (`quarantine/judged.py`). Latency (C3) is judged over the
text requests sent, the response start (C9) and the stream (C12) over their replies: a
rotated set sends enough start samples that at least `start_anomaly_min_replies` replies are
judged. The tools contract (C10, 26 requests at the defaults: the dearest) is rotated out
unless the endpoint is failing it in its current streak; then all its requests are sent.

    rotated_contracts(endpoint, position, index, failing)  which singles are sent
    rotated_start_samples(contracts, minimum, config)       how many start samples
    run_rotated_probe_set(client, endpoint, locale, ...)    send and judge (the I/O)
    judge_rotated(endpoint, locale, transcripts, ...)       the judge (pure)
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence

from ground.settings import ProbeConfig
from probes.client import ProbeClient
from probes.contracts import classify_transport, judge_refusal, judge_structured
from probes.integrity import judge_start_share
from probes.probeset import (
    ProbeSetResult,
    judge_language,
    latency_of_set,
    probe_requests,
    reply_outcome,
    send,
    with_anomalous_heads,
)
from probes.streams import judge_stream
from probes.tool_verdicts import judge_tools, not_advertised
from probes.types import Contract, Endpoint, Outcome, OutcomeStatus, Transcript

ROTATED_OUT = "rotated_out"
TEXT_SINGLES = (Contract.LANGUAGE, Contract.REFUSAL)


def singles(endpoint: Endpoint) -> tuple[Contract, ...]:
    """The single-request contracts of an endpoint's probe set, in rotation order."""
    out = list(TEXT_SINGLES)
    if endpoint.supports_structured_output:
        out.append(Contract.STRUCTURED)
    return tuple(out)


def rotated_contracts(
    endpoint: Endpoint, position: int, index: int, failing: Collection[str] = ()
) -> frozenset[Contract]:
    """The singles a rotated round sends to `endpoint` (at `position` in the round's sorted
    targets, in round `index`): one in turn, plus those it is failing (`failing`: contract
    names of its current streak)."""
    own = singles(endpoint)
    chosen = {own[(index + position) % len(own)]}
    chosen |= {c for c in own if c.value in failing}
    if endpoint.supports_tools and Contract.TOOLS.value in failing:
        chosen.add(Contract.TOOLS)
    return frozenset(chosen)


def rotated_start_samples(
    contracts: Collection[Contract], minimum: int, config: ProbeConfig
) -> int:
    """Start samples of a rotated set: `minimum`, or more when the text singles sent would
    leave the start contract with fewer than `start_anomaly_min_replies` replies."""
    text = sum(1 for c in contracts if c in TEXT_SINGLES)
    return max(minimum, config.start_anomaly_min_replies - text, 0)


def rotated_requests(
    contracts: Collection[Contract], start_samples: int, tool_requests: int = 0
) -> int:
    """Requests a rotated set sends (`tool_requests`: those of the tools contract, when sent)."""
    chosen = set(contracts)
    tools = tool_requests if Contract.TOOLS in chosen else 0
    return start_samples + len(chosen - {Contract.TOOLS}) + tools


def tool_requests(config: ProbeConfig) -> int:
    """Requests of the tools contract in one probe set (probes/tools.py `tool_probes`)."""
    return config.tool_samples + 2 * config.tool_check_samples + 2 * config.tool_trigger_samples


def _rotated_out(contract: Contract, tag: str, locale: str) -> Outcome:
    return Outcome(
        contract=contract,
        status=OutcomeStatus.INCONCLUSIVE,
        reason=ROTATED_OUT,
        tag=tag,
        locale=locale,
        evidence={"budget": "rotated across rounds: not probed this round"},
    )


def judge_rotated(
    endpoint: Endpoint,
    locale: str,
    transcripts: list[Transcript],
    config: ProbeConfig,
    contracts: Collection[Contract],
) -> ProbeSetResult:
    """The outcomes of a rotated probe set (pure): the judges of a full probe set
    (`probes.probeset.judge_probe_set`) for what was sent, `rotated_out` for the rest."""
    tag = endpoint.tag
    text_ts = [t for t in transcripts if t.contract not in (Contract.STRUCTURED, Contract.TOOLS)]
    replies = [o for o in (reply_outcome(t, t.locale or locale) for t in text_ts) if o is not None]
    start = with_anomalous_heads(judge_start_share(replies, config), replies).model_copy(
        update={"tag": tag, "locale": locale}
    )
    cut = next((o for o in map(classify_transport, text_ts) if o is not None), None)
    if not replies and cut is not None:
        start = cut.model_copy(update={"contract": Contract.START})
    sent = {t.contract: t for t in transcripts}
    outcomes: dict[Contract, Outcome] = {Contract.START: start}
    if text_ts:
        outcomes[Contract.LATENCY] = latency_of_set(text_ts, config.ttft_threshold_s)
    judges = {
        Contract.LANGUAGE: lambda t: judge_language(t, locale),
        Contract.REFUSAL: lambda t: judge_refusal(t, locale),
        Contract.STRUCTURED: lambda t: judge_structured(t, endpoint),
    }
    for contract in singles(endpoint):
        t = sent.get(contract) if contract in contracts else None
        outcomes[contract] = judges[contract](t) if t else _rotated_out(contract, tag, locale)
    if Contract.STRUCTURED not in outcomes and transcripts:  # not advertised: unsupported
        outcomes[Contract.STRUCTURED] = judge_structured(transcripts[0], endpoint)
    extra = _tools_and_stream(endpoint, locale, transcripts, config, contracts, outcomes)
    return ProbeSetResult(
        tag=tag,
        locale=locale,
        transcripts=transcripts,
        outcomes=outcomes,
        reply_outcomes=replies,
        extra_outcomes=extra,
    )


def _tools_and_stream(
    endpoint: Endpoint,
    locale: str,
    transcripts: list[Transcript],
    config: ProbeConfig,
    contracts: Collection[Contract],
    outcomes: dict[Contract, Outcome],
) -> list[Outcome]:
    """C10 where sent (rotated out otherwise, unsupported where not advertised) and C12 over
    the replies sent, into `outcomes`; their further checks returned."""
    if not endpoint.supports_tools:
        tools = [not_advertised(endpoint)]
    elif Contract.TOOLS in contracts:
        tools = judge_tools(endpoint, transcripts, config)
    else:
        tools = [_rotated_out(Contract.TOOLS, endpoint.tag, locale)]
    stream = judge_stream(endpoint, transcripts, config)
    outcomes[Contract.TOOLS], outcomes[Contract.STREAM] = tools[0], stream[0]
    return [*tools[1:], *stream[1:]]


async def run_rotated_probe_set(
    client: ProbeClient,
    endpoint: Endpoint,
    locale: str,
    *,
    start_locale: str | None,
    contracts: Collection[Contract],
) -> ProbeSetResult:
    """Send the rotated set (`contracts` and the client's `start_samples`) and judge it."""
    config = client.config
    wanted = set(contracts)
    requests = [
        r
        for r in probe_requests(endpoint, locale, start_locale or locale, config)
        if r.contract is Contract.START or r.contract in wanted
    ]
    gate = asyncio.Semaphore(config.tool_concurrency)
    transcripts: Sequence[Transcript] = await asyncio.gather(
        *(send(client, endpoint, r, gate) for r in requests)
    )
    return judge_rotated(endpoint, locale, list(transcripts), config, wanted)
