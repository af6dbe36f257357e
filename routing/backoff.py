"""Backoff and retry hints (SPEC R5), as small pure functions.

    delay = random(0, min(cap, base * 2**retry_index))        (full jitter)

`Retry-After` is either delta-seconds or an HTTP date; `parse_retry_after`
turns both into seconds relative to `now` (a Unix timestamp the caller
passes in). The router decides whether a hint *fits* the remaining deadline.

Tests never sleep for backoff: the router takes its `sleep` as an argument
(`Router(sleep=...)`), the same idea as stamina's `set_testing(True)`.
"""

from __future__ import annotations

import email.utils
from collections.abc import Callable


def full_jitter_delay(
    retry_index: int, *, base_s: float, cap_s: float, rand: Callable[[], float]
) -> float:
    """`random(0, min(cap, base * 2**retry_index))`; `rand()` returns a float in [0, 1)."""
    if retry_index < 0:
        raise ValueError(f"retry_index must be >= 0, got {retry_index}")
    if base_s < 0 or cap_s < 0:
        raise ValueError("base_s and cap_s must be >= 0")
    ceiling = min(cap_s, base_s * 2.0 ** min(retry_index, 64))
    return rand() * ceiling


def parse_retry_after(value: str | None, *, now_unix: float) -> float | None:
    """Seconds to wait from a `Retry-After` header (seconds or HTTP date); None if absent/invalid."""
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        return max(0.0, when.timestamp() - now_unix)
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        return None
    return max(0.0, seconds)
