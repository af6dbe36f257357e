"""Pure judges: transcripts in, `Outcome`s out (no I/O, no clock).

    classify_transport(t)          transport / misrouted outcome, or None if t can be judged
    judge_latency(t, threshold_s)  C3
    judge_refusal(t, locale)       C4   (probes/refusal.py)
    judge_controls(outcomes)       C5   (probes/refusal.py)
    judge_structured(t, endpoint)  C6   (probes/structured.py)

Transport vs quality rules: probes/transport.py (SPEC Q1, C2).
"""

from __future__ import annotations

from probes.refusal import ControlVerdict, judge_controls, judge_refusal
from probes.structured import PROBE_SCHEMA, RESPONSE_FORMAT, judge_structured
from probes.transport import classify_transport, outcome
from probes.types import Contract, Outcome, OutcomeStatus, Transcript

__all__ = [
    "PROBE_SCHEMA",
    "RESPONSE_FORMAT",
    "ControlVerdict",
    "classify_transport",
    "judge_controls",
    "judge_latency",
    "judge_refusal",
    "judge_structured",
    "outcome",
]


def judge_latency(t: Transcript, threshold_s: float) -> Outcome:
    """C3: fail when an established stream produced no output within `threshold_s` (its
    first content, or reasoning in the stream's reasoning fields: never content, but the
    stream has started)."""
    c = Contract.LATENCY
    if t.misrouted:
        return outcome(t, c, OutcomeStatus.MISROUTED, "misrouted", pinned=t.pinned_provider)
    unverified = classify_transport(t, c) if t.provider_unverified else None
    if unverified is not None:  # provider_unverified (or a transport problem): never a pass
        return unverified
    first = t.first_token_s  # reasoning streamed in its own fields is output too (C11)
    if first is not None:
        if first > threshold_s:
            return outcome(t, c, OutcomeStatus.FAIL, "slow_first_token", threshold_s=threshold_s)
        return outcome(t, c, OutcomeStatus.PASS, "first_token_in_time", threshold_s=threshold_s)
    if t.gave_up_waiting and t.http_status == 200:
        return outcome(
            t, c, OutcomeStatus.FAIL, "no_first_token", threshold_s=threshold_s, waited_s=t.total_s
        )
    transport = classify_transport(t, c)
    if transport is not None:
        return transport
    return outcome(t, c, OutcomeStatus.INCONCLUSIVE, "no_text", threshold_s=threshold_s)
