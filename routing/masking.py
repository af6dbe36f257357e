"""The warning sign of SPEC R11: HTTP success holding or rising while validation rejection
rises means transport availability is hiding contract failures (the routes answer `200`,
and more of those answers fail their contracts). Pure: counts and `now` in, words out.

    masking_warning(earlier, later, config) -> str | None
        `earlier` and `later` are the two halves of a window (the report's `--since`, or the
        last `masking_window_s` on /metrics); a warning when rejection rose by at least
        `masking_min_rise` while HTTP success did not fall, each half with at least
        `masking_min_attempts` attempts
    MaskingWatch(config)    the same halves over the last `masking_window_s`, kept in
                            buckets as attempts are observed (for /metrics)
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from ground.settings import RoutingConfig

BUCKETS = 12  # a window is kept in this many buckets


@dataclass(frozen=True, slots=True)
class Rates:
    """One half of a window: attempts, those answered HTTP 200, those then rejected."""

    attempts: int = 0
    http_ok: int = 0
    rejected: int = 0

    @property
    def http_success(self) -> float:
        return self.http_ok / self.attempts if self.attempts else 0.0

    @property
    def rejection(self) -> float:
        return self.rejected / self.http_ok if self.http_ok else 0.0

    def __add__(self, other: Rates) -> Rates:
        return Rates(
            self.attempts + other.attempts,
            self.http_ok + other.http_ok,
            self.rejected + other.rejected,
        )


def _pct(x: float) -> str:
    return f"{x * 100:.0f}%"


def masking_warning(earlier: Rates, later: Rates, config: RoutingConfig) -> str | None:
    """The R11 warning in words, or None (see the module docstring)."""
    enough = config.masking_min_attempts
    if earlier.attempts < enough or later.attempts < enough:
        return None
    if later.rejection - earlier.rejection < config.masking_min_rise:
        return None
    if later.http_success < earlier.http_success:
        return None
    how = "rose" if later.http_success > earlier.http_success else "held"
    return (
        f"HTTP success {how} ({_pct(earlier.http_success)} -> {_pct(later.http_success)} of"
        f" attempts) while validation rejection rose ({_pct(earlier.rejection)} ->"
        f" {_pct(later.rejection)} of HTTP-successful attempts): the routes answer, and more"
        " of their answers fail the contracts; uptime alone would call this healthy"
    )


class MaskingWatch:
    """Attempt counts over the last `masking_window_s`, in `BUCKETS` buckets."""

    def __init__(self, config: RoutingConfig | None = None) -> None:
        self.config = config or RoutingConfig()
        self.bucket_s = self.config.masking_window_s / BUCKETS
        self._buckets: deque[tuple[int, Rates]] = deque()  # (bucket index, counts)

    def observe(self, *, http_ok: bool, rejected: bool, now: float) -> None:
        index = int(now // self.bucket_s)
        seen = Rates(1, int(http_ok), int(http_ok and rejected))
        if self._buckets and self._buckets[-1][0] == index:
            self._buckets[-1] = (index, self._buckets[-1][1] + seen)
        else:
            self._buckets.append((index, seen))
        self._prune(index)

    def _prune(self, index: int) -> None:
        while self._buckets and self._buckets[0][0] <= index - BUCKETS:
            self._buckets.popleft()

    def halves(self, now: float) -> tuple[Rates, Rates]:
        """The earlier and the later half of the window ending now."""
        index = int(now // self.bucket_s)
        self._prune(index)
        middle = index - BUCKETS // 2
        earlier, later = Rates(), Rates()
        for i, counts in self._buckets:
            if i <= middle:
                earlier = earlier + counts
            else:
                later = later + counts
        return earlier, later

    def warning(self, now: float) -> str | None:
        return masking_warning(*self.halves(now), self.config)
