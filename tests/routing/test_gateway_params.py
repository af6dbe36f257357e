"""A client's chat parameters are checked at the gateway's door (issue 31, item 8): a value
of the wrong type or out of OpenAI's documented range is a 400 naming the field, in the
gateway's OpenAI error shape, before any upstream request; over real HTTP, the `openai`
SDK -> gateway -> fleet. The table itself (`routing.params.RULES`) is checked against
OpenAI's own type definitions (the `openai` package's `CompletionCreateParams`)."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.chat import completion_create_params as oa
from pydantic import TypeAdapter, ValidationError

from ground.settings import GatewayConfig
from routing.gateway import create_app
from routing.params import RULES, parameter_problem
from tests.fixtures.fleet import FleetHandle
from tests.fixtures.routing import ServedApp, make_router, routing_scenario

KEY = "gw-params-key"
HI = [{"role": "user", "content": "Continue the scene: the lantern flickers."}]

# (the `param` the 400 names, what the client sends on top of a good body): each a value
# the openai SDK lets through (`extra_body`) that today went upstream or was misread
BAD: list[tuple[str, dict[str, Any]]] = [
    ("stream", {"stream": "true"}),
    ("stream", {"stream": 1}),
    ("stream_options", {"stream_options": "usage"}),
    ("stream_options.include_usage", {"stream_options": {"include_usage": "yes"}}),
    ("max_tokens", {"max_tokens": -1}),
    ("max_tokens", {"max_tokens": 0}),
    ("max_tokens", {"max_tokens": True}),
    ("max_tokens", {"max_tokens": 64.5}),
    ("max_completion_tokens", {"max_completion_tokens": 0}),
    ("max_completion_tokens", {"max_completion_tokens": "100"}),
    ("n", {"n": 2}),
    ("n", {"n": True}),
    ("temperature", {"temperature": 2.5}),
    ("temperature", {"temperature": -0.1}),
    ("temperature", {"temperature": "hot"}),
    ("temperature", {"temperature": False}),
    ("top_p", {"top_p": 1.01}),
    ("presence_penalty", {"presence_penalty": 3}),
    ("frequency_penalty", {"frequency_penalty": -2.5}),
    ("seed", {"seed": 1.5}),
    ("seed", {"seed": "7"}),
    ("stop", {"stop": ["a", "b", "c", "d", "e"]}),
    ("stop", {"stop": 5}),
    ("stop[1]", {"stop": ["END", 1]}),
    ("logit_bias", {"logit_bias": [1, 2]}),
    ("logit_bias[50256]", {"logit_bias": {"50256": 101}}),
    ("logit_bias[50256]", {"logit_bias": {"50256": 1.5}}),
    ("logit_bias", {"logit_bias": {"the": 1}}),
    ("logprobs", {"logprobs": "yes"}),
    ("top_logprobs", {"top_logprobs": 21}),
    ("response_format", {"response_format": "json"}),
    ("response_format.type", {"response_format": {"type": "xml"}}),
    ("response_format.json_schema", {"response_format": {"type": "json_schema"}}),
    (
        "response_format.json_schema.name",
        {"response_format": {"type": "json_schema", "json_schema": {"schema": {}}}},
    ),
    ("parallel_tool_calls", {"parallel_tool_calls": "true"}),
    ("store", {"store": 1}),
    ("user", {"user": 42}),
    ("metadata.k", {"metadata": {"k": 1}}),
    ("messages", {"messages": None}),
    ("messages", {"messages": []}),
    ("messages", {"messages": "hello"}),
    ("messages[0]", {"messages": ["hello"]}),
    ("messages[0].role", {"messages": [{"role": "wizard", "content": "hi"}]}),
    ("messages[1].role", {"messages": [*HI, {"content": "no role"}]}),
    ("messages[0].role", {"messages": [{"role": ["user"], "content": "hi"}]}),
    ("messages[0].content", {"messages": [{"role": "user", "content": 5}]}),
    ("messages[0].content[0]", {"messages": [{"role": "user", "content": ["hi"]}]}),
]


def _app(fleet: FleetHandle) -> Any:
    fleet.load(routing_scenario())
    return create_app(make_router(fleet.base_url, fleet.key), GatewayConfig(keys=[KEY]))


async def _refusal(client: openai.AsyncOpenAI, patch: dict[str, Any]) -> dict[str, Any]:
    """The gateway's error for a good body with `patch` on top (the SDK must raise
    `BadRequestError`)."""
    with pytest.raises(openai.BadRequestError) as raised:
        await client.chat.completions.create(model="chat", messages=HI, extra_body=patch)
    error: dict[str, Any] = raised.value.response.json()["error"]
    return error


async def test_issue31_bad_parameter_is_a_400_naming_it_before_any_upstream_request(
    fleet: FleetHandle,
) -> None:
    """Each wrong type or out-of-range value of `BAD`: the SDK raises `BadRequestError`, the
    400 is the gateway's OpenAI error shape with `param` the field and a message that starts
    with it, and the fleet saw no request for it (no attempt made)."""
    wrong: list[str] = []
    async with ServedApp(_app(fleet)) as s:
        client = openai.AsyncOpenAI(base_url=f"{s.url}/v1", api_key=KEY, max_retries=0)
        for param, patch in BAD:
            try:
                err = await _refusal(client, patch)
            except (pytest.fail.Exception, openai.APIStatusError) as exc:
                wrong.append(f"{patch}: no 400 (BadRequestError): {str(exc)[:160]}")
                continue
            shape = (err["param"], err["type"], err["reason"], err["attempts"])
            if shape != (param, "permanent_request", "invalid_parameter", 0):
                wrong.append(
                    f"{patch}: (param, type, reason, attempts) {shape}, param not {param!r}"
                )
            elif not err["message"].startswith(param + " "):
                wrong.append(f"{patch}: message {err['message']!r} does not open with {param!r}")
            if sent := fleet.requests():
                wrong.append(f"{patch}: went upstream ({len(sent)} requests)")
                fleet.clear_requests()
        await client.close()
    assert not wrong, (
        f"{len(wrong)} of {len(BAD)} bad parameters not refused at the door:\n" + "\n".join(wrong)
    )


async def test_issue31_stream_must_be_a_boolean_and_documented_values_pass(
    fleet: FleetHandle,
) -> None:
    """`stream: "true"` is refused, not answered as a non-streaming reply; the same body with
    `stream: true` and every checked parameter at a documented edge streams through the
    SDK's helper, the parameters forwarded as sent (an unknown field too, as before)."""
    edges: dict[str, Any] = {
        "max_tokens": 2000, "max_completion_tokens": 2000, "n": 1, "temperature": 2,
        "top_p": 0.0, "presence_penalty": -2, "frequency_penalty": 2.0, "seed": -7,
        "stop": ["\u241e", "<<END>>", "\u2403", "\u2404"], "logit_bias": {"50256": -100},
        "logprobs": False, "top_logprobs": 0, "response_format": {"type": "text"},
        "parallel_tool_calls": False, "store": False, "user": "mara",
        "metadata": {"scene": "lantern"}, "stream_options": {"include_usage": True},
        "frobnicate": {"kept": 1},
    }  # fmt: skip
    async with ServedApp(_app(fleet)) as s:
        client = openai.AsyncOpenAI(base_url=f"{s.url}/v1", api_key=KEY, max_retries=0)
        assert (await _refusal(client, {"stream": "true"}))["param"] == "stream"
        assert fleet.requests() == [], "stream: 'true' went upstream"
        async with client.chat.completions.stream(
            model="chat",
            messages=HI,
            extra_body=edges,
        ) as stream:
            final = await stream.get_final_completion()
        await client.close()
    assert final.choices[0].message.content, "the documented edges were not answered"
    (sent,) = [r["body"] for r in fleet.requests()]
    forwarded = {k: v for k, v in edges.items() if k not in ("n", "stream_options")}
    assert {k: sent.get(k) for k in forwarded} == forwarded, sent


