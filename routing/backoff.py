"""Backoff and retry hints (SPEC R5), as small pure functions.

    delay = random(0, min(cap, base * 2**retry_index))        (full jitter)

`Retry-After` is parsed by `wire.retry_after`; the router decides whether a hint *fits*
the remaining deadline.

Tests never sleep for backoff: the router takes its `sleep` as an argument
(`Router(sleep=...)`), the same idea as stamina's `set_testing(True)`.
"""

from __future__ import annotations

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
