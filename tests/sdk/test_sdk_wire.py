"""The fleet's wire and the canary's probe bodies checked against OpenRouter's official
Python SDK (PyPI `openrouter`, pinned exactly in the dev extra), the generated reference
of the wire format. Our own parsing stays ours: the SDK is used in tests only.

Class names in SDK 1.3.84 (they change between releases; hence the pin):

- endpoints listing: `openrouter.components.ListEndpointsResponse` (the `data` object of
  `GET /models/{author}/{slug}/endpoints`; `openrouter.operations.ListEndpointsResponse`
  wraps it as `{"data": ...}`), each row a `components.PublicEndpoint` with
  `components.ToolChoiceSupport` and `components.PercentileStats`;
- stream chunks: `components.ChatStreamChunk` (`ChatStreamChoice`, `ChatStreamDelta`,
  `ChatStreamToolCall`, `ChatUsage`, `ChatStreamChunkError` for the in-band error;
  `components.ChatStreamingResponse` is `{"data": ChatStreamChunk}`);
- non-streamed replies: `components.ChatResult` (`ChatChoice`, `ChatAssistantMessage`,
  `ChatToolCall`);
- error bodies: `openrouter.errors.<Name>ResponseErrorData` by status, as the SDK's
  `chat.send` maps them (400 BadRequest, 401 Unauthorized, 402 PaymentRequired, 403
  Forbidden, 404 NotFound, 408 RequestTimeout, 413 PayloadTooLarge, 422
  UnprocessableEntity, 429 TooManyRequests, 500 InternalServer, 502 BadGateway, 503
  ServiceUnavailable, 524 EdgeNetworkTimeout, 529 ProviderOverloaded; 504, left to
  `chat.send`'s 5XX default, is checked as `GatewayTimeoutResponseErrorData`);
- request bodies: `components.ChatRequest` with `components.ProviderPreferences`,
  `ChatMessages` (`ChatSystemMessage`, `ChatUserMessage`, `ChatAssistantMessage`,
  `ChatToolMessage`), `ResponseFormat` (`ChatFormatJSONSchemaConfig`), `ChatFunctionTool`
  and `ChatToolChoice` (`ChatNamedToolChoice`, or `auto` / `none` / `required`).

The SDK's models ignore unknown keys (pydantic's default). That is right for replies
(clients must ignore unknown fields; the fleet's chunks carry `provider` and
`native_finish_reason`, which the SDK does not model), but a request key the server does
not know is dropped there without a word, so request bodies are also walked key by key
(`unknown_keys`): every key must be a field of the SDK model at its place.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import openrouter
import pytest
from openrouter import components, errors, operations
from pydantic import BaseModel, ValidationError

from fleet.listing import endpoints_json
from fleet.scenario import builtin_names, load_scenario
from probes.client import ProbeClient
from probes.decode import parse_endpoints
from probes.probeset import body_options, probe_requests
from probes.prompts import LOCALES, prompt_for
from probes.types import Contract, Endpoint
from tests.fixtures.fleet import FleetHandle
from tests.fleet.signs import KINDS, LLAMA, body, fetch

ERROR_DATA: dict[int, type[BaseModel]] = {
    400: errors.BadRequestResponseErrorData,
    401: errors.UnauthorizedResponseErrorData,
    402: errors.PaymentRequiredResponseErrorData,
    403: errors.ForbiddenResponseErrorData,
    404: errors.NotFoundResponseErrorData,
    408: errors.RequestTimeoutResponseErrorData,
    413: errors.PayloadTooLargeResponseErrorData,
    422: errors.UnprocessableEntityResponseErrorData,
    429: errors.TooManyRequestsResponseErrorData,
    500: errors.InternalServerResponseErrorData,
    502: errors.BadGatewayResponseErrorData,
    503: errors.ServiceUnavailableResponseErrorData,
    504: errors.GatewayTimeoutResponseErrorData,
    524: errors.EdgeNetworkTimeoutResponseErrorData,
    529: errors.ProviderOverloadedResponseErrorData,
}


def test_the_pinned_sdk_is_the_one_these_names_come_from() -> None:
    """The class names above are 1.3.84's: a new release must be checked, then re-pinned."""
    assert openrouter.VERSION == "1.3.84"