# ---- the table against OpenAI's own type definitions ---------------------------------------

OPENAI_TYPES = (
    TypeAdapter(oa.CompletionCreateParamsNonStreaming),
    TypeAdapter(oa.CompletionCreateParamsStreaming),
)
BASE = {"model": "chat", "messages": HI}
json_values = st.recursive(
    st.booleans() | st.integers(-300, 300) | st.floats(-300, 300) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)  # fmt: skip


def _openai_accepts(field: str, value: Any) -> bool:
    """Whether OpenAI's request types (strictly: a boolean is no integer) take `value`."""
    for adapter in OPENAI_TYPES:
        try:
            adapter.validate_python({**BASE, field: value}, strict=True)
        except ValidationError:
            continue
        return True
    return False


def test_issue31_every_rule_has_a_bad_case_sent_over_http() -> None:
    """The HTTP cases cover the whole table: a field added to `RULES` needs its case."""
    covered = {next(iter(patch)) for _, patch in BAD}
    assert set(RULES) <= covered, f"no HTTP case for {sorted(set(RULES) - covered)}"


@settings(max_examples=200, deadline=None)
@given(field=st.sampled_from(sorted(set(RULES) - {"messages"})), value=json_values)
def test_issue31_what_openai_types_refuse_the_gateway_refuses_naming_the_field(
    field: str, value: Any
) -> None:
    """Property over the table: any non-null value OpenAI's own request types refuse for a
    checked field is refused at the door, with the field named (`messages` is an iterable
    there, which pydantic does not check eagerly: its cases are the HTTP ones)."""
    problem = parameter_problem({**BASE, field: value})
    if not _openai_accepts(field, value):
        assert problem is not None, f"{field}={value!r} is refused by OpenAI's types, let in here"
    if problem is not None:
        assert problem[0].startswith(field) and problem[1].startswith(problem[0]), problem
