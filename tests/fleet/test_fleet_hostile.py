"""Hostile request schemas never crash or freeze the fleet (issue 2 §3 bad
input): malformed keywords are a 400 `invalid_request` envelope naming the
keyword, the request is logged, huge sizes are clamped or refused quickly,
and the server keeps serving."""

from __future__ import annotations

import contextlib
import json
import random
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.schema_check import SchemaProblem, check_schema
from fleet.schema_gen import MAX_SIZE, generate
from tests.fixtures.fleet import FleetHandle

QWEN = "qwen/qwen-2.5-72b-instruct"
PROMPT = [{"role": "user", "content": "Continue the scene: the caravan stops at the border post."}]
PIN = {"only": ["deepinfra/bf16"], "allow_fallbacks": False}


def _structured(schema: Any) -> dict[str, Any]:
    return {
        "model": QWEN,
        "messages": PROMPT,
        "provider": PIN,
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}},
    }


def _tool(parameters: Any) -> dict[str, Any]:
    return {
        "model": QWEN,
        "messages": PROMPT,
        "provider": PIN,
        "tools": [{"type": "function", "function": {"name": "f", "parameters": parameters}}],
    }


def _still_serving(fleet: FleetHandle) -> None:
    r = fleet.chat(_structured({"type": "object", "properties": {"a": {"type": "integer"}}}))
    assert r.status_code == 200
    assert isinstance(json.loads(r.json()["choices"][0]["message"]["content"])["a"], int)


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (_structured({"type": "string", "minLength": "x"}), "schema.minLength"),
        (_structured({"properties": 5}), "schema.properties"),
        (_structured({"enum": 5}), "schema.enum"),
        (_structured({"anyOf": {}}), "schema.anyOf"),
        (_structured({"type": "object", "properties": {"a": {"maxItems": -1}}}), "a.maxItems"),
        (_tool({"type": "integer", "maximum": "z"}), "tools.0.function.parameters.maximum"),
        ({**_tool({"type": "object", "required": [1]}), "stream": True}, "parameters.required"),
    ],
)
def test_hostile_schema_keywords_are_400_logged_and_serving_continues(
    fleet: FleetHandle, body: dict[str, Any], where: str
) -> None:
    """A malformed schema keyword (response_format or tool parameters, stream or not) is a 400
    `invalid_request` envelope naming the keyword; the request is logged; the fleet keeps serving."""
    r = fleet.chat(body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == 400 and err["metadata"]["error_type"] == "invalid_request"
    assert where in err["message"]
    log = fleet.requests()
    assert [(e["status"], e["body"]) for e in log] == [(400, body)]
    _still_serving(fleet)


@pytest.mark.parametrize(
    ("schema", "size"),
    [
        ({"type": "array", "minItems": 100_000_000, "items": {"type": "boolean"}}, len),
        ({"type": "string", "minLength": 1_000_000_000}, len),
    ],
)
def test_huge_sizes_are_clamped_and_fast(
    fleet: FleetHandle, schema: dict[str, Any], size: Any
) -> None:
    """minItems 1e8 / minLength 1e9 are clamped to MAX_SIZE (10,000): answered in seconds, not minutes."""
    fleet.load("seed-incidents", time_scale=0.001)  # 10,000 tokens at scripted speed take long
    started = time.monotonic()
    r = fleet.chat(_structured(schema), timeout_s=20)
    assert r.status_code == 200
    assert size(json.loads(r.json()["choices"][0]["message"]["content"])) == MAX_SIZE
    assert time.monotonic() - started < 20
    _still_serving(fleet)


def test_instance_too_large_to_generate_is_400_and_logged(fleet: FleetHandle) -> None:
    """Nested arrays of 10,000 x 10,000 exceed the generation budget: 400 `invalid_request`, logged, quickly."""
    schema = {"type": "array", "minItems": 10_000, "items": {"type": "array", "minItems": 10_000}}
    r = fleet.chat(_structured(schema), timeout_s=20)
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["metadata"]["error_type"] == "invalid_request" and "larger than" in err["message"]
    assert [e["status"] for e in fleet.requests()] == [400]
    _still_serving(fleet)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=12,
)
_KEYWORDS = st.sampled_from(
    [
        "type",
        "properties",
        "items",
        "enum",
        "const",
        "anyOf",
        "oneOf",
        "allOf",
        "required",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "format",
        "$ref",
        "additionalProperties",
    ]
)
_SCHEMAS = st.recursive(
    st.dictionaries(_KEYWORDS, _JSON, max_size=4),
    lambda inner: st.dictionaries(
        _KEYWORDS, inner | _JSON | st.lists(inner, max_size=2), max_size=4
    ),
    max_leaves=10,
)


@settings(max_examples=200, deadline=None)
@given(schema=_SCHEMAS, seed=st.integers(0, 2**32))
def test_generator_and_checker_fail_only_with_schema_problem(schema: Any, seed: int) -> None:
    """Any JSON value as a schema: check_schema passes or raises SchemaProblem; a schema it passes
    always generates (unless over the size budget); generate never raises anything but SchemaProblem."""
    try:
        check_schema(schema)
    except SchemaProblem:
        with contextlib.suppress(SchemaProblem):
            generate(schema, random.Random(seed))
        return
    try:
        generate(schema, random.Random(seed))
    except SchemaProblem as exc:
        assert "larger than" in str(exc)


@pytest.mark.parametrize("key", [None, "wrong-key"])
def test_auth_is_checked_before_the_body_is_parsed(fleet: FleetHandle, key: str | None) -> None:
    """A malformed body without a valid key is 401 (not 400), and its body is not logged."""
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    secret_body = b'{"model": "x", "messages": [ "sk-or-v1-leaked'
    r = fleet.http.post(f"{fleet.base_url}/chat/completions", content=secret_body, headers=headers)
    assert r.status_code == 401
    assert r.json()["error"]["metadata"]["error_type"] == "authentication"
    log = fleet.requests()
    assert [e["status"] for e in log] == [401]
    assert "sk-or-v1-leaked" not in json.dumps(log)
    _still_serving(fleet)