def unknown_keys(model: Any, data: Any, path: str = "") -> list[str]:
    """Keys of `data` that are no field of the validated SDK `model` at their place
    (nested models and lists walked; free-form dicts such as JSON schemas are not)."""
    if isinstance(model, BaseModel) and isinstance(data, dict):
        cls = type(model)
        if cls.__name__.startswith("Unknown"):  # an open union's catch-all: not a known shape
            return [f"{path or 'body'} ({cls.__name__})"]
        fields = cls.model_fields
        known = {f.alias or name for name, f in fields.items()} | set(fields)
        out = [f"{path}{k}" for k in data if k not in known]
        for name, f in fields.items():
            key = f.alias or name
            if key in data:
                out += unknown_keys(getattr(model, name), data[key], f"{path}{key}.")
        return out
    if isinstance(model, list) and isinstance(data, list):
        return [
            problem
            for i, (m, d) in enumerate(zip(model, data, strict=False))
            for problem in unknown_keys(m, d, f"{path}{i}.")
        ]
    return []


def check_request(data: dict[str, Any]) -> list[str]:
    """What the SDK's `ChatRequest` says of a request body: [] when every key is known and
    every value fits (a ValidationError propagates)."""
    return unknown_keys(components.ChatRequest.model_validate(data), data)


# ---- the models listing -------------------------------------------------------------------


def test_the_served_models_listing_validates_and_a_missing_field_is_rejected(
    fleet: FleetHandle,
) -> None:
    """`GET /models` validates as the SDK's `ModelsListResponse` (one page: `links.next`
    null, `total_count`); a model without its `links` is rejected, naming it."""
    data = fleet.http.get(f"{fleet.base_url}/models").json()
    parsed = components.ModelsListResponse.model_validate(data)
    assert parsed.total_count == len(parsed.data) >= 1
    assert any(m.id == LLAMA for m in parsed.data)
    broken = json.loads(json.dumps(data))
    del broken["data"][0]["links"]
    with pytest.raises(ValidationError, match=r"data\.0\.links"):
        components.ModelsListResponse.model_validate(broken)


# ---- the endpoints listing ----------------------------------------------------------------


@pytest.mark.parametrize("name", builtin_names())
def test_every_fleet_listing_validates_against_list_endpoints_response(name: str) -> None:
    """Every model of every built-in scenario: its endpoints listing is a valid
    `ListEndpointsResponse` (latency in ms, the tool-choice flags, native tools, tier)."""
    for model in load_scenario(name).models:
        listing = endpoints_json(model)
        parsed = components.ListEndpointsResponse.model_validate(listing["data"])
        assert len(parsed.endpoints) == len(model.endpoints)
        for row, spec in zip(parsed.endpoints, model.endpoints, strict=True):
            assert row.latency_last_30m is not None and row.throughput_last_30m is not None
            assert row.latency_last_30m.p50 == pytest.approx(spec.timing.ttft_s * 1000)
            assert row.throughput_last_30m.p50 == pytest.approx(spec.timing.tokens_per_s)
            assert row.supports_tool_choice.auto == ("tools" in spec.supported_parameters)


def test_the_served_listing_validates_and_one_missing_field_is_rejected(
    fleet: FleetHandle,
) -> None:
    """The listing the fleet serves over HTTP validates (as the SDK's operation wraps it);
    a row without any one of today's five fields is rejected, naming it."""
    data = fleet.http.get(f"{fleet.base_url}/models/{LLAMA}/endpoints").json()
    operations.ListEndpointsResponse.model_validate(data)
    for field in (
        "supports_tool_choice",
        "native_tools",
        "service_tier",
        "supports_implicit_caching",
        "supports_diarization",
    ):
        broken = json.loads(json.dumps(data["data"]))
        del broken["endpoints"][0][field]
        with pytest.raises(ValidationError, match=f"endpoints.0.{field}"):
            components.ListEndpointsResponse.model_validate(broken)
    wrong = json.loads(json.dumps(data["data"]))
    wrong["endpoints"][0]["supports_tool_choice"] = {"auto": True}
    with pytest.raises(ValidationError, match=r"supports_tool_choice\.none"):
        components.ListEndpointsResponse.model_validate(wrong)


# ---- replies: stream chunks, bodies, errors -------------------------------------------------


def _replies(fleet: FleetHandle) -> Iterator[tuple[str, bool, list[dict[str, Any]]]]:
    """(what, streamed, payloads) for every kind of reply the fleet sends: each contracts-zoo
    host over every kind of tools request streamed and not, and the seed-incidents hosts
    (filtered, schema-broken, flaky with in-band errors, structured output)."""
    fleet.load("contracts-zoo", time_scale=0.01, seed=0)
    tags = [e["tag"] for e in fleet.scenario()["models"][0]["endpoints"]]
    for i, tag in enumerate(tags):
        for j, kind in enumerate(KINDS):
            stream = (i + j) % 2 == 0
            yield f"{tag} {kind}", stream, fetch(fleet, body(kind, tag, stream=stream)).payloads
    fleet.load("seed-incidents", time_scale=0.01, seed=0)
    rf = {"type": "json_schema", "json_schema": {"name": "probe", "strict": True,
          "schema": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
                     "additionalProperties": False}}}  # fmt: skip
    for tag in ("policywall/fp8", "schemabreak/fp8", "flaky/fp8", "toolparse/fp8", "groq/fp16"):
        for n in range(6):
            request = {**body("text", tag, stream=n % 2 == 0), "response_format": rf}
            if n >= 3:
                request = body("required", tag, stream=n % 2 == 0)
            try:
                reply = fetch(fleet, request)
            except httpx.TransportError:  # the flaky host's reset
                continue
            yield f"{tag} #{n}", bool(request["stream"]), reply.payloads
    fleet.load(_one_fault_scenario({"kind": "midstream_error", "rate": 1.0}), time_scale=0.01)
    yield "midstream error", True, fetch(fleet, body("text", "f0/fp8")).payloads


