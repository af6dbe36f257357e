"""The fleet as a plain OpenAI-compatible upstream (issue 32 items 5, 6): an endpoint that
sends the usage only when the request asks for it, and errors in the OpenAI-compatible
dialect (`{"error": {"message", "type", "param", "code"}}`), over real HTTP."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from tests.fixtures.fleet import FleetHandle
from tests.fixtures.routing import routing_scenario

PROMPT = [{"role": "user", "content": "Continue the scene: the lantern flickers."}]


def _usage_scenario() -> dict[str, Any]:
    """alpha-a sends the usage only when asked; alpha-b always (OpenRouter's way)."""
    scenario = routing_scenario()
    endpoints = scenario["models"][0]["endpoints"]
    endpoints[0]["usage"] = "when_asked"
    return scenario


def _pinned(tag: str) -> dict[str, Any]:
    return {"provider": {"only": [tag], "allow_fallbacks": False}}


@pytest.mark.parametrize(
    ("tag", "asked", "has_usage"),
    [
        ("alpha-a", False, False),
        ("alpha-a", True, True),
        ("alpha-b", False, True),
        ("alpha-b", True, True),
    ],
)
def test_issue32_fleet_endpoint_sends_stream_usage_only_when_asked_if_so_scripted(
    fleet: FleetHandle, tag: str, asked: bool, has_usage: bool
) -> None:
    """An endpoint with `usage: when_asked` ends its stream with the usage chunk only when the
    request set `stream_options.include_usage` (as OpenAI does); the default endpoint always
    does (as OpenRouter does)."""
    fleet.load(_usage_scenario())
    client = openai.OpenAI(base_url=fleet.base_url, api_key=fleet.key, max_retries=0)
    options: dict[str, Any] = {"stream_options": {"include_usage": True}} if asked else {}
    stream = client.chat.completions.create(
        model="acme/alpha", messages=PROMPT, stream=True, extra_body=_pinned(tag), **options
    )
    chunks = list(stream)
    usage = [c.usage for c in chunks if c.usage is not None]
    assert bool(usage) is has_usage, f"{tag} asked={asked}: usage chunks {usage}"
    if has_usage:
        assert usage[-1].completion_tokens > 0 and usage[-1].prompt_tokens > 0
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.strip(), "the reply itself came either way"


def test_issue32_fleet_serves_an_openai_style_error_body(fleet: FleetHandle) -> None:
    """The `openai_error` fault answers with the OpenAI-compatible body and status: the kind
    in `error.code`, no OpenRouter `metadata`; the OpenAI client reads its code."""
    fault = {
        "kind": "openai_error", "first_n": 1, "status": 400, "code": "context_length_exceeded",
        "message": "This model's maximum context length is 8192 tokens.", "param": "messages",
    }  # fmt: skip
    fleet.load(routing_scenario(faults={"alpha-a": [fault]}))
    client = openai.OpenAI(base_url=fleet.base_url, api_key=fleet.key, max_retries=0)
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(
            model="acme/alpha", messages=PROMPT, extra_body=_pinned("alpha-a")
        )
    assert err.value.code == "context_length_exceeded"
    assert json.loads(err.value.response.text) == {
        "error": {
            "message": "This model's maximum context length is 8192 tokens.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }
    again = client.chat.completions.create(
        model="acme/alpha", messages=PROMPT, extra_body=_pinned("alpha-a")
    )
    assert again.choices[0].message.content, "first_n: 1 -> the second request is served"
