"""Capabilities of the fleet that routing relies on (issue 2 §2; SPEC R2, R6,
R7, R12): structured output validating against the requested schema, tool
calls (and their scripted defects), context limits, image input, usage/cost."""

from __future__ import annotations

import json
import random
from typing import Any

import jsonschema
import pytest

from fleet.schema_gen import generate
from tests.fixtures.fleet import FleetHandle, parse_sse

QWEN = "qwen/qwen-2.5-72b-instruct"
GEMINI = "google/gemini-2.0-flash"
LLAMA = "meta-llama/llama-3.3-70b-instruct"
PROMPT = [{"role": "user", "content": "Continue the scene: the caravan stops at the border post."}]
NESTED = {
    "type": "object",
    "properties": {
        "invoice": {
            "type": "object",
            "properties": {
                "currency": {"enum": ["EUR", "USD"]},
                "total": {"type": "number", "minimum": 0},
                "lines": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 4,
                    "items": {"$ref": "#/$defs/line"},
                },
            },
            "required": ["currency", "total", "lines"],
            "additionalProperties": False,
        },
        "paid": {"type": "boolean"},
        "note": {"type": ["string", "null"], "maxLength": 10},
    },
    "required": ["invoice", "paid", "note"],
    "additionalProperties": False,
    "$defs": {
        "line": {
            "type": "object",
            "properties": {
                "sku": {"type": "string", "minLength": 3},
                "qty": {"type": "integer", "minimum": 1, "maximum": 9},
            },
            "required": ["sku", "qty"],
            "additionalProperties": False,
        }
    },
}
WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
            },
            "required": ["city", "days"],
            "additionalProperties": False,
        },
    },
}
BOOK_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "book_room",
        "parameters": {
            "type": "object",
            "properties": {
                "nights": {"type": "integer", "minimum": 1},
                "smoking": {"type": "boolean"},
            },
            "required": ["nights", "smoking"],
        },
    },
}


def _chat(
    fleet: FleetHandle, model: str, provider: dict[str, Any] | None = None, **extra: Any
) -> Any:
    body = {
        "model": model,
        "messages": extra.pop("messages", PROMPT),
        "provider": provider or {},
        **extra,
    }
    return fleet.chat(body)


@pytest.mark.parametrize("seed", range(25))
def test_r7_schema_generator_output_validates(seed: int) -> None:
    """The instance generator (pure) produces valid instances for nesting, enums, $ref, arrays, nullable types."""
    jsonschema.validate(generate(NESTED, random.Random(seed)), NESTED)


def test_c6_structured_output_validates_against_requested_schema(fleet: FleetHandle) -> None:
    """A json_schema request to a structured-output endpoint returns JSON that validates (stream and not)."""
    rf = {
        "type": "json_schema",
        "json_schema": {"name": "invoice", "strict": True, "schema": NESTED},
    }
    r = _chat(
        fleet, QWEN, {"only": ["deepinfra/bf16"], "require_parameters": True}, response_format=rf
    )
    jsonschema.validate(json.loads(r.json()["choices"][0]["message"]["content"]), NESTED)
    r = _chat(fleet, QWEN, {"only": ["together/fp8"]}, response_format=rf, stream=True)
    jsonschema.validate(json.loads(parse_sse(r.content).text), NESTED)


def test_r7_tool_call_names_the_chosen_tool_with_valid_arguments(fleet: FleetHandle) -> None:
    """A named tool_choice gets one call to that tool (finish `tool_calls`), arguments valid; a
    streamed `auto` request that names a tool ("weather") gets a call to it."""
    choice = {"type": "function", "function": {"name": "book_room"}}
    r = _chat(
        fleet,
        QWEN,
        {"only": ["deepinfra/bf16"]},
        tools=[WEATHER_TOOL, BOOK_TOOL],
        tool_choice=choice,
    )
    out = r.json()["choices"][0]
    assert out["finish_reason"] == "tool_calls" and out["message"]["content"] is None
    call = out["message"]["tool_calls"][0]
    assert call["function"]["name"] == "book_room"
    jsonschema.validate(
        json.loads(call["function"]["arguments"]), BOOK_TOOL["function"]["parameters"]
    )
    ask = [{"role": "user", "content": "What will the weather be in Lisbon this week?"}]
    stream = parse_sse(
        _chat(
            fleet,
            QWEN,
            {"only": ["together/fp8"]},
            tools=[WEATHER_TOOL],
            stream=True,
            messages=ask,
        ).content
    )
    calls = [
        tc
        for p in stream.payloads
        for c in p["choices"]
        for tc in c["delta"].get("tool_calls") or []
    ]
    assert calls[0]["function"]["name"] == "get_weather" and stream.finish_reason == "tool_calls"
    jsonschema.validate(
        json.loads("".join(c["function"]["arguments"] for c in calls)),
        WEATHER_TOOL["function"]["parameters"],
    )


