"""The schema registry: JSON Schema files by id (`schemas/<id>.json`).

Each schema is checked against its metaschema at load time, so a broken
schema fails at start-up with the file named, never mid-request.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from routing.errors import ContractError


def check_schema(schema: Any, source: str) -> None:
    if not isinstance(schema, dict):
        raise ContractError(f"{source}: a JSON Schema must be an object")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        path = ".".join(str(p) for p in exc.path) or "(top level)"
        raise ContractError(f"{source}: {path}: invalid JSON Schema: {exc.message}") from None


class SchemaRegistry(Mapping[str, dict[str, Any]]):
    """Read-only map of schema id -> JSON Schema, with compiled validators."""

    def __init__(self, schemas: dict[str, dict[str, Any]]) -> None:
        for schema_id, schema in schemas.items():
            check_schema(schema, f"schemas/{schema_id}.json")
        self._schemas = dict(schemas)
        self._validators = {k: Draft202012Validator(v) for k, v in schemas.items()}

    @classmethod
    def load(cls, directory: Path) -> SchemaRegistry:
        schemas: dict[str, dict[str, Any]] = {}
        if directory.is_dir():
            for path in sorted(directory.glob("*.json")):
                try:
                    schemas[path.stem] = json.loads(path.read_text(encoding="utf-8"))
                except json.JSONDecodeError as exc:
                    raise ContractError(
                        f"schemas/{path.name}: not valid JSON (line {exc.lineno}): {exc.msg}"
                    ) from None
                except UnicodeDecodeError as exc:
                    raise ContractError(
                        f"schemas/{path.name}: not UTF-8 text (byte {exc.start}: {exc.reason})"
                    ) from None
                except OSError as exc:
                    raise ContractError(
                        f"schemas/{path.name}: cannot read: {exc.strerror}"
                    ) from None
        return cls(schemas)

    def validator(self, schema_id: str) -> Draft202012Validator:
        return self._validators[schema_id]

    def __getitem__(self, key: str) -> dict[str, Any]:
        return self._schemas[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._schemas)

    def __len__(self) -> int:
        return len(self._schemas)
