"""One probe set per endpoint and locale, the language confirmation (C8) and its
majority vote. The I/O is `ProbeClient.probe`; every verdict is a pure judge.

A probe set sends, concurrently, 3 + `start_samples` requests (2 + start_samples
for an endpoint that does not advertise structured output), and the tool requests of an
endpoint that advertises tools (at most `tool_concurrency` of them in flight):

    language    the locale's role-play turn   → LANGUAGE (C7), LATENCY (C3), START (C9),
                                                STREAM (C12)
    refusal     the fixed role-play continuation → REFUSAL (C4), LATENCY, START, STREAM
    structured  the small JSON object           → STRUCTURED (C6) (skipped: unsupported)
    start × n   a second role-play turn          → LATENCY, START, STREAM (in `start_locale`:
                the round sends every endpoint the same start prompts, so they are comparable)
    tools       probes/tools.py (`tool_samples` forced calls, `none`, `auto` and tool-result
                requests, in `start_locale`) → TOOLS (C10) (unsupported without `tools`)

STREAM and TOOLS judge several checks each (probes/streams.py, probes/tool_verdicts.py): the
first is the contract's outcome, the others are `extra_outcomes`; `all_outcomes` is both.

LATENCY over all text requests: fail when at least half of the judged requests
had no text within the threshold (one slow request alone is noise). START is
`judge_start_share` over the replies of the set, each reply anomalous when any of
its start / repetition / encoding checks fails; the per-reply outcomes are kept in
`reply_outcomes` so a round can judge the share over all its replies.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from ground.settings import ProbeConfig
from probes.client import ProbeClient
from probes.contracts import (
    RESPONSE_FORMAT,
    classify_transport,
    judge_latency,
    judge_refusal,
    judge_structured,
    outcome,
)
from probes.integrity import check_reply, judge_start_share, worst_of
from probes.language import check_language
from probes.prompts import prompt_for
from probes.streams import judge_stream
from probes.tool_verdicts import judge_tools
from probes.tools import TOOLS, ToolProbe, tool_probes
from probes.types import Contract, Endpoint, Outcome, OutcomeStatus, Transcript


class ProbeSetResult(BaseModel):
    """Everything one probe set produced: transcripts and one outcome per contract."""

    tag: str
    locale: str
    transcripts: list[Transcript] = Field(default_factory=list)
    outcomes: dict[Contract, Outcome] = Field(default_factory=dict)
    reply_outcomes: list[Outcome] = Field(default_factory=list)  # one per judged reply (C9)
    extra_outcomes: list[Outcome] = Field(default_factory=list)  # further checks (C10, C12)

    @property
    def requests(self) -> int:
        return len(self.transcripts)

    @property
    def all_outcomes(self) -> list[Outcome]:
        """Every outcome of the set: one per contract, then the further checks."""
        return [*self.outcomes.values(), *self.extra_outcomes]

    @property
    def failures(self) -> list[Outcome]:
        return [o for o in self.all_outcomes if o.status is OutcomeStatus.FAIL]


def _judgeable_text(t: Transcript) -> bool:
    return (
        classify_transport(t) is None
        and not t.gave_up_waiting
        and t.http_status == 200
        and bool(t.text.strip())
    )


def judge_language(t: Transcript, locale: str) -> Outcome:
    """C7 on one transcript: transport/misrouted first, no text → inconclusive."""
    transport = classify_transport(t, Contract.LANGUAGE)
    if transport is not None:
        return transport
    if not _judgeable_text(t):
        reason = "no_text_within_threshold" if t.gave_up_waiting else "no_text"
        return outcome(t, Contract.LANGUAGE, OutcomeStatus.INCONCLUSIVE, reason)
    verdict = check_language(t.text, locale)
    return verdict.model_copy(
        update={
            "tag": t.tag,
            "ttft_s": t.ttft_s,
            "evidence": {**verdict.evidence, "request_id": t.request_id},
        }
    )


def reply_outcome(t: Transcript, locale: str) -> Outcome | None:
    """One reply's C9 outcome (the first failing of start / repetition / encoding), or None."""
    if not _judgeable_text(t):
        return None
    chosen = worst_of(check_reply(t.text, locale))
    return chosen.model_copy(
        update={
            "contract": Contract.START,
            "tag": t.tag,
            "locale": locale,
            "evidence": {**chosen.evidence, "request_id": t.request_id, "head": t.text[:24]},
        }
    )


