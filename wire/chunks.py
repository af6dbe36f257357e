"""Fields of a chat completion chunk or body that every reader needs alike.

provider_of(obj)   the `provider` field: which provider actually served (C2)
usage_of(obj)      the `usage` object (the last chunk carries it), or None
usage_cost(u)      `usage.cost` in USD, or None
usage_tokens(u)    (prompt_tokens, completion_tokens), 0 where absent or not a number
"""

from __future__ import annotations

from typing import Any

from wire.text import NO_SECRET, Scrubber, upstream_text

MAX_PROVIDER_CHARS = 100


def provider_of(obj: Any, scrub: Scrubber = NO_SECRET) -> str | None:
    value = obj.get("provider") if isinstance(obj, dict) else None
    if not isinstance(value, str) or not value:
        return None
    return upstream_text(value, scrub, MAX_PROVIDER_CHARS)


def usage_of(obj: Any) -> dict[str, Any] | None:
    value = obj.get("usage") if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value == value and abs(value) != float("inf") else None


def usage_cost(usage: dict[str, Any] | None) -> float | None:
    return _number((usage or {}).get("cost"))


def usage_tokens(usage: dict[str, Any] | None) -> tuple[int, int]:
    u = usage or {}
    prompt, completion = _number(u.get("prompt_tokens")), _number(u.get("completion_tokens"))
    return int(prompt or 0), int(completion or 0)
