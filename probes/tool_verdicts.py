"""The tools contract's verdicts for one probe set (pure; SPEC C10, issue 22).

    judge_tools(endpoint, transcripts, config) -> [calls, none, result, trigger_missed,
                                                   trigger_spurious]

Each is a TOOLS outcome with `evidence["check"]` naming it; the first, `calls`, is the
contract's outcome of the set (`ProbeSetResult.outcomes[Contract.TOOLS]`), the others follow
it (`extra_outcomes`). An endpoint that does not advertise `tools` gets one `unsupported`
outcome (`not_advertised`), never a failure.

    calls        the forced calls: fail when >= 2 and >= `tool_failure_share` of the judged
                 ones fail (as_text, ignored, unknown_name, inconsistent_deltas,
                 bad_arguments, finish_reason); then compared with the peers
    none         the `none` requests: fail when at least 2 and half of them called a tool
    result       the round trips: fail when at least 2 and half of them ignored the result
                 (both compared with the peers as one trial each, like C6's structured probe:
                 the absolute rule decides unless most endpoints share the failure)
    trigger_*    the `auto` prompts: above the bar (>= 2 and >= `trigger_share` of them against
                 the prompt) the outcome stays INCONCLUSIVE with `above_bar`; only the peers
                 fail a host for it (probes/peer_round.py), since models legitimately differ

Power of `calls` at the defaults (12 forced calls, bar 3 of 12, 14 healthy peers; exact, as
bench/bench_peer_power.py computes it): a host whose calls fail half the time fails a round
with 98% and is suspended at its second failing round with 96%; a host with one bad call in
twenty fails a round with 2% and two in a row with 4e-4. The checks (4 requests each, 2
failing): a host that violates `none` (or ignores results) 9 times in 10 fails a round with
99.6%, one that does so once in 20 with 1.4%.
"""

from __future__ import annotations

from collections.abc import Sequence

from ground.settings import ProbeConfig
from probes.integrity import MIN_ANOMALOUS
from probes.shares import Bar, share_verdict
from probes.tools import judge_tool_reply
from probes.types import Contract, Endpoint, Outcome, OutcomeStatus, Transcript

TRIGGERS = ("trigger_missed", "trigger_spurious")
CHECKS = ("calls", "none", "result", *TRIGGERS)
_PROBE_OF = {
    "calls": "required",
    "none": "none",
    "result": "result",
    "trigger_missed": "auto_need",
    "trigger_spurious": "auto_plain",
}


def _bars(config: ProbeConfig) -> dict[str, Bar]:
    checks = min(MIN_ANOMALOUS, config.tool_check_samples)
    triggers = min(MIN_ANOMALOUS, config.tool_trigger_samples)
    calls = Bar(config.start_anomaly_min_replies, MIN_ANOMALOUS, config.tool_failure_share)
    check = Bar(checks, checks, 0.5)
    trigger = Bar(triggers, triggers, config.trigger_share)
    return {"calls": calls, "none": check, "result": check, **dict.fromkeys(TRIGGERS, trigger)}


def not_advertised(endpoint: Endpoint) -> Outcome:
    return Outcome(
        contract=Contract.TOOLS,
        status=OutcomeStatus.UNSUPPORTED,
        reason="not_advertised",
        tag=endpoint.tag,
        evidence={"check": "calls", "supported_parameters": list(endpoint.supported_parameters)},
    )


def _peer_judged(o: Outcome, check: str) -> Outcome:
    """A trigger rate above its bar is the peers' to judge: INCONCLUSIVE until they do."""
    if o.status is not OutcomeStatus.FAIL:
        return o
    return o.model_copy(
        update={
            "status": OutcomeStatus.INCONCLUSIVE,
            "reason": check,
            "evidence": {**o.evidence, "above_bar": True},
        }
    )


def judge_tools(
    endpoint: Endpoint, transcripts: Sequence[Transcript], config: ProbeConfig
) -> list[Outcome]:
    """The set's TOOLS outcomes (module docstring), `calls` first."""
    if not endpoint.supports_tools:
        return [not_advertised(endpoint)]
    tool_ts = [t for t in transcripts if t.contract is Contract.TOOLS]
    replies = [(t.probe, judge_tool_reply(t)) for t in tool_ts]
    bars = _bars(config)
    out = []
    for check in CHECKS:
        mine = [o for probe, o in replies if probe == _PROBE_OF[check]]
        if not mine and check != "calls":
            continue  # not sent: the listing says this tool_choice did not pass
        verdict = share_verdict(mine, Contract.TOOLS, bars[check], check=check, tag=endpoint.tag)
        verdict = verdict.model_copy(update={"locale": tool_ts[0].locale if tool_ts else None})
        out.append(_peer_judged(verdict, check) if check in TRIGGERS else verdict)
    return out
