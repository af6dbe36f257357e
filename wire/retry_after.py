"""`Retry-After` (RFC 9110 §10.2.3): delta-seconds or an HTTP date.

`parse_retry_after(value, now)` gives seconds to wait from `now`, or None when the header is
absent or not understood. An HTTP date without a zone is read as GMT (the RFC's only zone),
a naive `now` as UTC; negative and non-finite values never come out (a date in the past is
0 seconds). Whether the wait *fits* a deadline is the caller's decision.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

MAX_HEADER_CHARS = 64


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    if value is None:
        return None
    text = value.strip()[: MAX_HEADER_CHARS + 1]
    if not text or len(text) > MAX_HEADER_CHARS:
        return None
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if when is None:
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        if now.tzinfo is None:
            now = now.replace(tzinfo=UTC)
        seconds = (when - now).total_seconds()
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)
