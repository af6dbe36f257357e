"""Layer (b) of provider.ignore: runtime incident exclusions, one Prefect Variable per model.

The Variable `canary-exclusions-<model slug>` holds::

    {"version": 1,
     "entries": [{"tag", "reason", "author", "added_at", "until"}, ...],
     "last_change": {"action": "added"|"removed", "tag", "actor", "at"}}

Writes take effect at once (the next ignore-list read sees them) and every write emits
Prefect's `prefect.variable.updated` event carrying the value, `last_change` included: that
is the audit and notification material. Writes are serialised with a global concurrency
limit (Variables are last-writer-wins). Prefect caps a Variable's JSON at 5,000 characters:
an add first drops expired entries, and if the document would still be too long it raises
`ExclusionsFullError` and changes nothing (remove entries, or move long-lived ones to the
built-in file). Reasons are capped at 300 characters for that reason.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from prefect.types import MAX_VARIABLE_VALUE_LENGTH
from prefect.variables import Variable
from pydantic import BaseModel, Field, ValidationError

from ground.clock import as_utc
from ground.slugs import model_slug
from quarantine.adapters.locking import serialised
from quarantine.errors import (
    ExclusionNotFoundError,
    ExclusionsCorruptError,
    ExclusionsFullError,
    ExpiryInPastError,
)
from quarantine.exclusions import RuntimeExclusion


class _Document(BaseModel):
    version: int = 1
    entries: list[RuntimeExclusion] = Field(default_factory=list)
    last_change: dict[str, Any] | None = None


def variable_name(model: str) -> str:
    return f"canary-exclusions-{model_slug(model)}"


async def _read(model: str) -> _Document:
    name = variable_name(model)
    raw: object = await Variable.aget(name)
    if raw is None:
        return _Document()
    try:
        return _Document.model_validate(raw)
    except ValidationError as exc:
        raise ExclusionsCorruptError(
            f"Prefect Variable {name!r} is not a runtime-exclusions document ({exc.error_count()} "
            f"error(s), first: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}); "
            "fix or delete it (`prefect variable unset`)"
        ) from None


async def _write(model: str, doc: _Document) -> None:
    value = json.loads(doc.model_dump_json())
    size = len(json.dumps(value, separators=(",", ":")))
    if size >= MAX_VARIABLE_VALUE_LENGTH:
        raise ExclusionsFullError(
            f"runtime exclusions of {model!r} would take {size} characters; a Prefect Variable "
            f"holds under {MAX_VARIABLE_VALUE_LENGTH}. Nothing changed: remove entries or move "
            "long-lived ones to quarantine/builtin_exclusions.yaml"
        )
    await Variable.aset(variable_name(model), value, overwrite=True, tags=["canary", "exclusions"])


async def aread_runtime_exclusions(model: str) -> list[RuntimeExclusion]:
    """Every stored entry, expired ones included (merging drops those)."""
    return list((await _read(model)).entries)


async def aadd_runtime_exclusion(
    model: str,
    tag: str,
    *,
    reason: str,
    author: str,
    until: datetime | None = None,
    now: datetime,
) -> RuntimeExclusion:
    """Exclude `tag` for `model` now (replaces an existing entry for the tag)."""
    now = as_utc(now)
    if until is not None and as_utc(until) <= now:
        raise ExpiryInPastError(
            f"expiry {as_utc(until).isoformat()} is not after now ({now.isoformat()}); nothing added"
        )
    entry = RuntimeExclusion(tag=tag, reason=reason, author=author, added_at=now, until=until)
    async with serialised(f"{variable_name(model)}-lock"):
        doc = await _read(model)
        kept = [e for e in doc.entries if e.active(now) and e.tag != tag]
        change = {"action": "added", "tag": tag, "actor": author, "at": now.isoformat()}
        await _write(model, _Document(entries=[*kept, entry], last_change=change))
    return entry


async def aremove_runtime_exclusion(
    model: str, tag: str, *, actor: str, now: datetime
) -> RuntimeExclusion:
    """Remove the runtime exclusion of `tag`; `ExclusionNotFoundError` if there is none."""
    now = as_utc(now)
    async with serialised(f"{variable_name(model)}-lock"):
        doc = await _read(model)
        found = [e for e in doc.entries if e.tag == tag and e.active(now)]
        if not found:
            active = sorted(e.tag for e in doc.entries if e.active(now)) or "none"
            raise ExclusionNotFoundError(
                f"model {model!r} has no active runtime exclusion for {tag!r} (active: {active})"
            )
        kept = [e for e in doc.entries if e.active(now) and e.tag != tag]
        change = {"action": "removed", "tag": tag, "actor": actor, "at": now.isoformat()}
        await _write(model, _Document(entries=kept, last_change=change))
    return found[0]
