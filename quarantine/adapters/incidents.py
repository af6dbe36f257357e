"""Layer (b) of provider.ignore: runtime incident exclusions, one Prefect Variable per model.

The Variable `canary-exclusions-<model slug>` holds::

    {"version": 1,
     "entries": [{"tag", "reason", "author", "added_at", "until"}, ...],
     "last_change": {"action": "added"|"removed", "tag", "actor", "at"}}

The document is edited by hand too (the UI, `prefect variable set`), so it is read entry by
entry: an entry that does not validate is skipped with a warning naming it (its index, its
tag if it has one, and the first error), and the others still apply; `canary status` and
`canary ignore` show the warnings. Writes keep such entries as they are, for a human to
fix. A value that is not a document at all contributes no entries to reads (a warning
again, never an error, so the other layers still apply) and is refused by writes
(`ExclusionsCorruptError`), which never overwrite what a human wrote.

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
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from prefect.types import MAX_VARIABLE_VALUE_LENGTH
from prefect.variables import Variable
from pydantic import ValidationError

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

log = logging.getLogger(__name__)
_warned: set[str] = set()  # each problem is logged once per process (the gateway re-reads often)


@dataclass
class RuntimeLayer:
    """What the Variable holds: valid entries, and a warning per part that is not."""

    entries: list[RuntimeExclusion] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    invalid: list[Any] = field(default_factory=list)  # raw entries kept by writes
    unreadable: bool = False  # the value is not a document at all


def variable_name(model: str) -> str:
    return f"canary-exclusions-{model_slug(model)}"


def _first_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "value"
    return f"{where}: {first['msg']}"


def parse_document(name: str, raw: object) -> RuntimeLayer:
    """Read a runtime-exclusions value entry by entry (module docstring). Pure."""
    layer = RuntimeLayer()
    if raw is None:
        return layer
    entries = raw.get("entries") if isinstance(raw, dict) else None
    if not isinstance(entries, list):
        layer.unreadable = True
        layer.problems.append(
            f"Prefect Variable {name!r} is not a runtime-exclusions document "
            '(expected {"entries": [...]}); its entries are ignored until it is fixed or '
            "deleted (`prefect variable unset`)"
        )
        return layer
    for i, item in enumerate(entries):
        try:
            layer.entries.append(RuntimeExclusion.model_validate(item))
        except ValidationError as exc:
            tag = item.get("tag") if isinstance(item, dict) else None
            which = f"entry {i}" + (f" ({str(tag)[:60]!r})" if tag else "")
            layer.invalid.append(item)
            layer.problems.append(
                f"Prefect Variable {name!r}: {which} skipped, {_first_error(exc)}"
            )
    return layer


async def _read(model: str) -> RuntimeLayer:
    name = variable_name(model)
    layer = parse_document(name, await Variable.aget(name))
    for problem in layer.problems:
        if problem not in _warned:
            _warned.add(problem)
            log.warning("%s", problem)
    return layer


async def _read_for_write(model: str) -> RuntimeLayer:
    layer = await _read(model)
    if layer.unreadable:
        raise ExclusionsCorruptError(f"{layer.problems[0]}; nothing changed")
    return layer


async def _write(
    model: str,
    entries: list[RuntimeExclusion],
    invalid: list[Any],
    change: dict[str, Any],
) -> None:
    value = {
        "version": 1,
        "entries": [*(json.loads(e.model_dump_json()) for e in entries), *invalid],
        "last_change": change,
    }
    size = len(json.dumps(value, separators=(",", ":")))
    if size >= MAX_VARIABLE_VALUE_LENGTH:
        raise ExclusionsFullError(
            f"runtime exclusions of {model!r} would take {size} characters; a Prefect Variable "
            f"holds under {MAX_VARIABLE_VALUE_LENGTH}. Nothing changed: remove entries or move "
            "long-lived ones to quarantine/builtin_exclusions.yaml"
        )
    await Variable.aset(variable_name(model), value, overwrite=True, tags=["canary", "exclusions"])


async def aread_runtime_layer(model: str) -> RuntimeLayer:
    """The valid entries (expired ones included) and a warning per invalid part."""
    return await _read(model)


async def aread_runtime_exclusions(model: str) -> list[RuntimeExclusion]:
    """Every valid stored entry, expired ones included (merging drops those)."""
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
        doc = await _read_for_write(model)
        kept = [e for e in doc.entries if e.active(now) and e.tag != tag]
        change = {"action": "added", "tag": tag, "actor": author, "at": now.isoformat()}
        await _write(model, [*kept, entry], doc.invalid, change)
    return entry


async def aremove_runtime_exclusion(
    model: str, tag: str, *, actor: str, now: datetime
) -> RuntimeExclusion:
    """Remove the runtime exclusion of `tag`; `ExclusionNotFoundError` if there is none."""
    now = as_utc(now)
    async with serialised(f"{variable_name(model)}-lock"):
        doc = await _read_for_write(model)
        found = [e for e in doc.entries if e.tag == tag and e.active(now)]
        if not found:
            active = sorted(e.tag for e in doc.entries if e.active(now)) or "none"
            raise ExclusionNotFoundError(
                f"model {model!r} has no active runtime exclusion for {tag!r} (active: {active})"
            )
        kept = [e for e in doc.entries if e.active(now) and e.tag != tag]
        change = {"action": "removed", "tag": tag, "actor": actor, "at": now.isoformat()}
        await _write(model, kept, doc.invalid, change)
    return found[0]