def _one_fault_scenario(*faults: dict[str, Any]) -> dict[str, Any]:
    """One endpoint per fault, each at rate 1 (tags f0/fp8, f1/fp8, ...)."""
    endpoints = [
        {"tag": f"f{i}/fp8", "provider_name": f"Fault{i}", "faults": [fault]}
        for i, fault in enumerate(faults)
    ]
    return {"name": "faults", "models": [{"id": LLAMA, "endpoints": endpoints}]}


def test_every_stream_chunk_and_body_validates_against_the_sdk(fleet: FleetHandle) -> None:
    """Every streamed chunk is a valid `ChatStreamChunk` (tool-call deltas, reasoning
    deltas, usage, in-band errors) and every non-streamed body a valid `ChatResult`."""
    seen = {"chunk": 0, "result": 0, "tool_delta": 0, "reasoning": 0, "error": 0, "usage": 0}
    for what, streamed, payloads in _replies(fleet):
        for payload in payloads:
            if streamed:
                chunk = components.ChatStreamChunk.model_validate(payload)
                seen["chunk"] += 1
                seen["error"] += chunk.error is not None
                seen["usage"] += chunk.usage is not None
                for choice in chunk.choices:
                    seen["tool_delta"] += bool(choice.delta.tool_calls)
                    seen["reasoning"] += bool(choice.delta.reasoning_details)
            else:
                result = components.ChatResult.model_validate(payload)
                assert result.choices, what
                seen["result"] += 1
    assert all(seen.values()), seen


def _error_bodies(fleet: FleetHandle) -> Iterator[tuple[int, Any]]:
    headers = {"Authorization": f"Bearer {fleet.key}"}
    url = f"{fleet.base_url}/chat/completions"
    r = fleet.http.post(url, json=body("text", "x"), headers={"Authorization": "Bearer nope"})
    yield r.status_code, r.json()
    r = fleet.http.post(url, content=b"{not json", headers=headers)
    yield r.status_code, r.json()
    r = fleet.http.post(url, json={**body("text", "x"), "model": "no/such-model"}, headers=headers)
    yield r.status_code, r.json()
    r = fleet.http.post(url, json=body("text", "nobody/fp8"), headers=headers)
    yield r.status_code, r.json()
    r = fleet.http.get(f"{fleet.base_url}/models/no/such-model/endpoints")
    yield r.status_code, r.json()
    fleet.load("seed-incidents", time_scale=0.01, seed=0)
    for _ in range(12):
        r = fleet.http.post(url, json=body("text", "policywall/fp8", stream=False), headers=headers)
        if r.status_code != 200:
            yield r.status_code, r.json()
    statuses = (408, 429, 500, 502, 503, 504)
    faults = [{"kind": "http_error", "status": s, "rate": 1.0} for s in statuses]
    fleet.load(_one_fault_scenario(*faults), time_scale=0.01)
    for i in range(len(statuses)):
        for stream in (False, True):
            r = fleet.http.post(url, json=body("text", f"f{i}/fp8", stream=stream), headers=headers)
            yield r.status_code, r.json()


def test_every_error_body_validates_against_the_sdks_error_model(fleet: FleetHandle) -> None:
    """401, 400, 404, 403 (moderation), 408, 429, 500, 502, 503 and 504 bodies of the fleet
    (streamed requests too: errors before the first token) are the SDK's error data of
    their status (`code`, `message`, `metadata`)."""
    statuses = set()
    for status, data in _error_bodies(fleet):
        parsed = ERROR_DATA[status].model_validate(data)
        assert parsed.error.code == status  # type: ignore[attr-defined]
        statuses.add(status)
    assert statuses >= {400, 401, 403, 404, 408, 429, 500, 502, 503, 504}


# ---- the canary's probe bodies -------------------------------------------------------------


