"""One end-to-end deadline (SPEC R4, R13), pure arithmetic on monotonic seconds.

The gateway records `Deadline(at=now + deadline_ms/1000)` on arrival. Before
every attempt the router asks `may_start(now)`: an attempt may start only when
the remaining time covers connect + generation + validation allowances, with the
gateway's own reserve (`Allowances.reserve_s`) kept besides. Each attempt's
timeouts are then cut to what is left (`attempt_budget`: the reserve and the
validation allowance kept back), and further, so one fallback still fits
(`routing/budget.py`).
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
    ttft_s: float | None = None  # no content (text or tool call) by then: slow_first_token
    stall_s: float | None = None  # started, then no byte this long before release: a stall
    hold_s: float | None = None  # first content, then the start not settled this long: slow


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

    @property
    def needed_s(self) -> float:
        """What an attempt needs of the deadline to start: its allowances and the reserve."""
        return self.allowances.required_s + self.allowances.reserve_s

    def may_start(self, now: float, *, wait_s: float = 0.0) -> bool:
        """Whether an attempt starting after `wait_s` more seconds can still finish in time."""
        return self.remaining(now) - wait_s >= self.needed_s

    def usable(self, now: float) -> float:
        """What an attempt starting now may use if it were the last: the remaining time
        less the gateway's reserve and the attempt's validation allowance."""
        a = self.allowances
        return max(0.0, self.remaining(now) - a.validation_s - a.reserve_s)

    def attempt_budget(self, now: float) -> AttemptBudget:
        usable = self.usable(now)
        return AttemptBudget(connect_s=min(self.allowances.connect_s * 5, usable), total_s=usable)