def test_r7_tool_defects_unknown_name_and_bad_arguments(fleet: FleetHandle) -> None:
    """defect-zoo: one host calls an unregistered tool name, another sends arguments that fail the schema."""
    fleet.load("defect-zoo", time_scale=0.01)
    pinned = {"allow_fallbacks": False}
    r = _chat(
        fleet,
        LLAMA,
        {"only": ["toolname/fp8"], **pinned},
        tools=[WEATHER_TOOL],
        tool_choice="required",
    )
    assert r.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] not in {
        "get_weather"
    }
    r = _chat(
        fleet,
        LLAMA,
        {"only": ["toolargs/fp8"], **pinned},
        tools=[WEATHER_TOOL],
        tool_choice="required",
    )
    args = r.json()["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
    with pytest.raises((json.JSONDecodeError, jsonschema.ValidationError)):
        jsonschema.validate(json.loads(args), WEATHER_TOOL["function"]["parameters"])


def test_r6_tools_require_parameters_skips_endpoint_without_tools(fleet: FleetHandle) -> None:
    """Tools + require_parameters: an endpoint without `tools` is no candidate (404 when pinned to it)."""
    r = _chat(
        fleet,
        QWEN,
        {"only": ["hyperbolic/bf16"], "allow_fallbacks": False, "require_parameters": True},
        tools=[WEATHER_TOOL],
    )
    assert r.status_code == 404
    r = _chat(
        fleet,
        QWEN,
        {"order": ["hyperbolic/bf16"], "require_parameters": True},
        tools=[WEATHER_TOOL],
    )
    assert r.status_code == 200 and r.json()["provider"] != "Hyperbolic"


def test_r2_context_overflow_only_a_larger_context_route(fleet: FleetHandle) -> None:
    """A ~12k-token prompt skips the 8k endpoint (fallbacks on), is a 400 when pinned to it, and too large for all is a 400."""
    long = [{"role": "user", "content": "word " * 10_000}]
    r = _chat(fleet, QWEN, {"order": ["novita/fp8"]}, messages=long)
    assert r.status_code == 200 and r.json()["provider"] != "Novita"
    r = _chat(fleet, QWEN, {"only": ["novita/fp8"], "allow_fallbacks": False}, messages=long)
    assert (
        r.status_code == 400
        and r.json()["error"]["metadata"]["error_type"] == "context_length_exceeded"
    )
    huge = [{"role": "user", "content": "word " * 30_000}]
    r = _chat(fleet, QWEN, {}, messages=huge)
    assert (
        r.status_code == 400
        and r.json()["error"]["metadata"]["error_type"] == "context_length_exceeded"
    )
    assert _chat(fleet, GEMINI, {}, messages=huge).status_code == 200


def test_r2_image_input_only_on_a_vision_model(fleet: FleetHandle) -> None:
    """Image parts to a text-only model: 404 `No endpoints found that support image input`; a vision model serves them."""
    parts = [
        {"type": "text", "text": "Describe the scene in this picture."},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
    ]
    r = _chat(fleet, LLAMA, {}, messages=[{"role": "user", "content": parts}])
    assert (
        r.status_code == 404
        and r.json()["error"]["message"] == "No endpoints found that support image input"
    )
    r = _chat(fleet, GEMINI, {}, messages=[{"role": "user", "content": parts}])
    assert r.status_code == 200 and r.json()["usage"]["prompt_tokens"] >= 800


def test_usage_cost_follows_endpoint_pricing(fleet: FleetHandle) -> None:
    """Usage tokens add up and cost = prompt * price.prompt + completion * price.completion (string prices)."""
    r = _chat(fleet, LLAMA, {"only": ["deepinfra/fp8"]}).json()
    u = r["usage"]
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
    assert u["cost"] == pytest.approx(
        u["prompt_tokens"] * 0.00000023 + u["completion_tokens"] * 0.0000004
    )


def test_max_tokens_truncates_with_finish_length(fleet: FleetHandle) -> None:
    """A small `max_tokens` cuts the reply at that many tokens with finish_reason `length`."""
    r = _chat(fleet, LLAMA, {"only": ["deepinfra/fp8"]}, max_tokens=5).json()
    assert r["choices"][0]["finish_reason"] == "length" and r["usage"]["completion_tokens"] == 5


def test_stop_sequence_ends_the_reply(fleet: FleetHandle) -> None:
    """A `stop` string cuts the reply just before it, with finish_reason `stop`."""
    full = _chat(fleet, LLAMA, {"only": ["deepinfra/fp8"]}, seed=1).json()["choices"][0]["message"][
        "content"
    ]
    word = full.split()[3]
    fleet.load("seed-incidents", time_scale=0.1, seed=0)
    r = _chat(fleet, LLAMA, {"only": ["deepinfra/fp8"]}, stop=[word]).json()["choices"][0]
    assert r["finish_reason"] == "stop" and word not in r["message"]["content"]
    assert full.startswith(r["message"]["content"])
