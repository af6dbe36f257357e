"""One end-to-end deadline (SPEC R4), pure arithmetic on monotonic seconds.

The gateway records `Deadline(at=now + deadline_ms/1000)` on arrival. Before
every attempt the router asks `may_start(now)`: an attempt may start only when
the remaining time covers connect + generation + validation allowances. Each
attempt's timeouts are then cut to what is left (`attempt_budget`), keeping
the validation allowance in reserve.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ground.settings import Allowances

__all__ = ["Allowances", "AttemptBudget", "Deadline"]


@dataclass(frozen=True, slots=True)
class AttemptBudget:
    """Timeouts for one attempt, already cut to the remaining deadline."""

    connect_s: float
    total_s: float  # connect + headers + body, everything but validation


@dataclass(frozen=True, slots=True)
class Deadline:
    at: float  # absolute, on the monotonic clock
    allowances: Allowances = field(default_factory=Allowances)

    @classmethod
    def starting(cls, now: float, deadline_ms: int, allowances: Allowances) -> Deadline:
        if deadline_ms <= 0:
            raise ValueError(f"deadline_ms must be > 0, got {deadline_ms}")
        return cls(at=now + deadline_ms / 1000.0, allowances=allowances)

    def remaining(self, now: float) -> float:
        return self.at - now

    def may_start(self, now: float, *, wait_s: float = 0.0) -> bool:
        """Whether an attempt starting after `wait_s` more seconds can still finish in time."""
        return self.remaining(now) - wait_s >= self.allowances.required_s

    def attempt_budget(self, now: float) -> AttemptBudget:
        usable = max(0.0, self.remaining(now) - self.allowances.validation_s)
        return AttemptBudget(connect_s=min(self.allowances.connect_s * 5, usable), total_s=usable)
