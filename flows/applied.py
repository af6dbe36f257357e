"""An applied round as one value: what the round's audit (ledger rows, artifacts, events,
alerts and the summary it returns; `flows/round_audit.py`) reads once the state is
stored, so the publishing code takes one argument instead of seven."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from flows.judging import Judged
from flows.roundplan import RoundPlan
from probes.types import Outcome
from quarantine.exclusions import IgnoreEntry
from quarantine.models import Decision, Mode, ModelState, RoundReport


@dataclass(frozen=True)
class AppliedRound:
    """One round after its apply: the plan, the mode it ran in, the report the policy read,
    what the probes concluded, the decisions stored, provider.ignore after the round and
    the state just applied."""

    plan: RoundPlan
    mode: Mode
    report: RoundReport
    judged: Judged
    decisions: Sequence[Decision]
    ignore: Sequence[IgnoreEntry]
    state: ModelState

    @property
    def controls(self) -> dict[str, list[Outcome]]:
        """The positive controls' outcomes (those probed), by tag."""
        voted = self.judged.voted
        return {t: voted[t] for t in self.plan.controls if t in voted}

    @property
    def weak_controls(self) -> list[str]:
        """The controls that passed when the refusal probe is weak this round (C5), else []."""
        judged = self.judged
        return list(judged.control_verdict.passed_controls) if judged.weak else []
