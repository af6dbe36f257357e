"""A contract judged on a share of its replies (pure): the verdict of one check of a probe
set from the outcomes of its replies, as C9's start share does (probes/integrity.py) for
the checks issue 22 added (tool calls, `none`, tool results, trigger rates, buffered
streams, the model served).

    share_verdict(replies, contract, bar, check=...)   FAIL / PASS / INCONCLUSIVE / TRANSPORT

A check is above its bar when at least `bar.min_judged` replies were judged (pass or fail),
at least `bar.min_failed` failed and their share is at least `bar.min_share`. The failing
reason is the most frequent one; the evidence holds k/n, the reasons and the first failing
replies in a few fields each (`failed`), so the artifacts can say which call went wrong.
With no reply judged and one of them transport, the check is that transport outcome (the
endpoint's round freezes, Q1).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from probes.types import Contract, Outcome, OutcomeStatus

FAILED_KEPT = 6  # failing replies described in the evidence
_KEPT_FIELDS = (
    "probe", "function", "expected", "marker", "problem", "path", "validator", "message",
    "error", "arguments", "finish_reason", "problems", "what", "head", "kind", "ttft_s",
    "spread_s", "chars", "served_model", "requested", "request_id",
)  # fmt: skip
_JUDGED = (OutcomeStatus.PASS, OutcomeStatus.FAIL)


@dataclass(frozen=True)
class Bar:
    """The absolute bar of one check."""

    min_judged: int
    min_failed: int
    min_share: float


def _described(o: Outcome) -> dict[str, object]:
    kept = {k: o.evidence[k] for k in _KEPT_FIELDS if o.evidence.get(k) is not None}
    return {"reason": o.reason, **kept}


def share_verdict(
    replies: Sequence[Outcome], contract: Contract, bar: Bar, *, check: str, tag: str | None = None
) -> Outcome:
    """The check's verdict over its replies (module docstring)."""
    judged = [o for o in replies if o.status in _JUDGED]
    failed = [o for o in judged if o.status is OutcomeStatus.FAIL]
    share = round(len(failed) / len(judged), 6) if judged else 0.0
    reasons = Counter(o.reason for o in failed)
    evidence: dict[str, object] = {
        "check": check,
        "judged": len(judged),
        "anomalous": len(failed),
        "share": share,
        "ignored": len(replies) - len(judged),
        "reasons": dict(sorted(reasons.items())),
        "min_share": bar.min_share,
        "failed": [_described(o) for o in failed[:FAILED_KEPT]],
    }
    common = {"contract": contract, "tag": tag, "evidence": evidence}
    cut = next((o for o in replies if o.status in (OutcomeStatus.TRANSPORT, OutcomeStatus.MISROUTED)), None)  # fmt: skip
    if not judged and cut is not None:
        return cut.model_copy(update={"evidence": {**cut.evidence, "check": check}})
    if len(judged) < bar.min_judged:
        return Outcome(status=OutcomeStatus.INCONCLUSIVE, reason="too_few_replies", **common)
    if len(failed) >= bar.min_failed and share >= bar.min_share:
        top = max(reasons.items(), key=lambda kv: (kv[1], kv[0]))[0]
        return Outcome(status=OutcomeStatus.FAIL, reason=top, **common)
    return Outcome(status=OutcomeStatus.PASS, reason="ok", **common)