ANOMALOUS_HEADS_KEPT = 8  # first characters of this many anomalous replies kept as evidence


def with_anomalous_heads(start: Outcome, replies: Sequence[Outcome]) -> Outcome:
    """`start` with the first characters and kind of each anomalous reply in its evidence
    (`anomalous_replies`), so an analyst sees what the bad replies began with (pure)."""
    bad = [o for o in replies if o.status is OutcomeStatus.FAIL][:ANOMALOUS_HEADS_KEPT]
    if not bad:
        return start
    heads = [
        {
            "head": o.evidence.get("head", ""),
            "reason": o.reason,
            "kind": o.evidence.get("kind"),
            **{k: o.evidence[k] for k in ("marker", "leak", "at") if o.evidence.get(k)},
        }
        for o in bad
    ]
    return start.model_copy(update={"evidence": {**start.evidence, "anomalous_replies": heads}})


def latency_of_set(transcripts: Sequence[Transcript], threshold_s: float) -> Outcome:
    """C3 over the text requests of a set (pure)."""
    if not transcripts:
        raise ValueError("latency_of_set needs at least one transcript")
    outcomes = [judge_latency(t, threshold_s) for t in transcripts]
    fails = [o for o in outcomes if o.status is OutcomeStatus.FAIL]
    passes = [o for o in outcomes if o.status is OutcomeStatus.PASS]
    ttfts = [round(s, 4) for t in transcripts if (s := t.first_token_s) is not None]
    base = fails[0] if fails else passes[0] if passes else outcomes[0]
    evidence = {
        **base.evidence,
        "ttfts_s": ttfts,
        "failed": len(fails),
        "judged": len(fails) + len(passes),
    }
    if fails and len(fails) >= len(passes):
        return base.model_copy(update={"evidence": evidence})
    if passes:
        slowest = max(ttfts) if ttfts else None
        return passes[0].model_copy(update={"evidence": evidence, "ttft_s": slowest})
    misrouted = [o for o in outcomes if o.status is OutcomeStatus.MISROUTED]
    chosen = misrouted[0] if misrouted else base
    return chosen.model_copy(update={"evidence": evidence})


@dataclass(frozen=True)
class ProbeRequest:
    """One request of a probe set: the contract it serves, its prompt and locale (a tool
    request carries its own messages and `tool_choice`)."""

    contract: Contract
    locale: str
    response_format: dict[str, Any] | None = None
    tool: ToolProbe | None = None

    @property
    def messages(self) -> list[dict[str, Any]]:
        if self.tool is not None:
            return [dict(m) for m in self.tool.messages]
        return prompt_for(self.contract, self.locale)


def probe_requests(
    endpoint: Endpoint,
    locale: str,
    start_locale: str,
    config: ProbeConfig,
) -> list[ProbeRequest]:
    """The requests of one probe set, in the order the judge reads them (module docstring):
    language, refusal, the start samples, structured output where advertised, then the tool
    requests where tools are advertised."""
    requests = [
        ProbeRequest(Contract.LANGUAGE, locale),
        ProbeRequest(Contract.REFUSAL, locale),
        *(ProbeRequest(Contract.START, start_locale) for _ in range(config.start_samples)),
    ]
    if endpoint.supports_structured_output:
        requests.append(ProbeRequest(Contract.STRUCTURED, locale, RESPONSE_FORMAT))
    if endpoint.supports_tools:
        probes = tool_probes(
            start_locale,
            samples=config.tool_samples,
            checks=config.tool_check_samples,
            triggers=config.tool_trigger_samples,
            choices=endpoint.tool_choices,
        )
        requests += [ProbeRequest(Contract.TOOLS, start_locale, tool=p) for p in probes]
    return requests


