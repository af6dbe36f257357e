"""Generate a JSON instance that validates against a (subset of) JSON Schema,
and break one on purpose. Supports objects (properties, required,
additionalProperties), strings (enum, const, minLength, maxLength, format),
integers and numbers (minimum/maximum, exclusive bounds, multipleOf), booleans,
null, arrays (items, minItems, maxItems), anyOf/oneOf/allOf and local `$ref`."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

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
    lo = int(schema.get("minLength", 1))
    hi = int(schema.get("maxLength", max(lo, 24)))
    text = " ".join(rng.choice(_WORDS) for _ in range(3))
    while len(text) < lo:
        text += " " + rng.choice(_WORDS)
    return text[:hi] if hi >= lo else text[:lo]


def _number(schema: dict[str, Any], rng: random.Random, integer: bool) -> int | float:
    lo: float = schema.get("minimum", schema.get("exclusiveMinimum", 0))
    hi: float = schema.get("maximum", schema.get("exclusiveMaximum", lo + 100))
    if "exclusiveMinimum" in schema and not isinstance(schema["exclusiveMinimum"], bool):
        lo = schema["exclusiveMinimum"] + (1 if integer else 0.01)
    if "exclusiveMaximum" in schema and not isinstance(schema["exclusiveMaximum"], bool):
        hi = schema["exclusiveMaximum"] - (1 if integer else 0.01)
    if hi < lo:
        hi = lo
    step = schema.get("multipleOf")
    if integer:
        lo_i, hi_i = int(-(-lo // 1)), int(hi // 1)
        value = rng.randint(lo_i, max(lo_i, hi_i))
        if isinstance(step, int) and step > 0:
            value = (value // step) * step
            if value < lo:
                value += step
        return value
    real = round(rng.uniform(lo, hi), 2)
    return min(max(real, lo), hi)


def generate(
    schema: Any, rng: random.Random, root: dict[str, Any] | None = None, depth: int = 0
) -> Any:
    """A value that validates against `schema`."""
    root = root if root is not None else (schema if isinstance(schema, dict) else {})
    schema = _resolve(schema, root)
    if not isinstance(schema, dict) or depth > 12:
        return None
    if "const" in schema:
        return copy.deepcopy(schema["const"])
    if schema.get("enum"):
        return copy.deepcopy(rng.choice(schema["enum"]))
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return generate(schema[key][0], rng, root, depth + 1)
    if schema.get("allOf"):
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            part = _resolve(part, root)
            merged.setdefault("properties", {}).update(part.get("properties", {}))
            merged["required"] = [*merged.get("required", []), *part.get("required", [])]
            merged.update({k: v for k, v in part.items() if k not in {"properties", "required"}})
        return generate(merged, rng, root, depth + 1)
    kind = _type_of(schema)
    if kind == "object":
        props = schema.get("properties", {})
        return {name: generate(sub, rng, root, depth + 1) for name, sub in props.items()}
    if kind == "array":
        lo = int(schema.get("minItems", 1))
        hi = int(schema.get("maxItems", max(lo, 3)))
        n = rng.randint(lo, max(lo, min(hi, lo + 2)))
        items = schema.get("items", {})
        return [generate(items, rng, root, depth + 1) for _ in range(n)]
    if kind == "string":
        return _string(schema, rng)
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
        required = (
            [k for k in schema.get("required", []) if k in instance]
            if isinstance(schema, dict)
            else []
        )
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
