"""`--since 7d`: a duration back from now, written once for every command that takes it."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from canary.cli.errors import BAD_INPUT, exit_with_error

_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([mhdw])\s*$")


def parse_duration(value: str) -> timedelta:
    """`30m`, `12h`, `7d` or `2w` as a timedelta; `ValueError` otherwise."""
    m = _DURATION.match(value.lower())
    if not m:
        raise ValueError(f"not a duration: {value!r}")
    return timedelta(**{_UNITS[m.group(2)]: float(m.group(1))})


def since_or_exit(value: str, now: datetime, option: str = "--since") -> datetime:
    """`now` minus the duration `value`; exit 2 with a clear line when it is not one."""
    try:
        return now - parse_duration(value)
    except ValueError:
        exit_with_error(
            f"{option} takes a duration such as 30m, 12h, 7d or 2w, got {value!r}", BAD_INPUT
        )