async def send(
    client: ProbeClient, endpoint: Endpoint, r: ProbeRequest, gate: asyncio.Semaphore | None
) -> Transcript:
    """One request of the set; a tool request waits for a place under `gate`."""
    options = body_options(r, client.config)
    if r.tool is None or gate is None:
        return await client.probe(endpoint, r.contract, r.messages, locale=r.locale, **options)
    async with gate:
        return await client.probe(
            endpoint,
            r.contract,
            r.messages,
            locale=r.locale,
            probe=r.tool.probe,
            expect=r.tool.expect,
            **options,
        )


def body_options(r: ProbeRequest, config: ProbeConfig) -> dict[str, Any]:
    """What a request's body carries beyond its messages (`ProbeClient.request_body`'s
    keywords): the response format, or the tools, their `tool_choice` and `tool_max_tokens`."""
    if r.tool is None:
        return {"response_format": r.response_format}
    return {"max_tokens": config.tool_max_tokens, "tools": TOOLS, "tool_choice": r.tool.tool_choice}


async def run_probe_set(
    client: ProbeClient,
    endpoint: Endpoint,
    locale: str,
    *,
    start_locale: str | None = None,
) -> ProbeSetResult:
    """Probe one endpoint in one locale; returns transcripts and outcomes per contract.

    The client's `ProbeConfig` says how: `start_samples`, the tool samples, `max_tokens`
    (every text request; `tool_max_tokens` for tools), the latency threshold and the shares'
    bars. `start_locale` (default `locale`): the locale of the start samples and the tool
    prompts; a round gives every endpoint the same one, so their replies are comparable
    (probes/peer_round.py).
    """
    config = client.config
    requests = probe_requests(endpoint, locale, start_locale or locale, config)
    gate = asyncio.Semaphore(config.tool_concurrency)
    transcripts = await asyncio.gather(*(send(client, endpoint, r, gate) for r in requests))
    return judge_probe_set(endpoint, locale, list(transcripts), config)


def _start_of_set(
    endpoint: Endpoint, locale: str, text_ts: list[Transcript], config: ProbeConfig
) -> tuple[Outcome, list[Outcome]]:
    """C9/C11: the start share over the text replies, with the anomalous heads, and the
    reasoning the replies carried outside the content (evidence only)."""
    replies = [o for o in (reply_outcome(t, t.locale or locale) for t in text_ts) if o is not None]
    start = with_anomalous_heads(judge_start_share(replies, config), replies).model_copy(
        update={"tag": endpoint.tag, "locale": locale}
    )
    cut = next((o for o in map(classify_transport, text_ts) if o is not None), None)
    if not replies and cut is not None:
        start = cut.model_copy(update={"contract": Contract.START})
    reasoning = reasoning_evidence(text_ts)
    if reasoning:
        start = start.model_copy(update={"evidence": {**start.evidence, "reasoning": reasoning}})
    return start, replies


def reasoning_evidence(transcripts: Sequence[Transcript]) -> dict[str, int]:
    """Reasoning streamed in its own fields (never content, never a failure) and reasoning
    tokens reported in usage by replies to requests that disabled reasoning (C11: observed)."""
    chars = sum(t.reasoning_chars for t in transcripts)
    disabled = [t for t in transcripts if t.reasoning_disabled]
    tokens = sum(_reasoning_tokens(t.usage) for t in disabled)
    out = {"streamed_chars": chars} if chars else {}
    if tokens:
        out["tokens_while_disabled"] = tokens
    return out