def _endpoint(tag: str = "deepinfra/fp8") -> Endpoint:
    model = load_scenario("seed-incidents").models[0]
    return {e.tag: e for e in parse_endpoints(endpoints_json(model), model.id)}[tag]


BodyBuilder = Callable[[ProbeClient, Endpoint], Iterator[tuple[str, dict[str, Any]]]]


def probe_set_bodies(
    client: ProbeClient, endpoint: Endpoint
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every request of a probe set in every locale: language, refusal, the start samples,
    structured output (with `response_format`) and the tool requests (functions, every
    tool_choice, an assistant call and a tool result), as `run_probe_set` builds them."""
    for locale in LOCALES:
        for r in probe_requests(endpoint, locale, locale, client.config):
            yield (
                f"{r.contract} {locale}",
                client.request_body(endpoint, r.messages, **body_options(r, client.config)),
            )


def confirmation_bodies(
    client: ProbeClient, endpoint: Endpoint
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The language confirmations (C8), sent as language probes."""
    for locale in LOCALES:
        yield (
            f"confirm {locale}",
            client.request_body(endpoint, prompt_for(Contract.LANGUAGE, locale)),
        )


# A contract added to the canary appends the builder of its bodies here (tools: issue 22).
BODY_BUILDERS: list[BodyBuilder] = [probe_set_bodies, confirmation_bodies]


def canary_bodies() -> list[tuple[str, dict[str, Any]]]:
    client = ProbeClient("http://127.0.0.1:9/api/v1", "unused-key")
    endpoint = _endpoint()
    return [named for build in BODY_BUILDERS for named in build(client, endpoint)]


def test_every_probe_body_the_canary_sends_is_a_valid_chat_request() -> None:
    """Each probe body (every contract, every locale) validates as the SDK's `ChatRequest`
    with known keys only; the pin is `ProviderPreferences` (only, allow_fallbacks off, and
    require_parameters with response_format)."""
    bodies = canary_bodies()
    assert {name.split()[0] for name, _ in bodies} >= {"language", "refusal", "start", "structured", "tools", "confirm"}  # fmt: skip
    for name, data in bodies:
        assert check_request(data) == [], name
        request = components.ChatRequest.model_validate(data)
        assert isinstance(request.provider, components.ProviderPreferences)
        assert request.provider.only == [data["provider"]["only"][0]]
        assert request.provider.allow_fallbacks is False
        if "response_format" in data or "tools" in data:
            assert request.provider.require_parameters is True
        if "response_format" in data:
            assert isinstance(request.response_format, components.ChatFormatJSONSchemaConfig)


def test_tool_bodies_validate_as_chat_requests() -> None:
    """The fleet tests' tools requests (functions, every tool_choice, an assistant call and
    a tool result) are valid `ChatRequest`s: the shapes the tools probes will send."""
    for kind in KINDS:
        assert check_request(body(kind, "deepinfra/fp8")) == [], kind


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda b: b["provider"].update(onyl=b["provider"].pop("only")), "provider.onyl"),
        (lambda b: b.update(max_token=b.pop("max_tokens")), "max_token"),
        (lambda b: b["messages"][0].update(contnet="x"), "messages.0.contnet"),
        (lambda b: b["response_format"]["json_schema"].update(schemas={}), "response_format.json_schema.schemas"),
    ],
)  # fmt: skip
def test_a_misspelt_probe_key_is_caught(
    change: Callable[[dict[str, Any]], Any], problem: str
) -> None:
    """A probe body with a misspelt key (which the SDK's models alone would drop without a
    word) is reported by the key walk, naming the key."""
    data = json.loads(json.dumps(dict(canary_bodies())["structured en"]))
    change(data)
    assert problem in check_request(data)


@pytest.mark.parametrize(
    "payload",
    [
        {"id": "g", "object": "chat.completion", "created": 1, "model": "m", "choices": []},
        {"id": "g", "object": "chat.completion.chunk", "created": 1, "model": "m",
         "choices": [{"index": 0, "delta": {"tool_calls": [{"function": {"name": "f"}}]},
                      "finish_reason": None}]},
        {"id": "g", "object": "chat.completion.chunk", "created": 1, "choices": []},
    ],
)  # fmt: skip
def test_a_wrong_chunk_is_rejected(payload: dict[str, Any]) -> None:
    """A chunk with the wrong `object`, a tool-call delta without `index`, or no `model` is
    not a `ChatStreamChunk`."""
    with pytest.raises(ValidationError):
        components.ChatStreamChunk.model_validate(payload)


def test_an_error_body_without_code_is_rejected() -> None:
    """The envelope needs `code` and `message`."""
    with pytest.raises(ValidationError):
        errors.BadGatewayResponseErrorData.model_validate({"error": {"message": "x"}})
