"""UTC normalisation, written once: every datetime the project keeps is timezone-aware UTC,
and a naive one is read as UTC (never as the machine's local time)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator


def as_utc(value: datetime) -> datetime:
    """`value` in UTC; a naive datetime is taken to be UTC already."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def utc_now() -> datetime:
    return datetime.now(UTC)


def parse_iso(text: str) -> datetime:
    """An ISO-8601 time (a trailing `Z` allowed) in UTC; `ValueError` when it is not one."""
    return as_utc(datetime.fromisoformat(text.strip().replace("Z", "+00:00")))


UtcDatetime = Annotated[datetime, AfterValidator(as_utc)]
"""A pydantic field type: any datetime, stored as aware UTC."""
