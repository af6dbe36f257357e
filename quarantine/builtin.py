"""Layer (a) of provider.ignore: vetted built-in exclusions, a versioned data file in the repo.

File format (`quarantine/builtin_exclusions.yaml`)::

    version: 1
    exclusions:
      - tag: deepinfra/fp4          # one endpoint ...
        # base_slug: deepinfra      # ... or every endpoint of a provider (exactly one of both)
        model: "meta-llama/*"       # fnmatch pattern on the model id
        reason: stray byte before the reply
        evidence: 19/20 replies started with '*'; 0/49 on 14 other hosts (round r-123)
        added: 2026-11-01

A bad file raises `BuiltinExclusionsError` naming the entry and the field.
"""

from __future__ import annotations

import fnmatch
from datetime import date
from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from quarantine.errors import BuiltinExclusionsError

DEFAULT_PATH = Path(__file__).with_name("builtin_exclusions.yaml")
SUPPORTED_VERSION = 1


class BuiltinExclusion(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    tag: str | None = Field(default=None, min_length=1)
    base_slug: str | None = Field(default=None, min_length=1, pattern=r"^[^/]+$")
    model: str = Field(min_length=1)  # fnmatch pattern
    reason: str = Field(min_length=1)
    evidence: str = Field(min_length=1)
    added: date

    @model_validator(mode="after")
    def _one_target(self) -> BuiltinExclusion:
        if (self.tag is None) == (self.base_slug is None):
            raise ValueError("exactly one of 'tag' or 'base_slug' is required")
        return self

    @property
    def slug(self) -> str:
        """What goes into provider.ignore: the full tag or the base slug."""
        return self.tag or self.base_slug or ""

    def matches(self, model: str) -> bool:
        return fnmatch.fnmatchcase(model, self.model)


def _describe(error: ValidationError) -> str:
    parts = []
    for err in error.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(entry)"
        parts.append(f"field '{where}': {err['msg']}")
    return "; ".join(parts)


@lru_cache(maxsize=8)
def _load(path: Path, mtime_ns: int) -> tuple[BuiltinExclusion, ...]:
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise BuiltinExclusionsError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(doc, dict):
        raise BuiltinExclusionsError(f"{path}: expected a mapping with 'version' and 'exclusions'")
    if doc.get("version") != SUPPORTED_VERSION:
        raise BuiltinExclusionsError(
            f"{path}: field 'version' must be {SUPPORTED_VERSION}, got {doc.get('version')!r}"
        )
    entries = doc.get("exclusions")
    if entries is None:
        entries = []
    if not isinstance(entries, list):
        raise BuiltinExclusionsError(f"{path}: field 'exclusions' must be a list")
    out: list[BuiltinExclusion] = []
    for index, raw in enumerate(entries):
        label = raw.get("tag") or raw.get("base_slug") if isinstance(raw, dict) else None
        try:
            out.append(BuiltinExclusion.model_validate(raw))
        except ValidationError as exc:
            raise BuiltinExclusionsError(
                f"{path}: entry {index} ({label or 'no tag'}): {_describe(exc)}"
            ) from None
    seen: set[tuple[str, str]] = set()
    for index, item in enumerate(out):
        key = (item.slug, item.model)
        if key in seen:
            raise BuiltinExclusionsError(
                f"{path}: entry {index} ({item.slug}): duplicate of an earlier entry for model pattern {item.model!r}"
            )
        seen.add(key)
    return tuple(out)


def load_builtin(path: Path | str | None = None) -> list[BuiltinExclusion]:
    """Read and validate the built-in exclusions file (cached until the file changes)."""
    target = Path(path) if path is not None else DEFAULT_PATH
    try:
        mtime = target.stat().st_mtime_ns
    except OSError as exc:
        raise BuiltinExclusionsError(f"{target}: cannot read built-in exclusions: {exc}") from exc
    return list(_load(target, mtime))
