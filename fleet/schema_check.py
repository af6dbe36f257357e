"""Check that a JSON Schema sent in a request is well-formed enough for the fleet
to generate from it: every keyword the generator (and JSON Schema) gives a
type has a value of that type, nesting is bounded, and `$ref`s are strings.

This is a hand-written walk rather than jsonschema's metaschema check because
it runs on every structured request (a metaschema check costs 1-5 ms; this
costs microseconds). It rejects what would crash or mislead the generator; it
does not claim full metaschema conformance. A problem raises `SchemaProblem`
whose message names the keyword's path, e.g.
`properties.name.minLength: must be a non-negative integer, got 'x'`.
"""

from __future__ import annotations

import math
from typing import Any

from ground.errors import CanaryError

MAX_DEPTH = 64

_TYPES = {"object", "array", "string", "integer", "number", "boolean", "null"}
_COUNTS = (
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "minContains",
    "maxContains",
)
_NUMBERS = ("minimum", "maximum")
_EXCLUSIVE = ("exclusiveMinimum", "exclusiveMaximum")  # number, or bool (draft 4)
_STRINGS = ("format", "pattern", "$ref", "$id", "$schema", "title", "description")
_SUBSCHEMA = (
    "additionalProperties",
    "additionalItems",
    "unevaluatedProperties",
    "unevaluatedItems",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
)
_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


class SchemaProblem(CanaryError, ValueError):
    """A request's JSON Schema the fleet cannot honour (HTTP 400 `invalid_request`)."""


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _is_count(value: Any) -> bool:
    if isinstance(value, bool) or not _is_number(value):
        return False
    return bool(value >= 0 and (isinstance(value, int) or value.is_integer()))


def _where(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def check_schema(schema: Any, path: str = "", depth: int = 0) -> None:
    """Raise `SchemaProblem` (naming the keyword's path) if `schema` is malformed."""
    if isinstance(schema, bool):
        return
    if not isinstance(schema, dict):
        raise SchemaProblem(
            f"{path or 'schema'}: a schema must be an object or a boolean, got {type(schema).__name__}"
        )
    if depth > MAX_DEPTH:
        raise SchemaProblem(f"{path}: schema nested deeper than {MAX_DEPTH} levels")

    def bad(key: str, want: str) -> SchemaProblem:
        return SchemaProblem(f"{_where(path, key)}: must be {want}, got {schema[key]!r:.60}")

    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        if not kinds or not all(isinstance(k, str) and k in _TYPES for k in kinds):
            raise bad("type", f"one of {sorted(_TYPES)} or a non-empty list of them")
    for key in _COUNTS:
        if key in schema and not _is_count(schema[key]):
            raise bad(key, "a non-negative integer")
    for key in _NUMBERS:
        if key in schema and not _is_number(schema[key]):
            raise bad(key, "a finite number")
    for key in _EXCLUSIVE:
        if key in schema and not (isinstance(schema[key], bool) or _is_number(schema[key])):
            raise bad(key, "a finite number")
    if "multipleOf" in schema and not (
        _is_number(schema["multipleOf"]) and schema["multipleOf"] > 0
    ):
        raise bad("multipleOf", "a number greater than 0")
    for key in _STRINGS:
        if key in schema and not isinstance(schema[key], str):
            raise bad(key, "a string")
    if "enum" in schema and not isinstance(schema["enum"], list):
        raise bad("enum", "an array")
    required = schema.get("required")
    if "required" in schema and not (
        isinstance(required, list) and all(isinstance(r, str) for r in required)
    ):
        raise bad("required", "an array of strings")
    for key in _SUBSCHEMA:
        if key in schema:
            check_schema(schema[key], _where(path, key), depth + 1)
    for key in _MAPS:
        if key in schema:
            if not isinstance(schema[key], dict):
                raise bad(key, "an object mapping names to schemas")
            for name, sub in schema[key].items():
                check_schema(sub, _where(path, f"{key}.{name}"), depth + 1)
    for key in _LISTS:
        if key in schema:
            if not isinstance(schema[key], list) or not schema[key]:
                raise bad(key, "a non-empty array of schemas")
            for i, sub in enumerate(schema[key]):
                check_schema(sub, _where(path, f"{key}.{i}"), depth + 1)
    items = schema.get("items")
    if isinstance(items, list):  # draft-4 tuple form
        for i, sub in enumerate(items):
            check_schema(sub, _where(path, f"items.{i}"), depth + 1)
    elif "items" in schema:
        check_schema(items, _where(path, "items"), depth + 1)
