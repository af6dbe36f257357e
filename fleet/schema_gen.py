"""Generate a JSON instance that validates against a (subset of) JSON Schema,
and break one on purpose. A schema's `examples` (the standard annotation) are used as
they are when present: they are the most realistic instances, and the only way to meet
invariants JSON Schema cannot state (an invoice's line items summing to its total).
Otherwise it supports objects (properties, required,
additionalProperties), strings (enum, const, minLength, maxLength, format),
integers and numbers (minimum/maximum, exclusive bounds, multipleOf), booleans,
null, arrays (items, minItems, maxItems), anyOf/oneOf/allOf and local `$ref`.

Hostile schemas: keyword values of the wrong type are ignored (requests are
checked first by `fleet.schema_check`); minLength/maxLength/minItems/maxItems
are clamped to `MAX_SIZE` (10,000), so a schema demanding more gets a
shorter instance that does not validate; one instance holds at most
`MAX_VALUES` (25,000; array slots count too) values and `MAX_CHARS`
(250,000) string characters, beyond which (e.g. nested arrays of 10,000 x
10,000) `generate` raises `SchemaProblem` after well under a second, as it
does for any other failure to generate (never a bare TypeError/KeyError/...)."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

from fleet.schema_check import SchemaProblem

MAX_SIZE = 10_000
MAX_VALUES = 25_000
MAX_CHARS = 250_000
_FAILURES = (
    TypeError,
    ValueError,
    KeyError,
    AttributeError,
    IndexError,
    OverflowError,
    RecursionError,
)

_WORDS = (
    "lantern",
    "river",
    "tower",
    "letter",
    "harbor",
    "ember",
    "willow",
    "compass",
    "meadow",
    "raven",
)


def _count(schema: dict[str, Any], key: str, default: int) -> int:
    """A size keyword as an int in [0, MAX_SIZE] (default when absent or malformed)."""
    value = schema.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return default
    return int(max(0, min(value, MAX_SIZE)))


def _bound(schema: dict[str, Any], key: str) -> float | None:
    value = schema.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return None
    return value


class _Budget:
    def __init__(self) -> None:
        self.values = MAX_VALUES
        self.chars = MAX_CHARS

    def spend(self, values: int, chars: int = 0) -> None:
        self.values -= values
        self.chars -= chars
        if self.values < 0 or self.chars < 0:
            raise SchemaProblem(
                f"the schema asks for an instance larger than the fleet generates "
                f"({MAX_VALUES:,} values, {MAX_CHARS:,} string characters)"
            )


def _resolve(schema: Any, root: dict[str, Any]) -> Any:
    seen = 0
    while isinstance(schema, dict) and "$ref" in schema and seen < 32:
        ref = schema["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#"):
            return {}
        node: Any = root
        for part in ref.lstrip("#").strip("/").split("/"):
            if not part:
                continue
            node = (
                node.get(part.replace("~1", "/").replace("~0", "~"), {})
                if isinstance(node, dict)
                else {}
            )
        schema = node
        seen += 1
    return schema


def _type_of(schema: dict[str, Any]) -> str | None:
    t = schema.get("type")
    if isinstance(t, list):
        non_null = [x for x in t if x != "null"]
        return non_null[0] if non_null else "null"
    if isinstance(t, str):
        return t
    if "properties" in schema:
        return "object"
    if "items" in schema:
        return "array"
    return None


def _string(schema: dict[str, Any], rng: random.Random) -> str:
    fmt = schema.get("format")
    if fmt == "date-time":
        return f"2025-01-0{rng.randint(1, 9)}T12:00:00Z"
    if fmt == "date":
        return f"2025-01-0{rng.randint(1, 9)}"
    if fmt == "email":
        return f"{rng.choice(_WORDS)}@example.com"
    if fmt in {"uri", "url"}:
        return f"https://example.com/{rng.choice(_WORDS)}"
    if fmt == "uuid":
        return f"{rng.getrandbits(32):08x}-0000-4000-8000-{rng.getrandbits(48):012x}"
    lo = _count(schema, "minLength", 1)
    hi = _count(schema, "maxLength", max(lo, 24))
    text = " ".join(rng.choice(_WORDS) for _ in range(3))
    while len(text) < lo:
        text += " " + rng.choice(_WORDS)
    return text[:hi] if hi >= lo else text[:lo]


def _number(schema: dict[str, Any], rng: random.Random, integer: bool) -> int | float:
    lo_x, hi_x = _bound(schema, "exclusiveMinimum"), _bound(schema, "exclusiveMaximum")
    mn, mx = _bound(schema, "minimum"), _bound(schema, "maximum")
    lo: float = mn if mn is not None else (lo_x if lo_x is not None else 0)
    if lo_x is not None:
        lo = max(lo, lo_x + (1 if integer else 0.01))
    hi: float = mx if mx is not None else (hi_x if hi_x is not None else lo + 100)
    if hi_x is not None:
        hi = min(hi, hi_x - (1 if integer else 0.01))
    if hi < lo:
        hi = lo
    step = schema.get("multipleOf")
    if integer:
        lo_i, hi_i = int(-(-lo // 1)), int(hi // 1)
        value = rng.randint(lo_i, max(lo_i, hi_i))
        if isinstance(step, int) and not isinstance(step, bool) and step > 0:
            value = (value // step) * step
            if value < lo:
                value += step
        return value
    real = round(rng.uniform(lo, hi), 2)
    return min(max(real, lo), hi)


def generate(schema: Any, rng: random.Random, root: dict[str, Any] | None = None) -> Any:
    """A value that validates against `schema` (see the module doc for size limits);
    raises `SchemaProblem` when it cannot make one."""
    root = root if root is not None else (schema if isinstance(schema, dict) else {})
    try:
        return _generate(schema, rng, root, 0, _Budget())
    except SchemaProblem:
        raise
    except _FAILURES as exc:
        raise SchemaProblem(f"cannot generate an instance of the schema: {exc!r:.200}") from None


def _generate(
    schema: Any, rng: random.Random, root: dict[str, Any], depth: int, budget: _Budget
) -> Any:
    schema = _resolve(schema, root)
    if not isinstance(schema, dict) or depth > 12:
        return None
    budget.spend(1)
    if "const" in schema:
        return copy.deepcopy(schema["const"])
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return copy.deepcopy(rng.choice(enum))
    examples = schema.get("examples")
    if isinstance(examples, list) and examples:  # the schema's own realistic instances
        return copy.deepcopy(rng.choice(examples))
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            return _generate(options[0], rng, root, depth + 1, budget)
    parts = schema.get("allOf")
    if isinstance(parts, list) and parts:
        merged: dict[str, Any] = {}
        for part in parts:
            part = _resolve(part, root)
            if not isinstance(part, dict):
                continue
            props = part.get("properties")
            merged.setdefault("properties", {}).update(props if isinstance(props, dict) else {})
            required = part.get("required")
            merged["required"] = [
                *merged.get("required", []),
                *(required if isinstance(required, list) else []),
            ]
            merged.update({k: v for k, v in part.items() if k not in {"properties", "required"}})
        return _generate(merged, rng, root, depth + 1, budget)
    kind = _type_of(schema)
    if kind == "object":
        props = schema.get("properties")
        if not isinstance(props, dict):
            return {}
        return {name: _generate(sub, rng, root, depth + 1, budget) for name, sub in props.items()}
    if kind == "array":
        lo = _count(schema, "minItems", 1)
        hi = _count(schema, "maxItems", max(lo, 3))
        n = rng.randint(lo, max(lo, min(hi, lo + 2)))
        budget.spend(n)
        items = schema.get("items", {})
        return [_generate(items, rng, root, depth + 1, budget) for _ in range(n)]
    if kind == "string":
        text = _string(schema, rng)
        budget.spend(0, len(text))
        return text
    if kind == "integer":
        return _number(schema, rng, integer=True)
    if kind == "number":
        return _number(schema, rng, integer=False)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    return _string({}, rng)


def _wrong_type(value: Any) -> Any:
    if isinstance(value, bool):
        return "yes"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return 12345
    if isinstance(value, list):
        return {"items": value}
    if isinstance(value, dict):
        return [value]
    return "null"


def break_instance(instance: Any, schema: Any, mode: str, rng: random.Random) -> str:
    """Serialise a *broken* version of a valid instance (mode: invalid_json,
    missing_field, wrong_type or prose). Falls back to invalid JSON when the
    schema leaves nothing to drop or retype."""
    root = schema if isinstance(schema, dict) else {}
    schema = _resolve(schema, root)
    if mode == "prose":
        return f"Sure! Here is the JSON you asked for:\n{json.dumps(instance, ensure_ascii=False)}\nLet me know if you need anything else."
    if isinstance(instance, dict) and instance:
        wanted = schema.get("required") if isinstance(schema, dict) else None
        required = [
            k
            for k in (wanted if isinstance(wanted, list) else [])
            if isinstance(k, str) and k in instance
        ]
        if mode == "missing_field" and required:
            broken = dict(instance)
            del broken[rng.choice(required)]
            return json.dumps(broken, ensure_ascii=False)
        if mode == "wrong_type":
            broken = dict(instance)
            key = rng.choice(sorted(broken))
            broken[key] = _wrong_type(broken[key])
            return json.dumps(broken, ensure_ascii=False)
    text = json.dumps(instance, ensure_ascii=False)
    return text[: max(1, len(text) - 2)] + ","


def bad_arguments(instance: Any, schema: Any, rng: random.Random) -> str:
    """Tool arguments that violate the tool's parameter schema."""
    mode = "missing_field" if isinstance(schema, dict) and schema.get("required") else "wrong_type"
    if not isinstance(instance, dict) or not instance:
        return "{not json"
    return break_instance(instance, schema, mode, rng)