def _reasoning_tokens(usage: dict[str, Any] | None) -> int:
    details = (usage or {}).get("completion_tokens_details")
    value = details.get("reasoning_tokens") if isinstance(details, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def judge_probe_set(
    endpoint: Endpoint, locale: str, transcripts: list[Transcript], config: ProbeConfig
) -> ProbeSetResult:
    """The outcome of each contract from a probe set's transcripts (pure; in the order of
    `probe_requests`)."""
    lang_t, refusal_t = transcripts[0], transcripts[1]
    text_ts = [t for t in transcripts if t.contract not in (Contract.STRUCTURED, Contract.TOOLS)]
    start, replies = _start_of_set(endpoint, locale, text_ts, config)
    structured = [t for t in transcripts if t.contract is Contract.STRUCTURED]
    # no structured request for an endpoint that does not advertise it: judged unsupported
    structured_outcome = judge_structured(structured[0] if structured else lang_t, endpoint)
    tools = judge_tools(endpoint, transcripts, config)
    stream = judge_stream(endpoint, transcripts, config)
    outcomes = {
        Contract.LATENCY: latency_of_set(text_ts, config.ttft_threshold_s),
        Contract.LANGUAGE: judge_language(lang_t, locale),
        Contract.REFUSAL: judge_refusal(refusal_t, locale),
        Contract.STRUCTURED: structured_outcome,
        Contract.START: start,
        Contract.TOOLS: tools[0],
        Contract.STREAM: stream[0],
    }
    return ProbeSetResult(
        tag=endpoint.tag,
        locale=locale,
        transcripts=transcripts,
        outcomes=outcomes,
        reply_outcomes=replies,
        extra_outcomes=[*tools[1:], *stream[1:]],
    )


async def confirmation_probes(
    client: ProbeClient,
    endpoint: Endpoint,
    locale: str,
) -> list[Transcript]:
    """C8: the client's `confirmations` more language probes (concurrently)."""
    messages = prompt_for(Contract.LANGUAGE, locale)
    return list(
        await asyncio.gather(
            *(
                client.probe(endpoint, Contract.LANGUAGE, messages, locale=locale)
                for _ in range(client.config.confirmations)
            )
        )
    )


async def confirm_language(
    client: ProbeClient,
    endpoint: Endpoint,
    locale: str,
) -> list[Outcome]:
    """C8: the confirmation probes, each judged on its own."""
    return [judge_language(t, locale) for t in await confirmation_probes(client, endpoint, locale)]


_VOTES = (OutcomeStatus.PASS, OutcomeStatus.FAIL, OutcomeStatus.INCONCLUSIVE)


def majority(outcomes: Sequence[Outcome]) -> Outcome:
    """C8 majority over the original language outcome and its confirmations (pure).

    Votes are pass / fail / inconclusive outcomes; transport, misrouted and
    unsupported attempts do not vote. Then:
    - fail when at least 2 votes fail and fails outnumber passes (2 of 3);
    - pass when at least 2 votes pass and passes outnumber fails;
    - inconclusive when at least 2 votes split, e.g. fail + pass + transport:
      a single failing vote never fails a host (`undecided`);
    - with fewer than 2 votes (e.g. fail + 2 transport): transport (or misrouted if
      any attempt was), so a host whose confirmations were unreachable is neither
      failed nor cleared: the round freezes the provider's score (Q1).
    """
    if not outcomes:
        raise ValueError("majority needs at least one outcome")
    votes = [o for o in outcomes if o.status in _VOTES]
    fails = [o for o in votes if o.status is OutcomeStatus.FAIL]
    passes = [o for o in votes if o.status is OutcomeStatus.PASS]
    evidence: dict[str, object] = {
        "attempts": len(outcomes),
        "votes": len(votes),
        "fails": len(fails),
        "passes": len(passes),
        "statuses": [o.status.value for o in outcomes],
        "reasons": [o.reason for o in outcomes],
    }
    if fails:  # what the first failing vote saw (shares, detected language, excerpt)
        evidence["first_fail"] = {k: v for k, v in fails[0].evidence.items() if k != "request_id"}
    first = outcomes[0]
    common = {"contract": first.contract, "tag": first.tag, "locale": first.locale}
    if len(fails) >= 2 and len(fails) > len(passes):
        return Outcome(
            status=OutcomeStatus.FAIL, reason=fails[0].reason, evidence=evidence, **common
        )
    if len(passes) >= 2 and len(passes) > len(fails):
        return Outcome(
            status=OutcomeStatus.PASS, reason="majority_pass", evidence=evidence, **common
        )
    if len(votes) >= 2:
        return Outcome(
            status=OutcomeStatus.INCONCLUSIVE, reason="undecided", evidence=evidence, **common
        )
    # fewer than two votes: the confirmations were not heard, so the round cannot clear
    # (or fail) the host; it freezes its score like any transport problem (Q1)
    if any(o.status is OutcomeStatus.MISROUTED for o in outcomes):
        return Outcome(
            status=OutcomeStatus.MISROUTED, reason="misrouted", evidence=evidence, **common
        )
    return Outcome(status=OutcomeStatus.TRANSPORT, reason="no_votes", evidence=evidence, **common)
