"""The gateway's provider.ignore lists as data (SPEC R6, R14, Q7): what it holds per model,
whether it may route, and the file that keeps the last lists for a start with the source
down. Pure: the fetching, the file's I/O and the logging are `routing/exclusions.py`'s.

    KnownList(tags, fetched_at, origin)      origin: "fetched" | "persisted"
    ListStatus(model, known, failing, ...)   one model's standing (/healthz, /metrics)
    not_ready(statuses, file_problem)        None when every model has a list, else why not
    encode_lists(lists) / decode_lists(raw)  the file: {"version": 1, "lists": {model:
                                             {"tags": [...], "fetched_at": ISO-8601}}}

A model has a list once a fetch of it succeeded, or once a fetch failed and the file held
one for it (the file is a fallback, never preferred to a source that answers). Without a
list a model's requests are refused; the built-in layer alone is never routed with.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from ground.errors import CanaryError

FILE_VERSION = 1
Origin = Literal["fetched", "persisted"]


class IgnoreFileError(CanaryError, ValueError):
    """The ignore-list file cannot be used (not JSON, another version, a malformed entry)."""


@dataclass(frozen=True, slots=True)
class KnownList:
    """One model's provider.ignore tags as last fetched (`fetched_at`, UTC)."""

    tags: tuple[str, ...]
    fetched_at: datetime
    origin: Origin = "fetched"


@dataclass(frozen=True, slots=True)
class ListStatus:
    """One model's standing: its list (None: none yet), whether the source's last answer
    for it was a failure (`error`: the exception's type name), and its failed fetches."""

    model: str
    known: KnownList | None
    failing: bool
    error: str | None
    failures: int

    def age_s(self, now: datetime) -> float | None:
        return (
            None if self.known is None else max(0.0, (now - self.known.fetched_at).total_seconds())
        )

    def why_missing(self) -> str:
        if self.error is None:
            return "first fetch in progress"
        return f"ignore source failed ({self.error}) and no list was fetched or persisted"

    def view(self, now: datetime) -> dict[str, Any]:
        """The model's standing as /healthz shows it."""
        if self.known is None:
            return {"loaded": False, "why": self.why_missing(), "failures": self.failures}
        return {
            "loaded": True,
            "origin": self.known.origin,
            "age_s": round(self.age_s(now) or 0.0, 3),
            "source": f"failing ({self.error})" if self.failing else "ok",
            "failures": self.failures,
        }


def not_ready(statuses: list[ListStatus], file_problem: str | None = None) -> str | None:
    """Why the gateway may not route yet (None: every model has a list)."""
    missing = [s for s in statuses if s.known is None]
    if not missing:
        return None
    why = "; ".join(f"{s.model}: {s.why_missing()}" for s in missing)
    note = f" (the ignore-list file is not used: {file_problem})" if file_problem else ""
    return f"provider.ignore not loaded for {len(missing)} model(s): {why}{note}"


def encode_lists(lists: dict[str, KnownList]) -> bytes:
    """The file's bytes for `lists` (sorted, so an unchanged set writes the same bytes)."""
    doc = {
        "version": FILE_VERSION,
        "lists": {
            model: {"tags": sorted(k.tags), "fetched_at": k.fetched_at.isoformat()}
            for model, k in sorted(lists.items())
        },
    }
    return json.dumps(doc, indent=1).encode()


def decode_lists(raw: bytes, where: str) -> dict[str, KnownList]:
    """The lists in the file's bytes, each `origin="persisted"`; `IgnoreFileError` naming
    `where` and what is wrong (nothing of a file found wrong is used)."""
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise IgnoreFileError(f"{where}: not JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("version") != FILE_VERSION:
        raise IgnoreFileError(f"{where}: not a version {FILE_VERSION} ignore-list document")
    lists = doc.get("lists")
    if not isinstance(lists, dict):
        raise IgnoreFileError(f"{where}: 'lists' must be an object of model -> list")
    return {model: _entry(model, value, where) for model, value in lists.items()}


def _entry(model: str, value: object, where: str) -> KnownList:
    bad = IgnoreFileError(
        f"{where}: lists[{model!r}] must be {{'tags': [str, ...], 'fetched_at': ISO-8601 with"
        " a zone}"
    )
    if not isinstance(value, dict):
        raise bad
    tags, at = value.get("tags"), value.get("fetched_at")
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise bad
    if not isinstance(at, str):
        raise bad
    try:
        fetched_at = datetime.fromisoformat(at)
    except ValueError:
        raise bad from None
    if fetched_at.tzinfo is None:
        raise bad
    return KnownList(tuple(sorted(set(tags))), fetched_at, "persisted")
