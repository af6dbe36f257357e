"""The fleet's ASGI app: OpenRouter's `/api/v1` surface plus `/_fleet` controls.

    GET    /api/v1/models
    GET    /api/v1/models/{author}/{slug}/endpoints
    POST   /api/v1/chat/completions          (Bearer auth; stream or not)
    GET    /_fleet/scenario                  active scenario (+ scaled scripted TTFT)
    POST   /_fleet/scenario                  {"name": ...} | {"scenario": {...}}, opt. time_scale, seed
    GET    /_fleet/requests                  request log, newest last
    DELETE /_fleet/requests                  clear it

Streams: `: OPENROUTER PROCESSING` first and every ~1 s (scaled) while
waiting for the first token, one chunk per word, the usage chunk with empty
`choices` (on an endpoint with `usage: when_asked` only when the request set
`stream_options.include_usage`, as OpenAI does), then `data: [DONE]`. A mid-stream error chunk ends the stream
without `[DONE]`; a cut stream simply ends without `[DONE]`.

Routing: candidates come from `selection.candidates` (cheapest first unless
`order`/`sort`; a model with `load_balance: price` draws the first by price, as OpenRouter's
default load balancing does); with `allow_fallbacks` (default) a candidate that fails before
its first token is silently replaced by the next one, as on OpenRouter. Each
attempt's scripted TTFT counts from when it started (the first from the
request's arrival). The request log holds one entry per HTTP request (its
`attempts` list names every endpoint tried) and keeps the newest 10,000.
`Retry-After` values are sent as scripted (not scaled by `time_scale`).

The endpoints are module-level Starlette endpoints; what the fleet remembers lives on
`app.state.fleet` (`fleet.state.FleetState`). The key is checked by `wire.auth` (as the
gateway checks its keys); a body that cannot be served is answered, and for the chat
endpoint logged, by the class of its error through one table per endpoint
(`CHAT_BODY_ERRORS`: 400, `SCENARIO_BODY_ERRORS`: 422).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from fleet.behaviour import Plan, plan_request
from fleet.language import warm_up
from fleet.listing import endpoints_json, models_json
from fleet.request import ChatRequest, RequestError, count_images, parse_request, prompt_tokens
from fleet.responses import (
    RAW_SEND,
    SSEResponse,
    complete_reply,
    error_response,
    pre_error_response,
    stream_reply,
)
from fleet.scenario import (
    EndpointSpec,
    ModelSpec,
    Scenario,
    ScenarioError,
    load_scenario,
    parse_scenario,
)
from fleet.schema_check import SchemaProblem
from fleet.selection import NoCandidate, ProviderPrefs, balanced, candidates
from fleet.state import FleetState, log_entry
from wire.auth import bearer_token, key_matches

_ARRIVAL = "fleet.arrival"
_CHAT_PATH = "/api/v1/chat/completions"


# ---- request bodies that cannot be served ---------------------------------------------


@dataclass(frozen=True)
class BodyError:
    """How a request body's error is answered: `status`, OpenRouter's `error_type`, the
    message (`{exc}` is the error's text) and, for the chat log, the entry's `error`
    (None: the entry has none) and whether it shows the body as text (it was not JSON)."""

    status: int
    error_type: str
    message: str = "{exc}"
    logged_error: str | None = None
    logs_text: bool = False

    def respond(self, exc: Exception) -> JSONResponse:
        return error_response(self.status, self.message.format(exc=exc), self.error_type)


_NOT_JSON = BodyError(400, "invalid_request", "Invalid JSON body: {exc}", "malformed JSON", True)
CHAT_BODY_ERRORS: dict[type[Exception], BodyError] = {
    json.JSONDecodeError: _NOT_JSON,
    UnicodeDecodeError: _NOT_JSON,
    RequestError: BodyError(400, "invalid_request"),  # not a chat request, or an unknown model
    SchemaProblem: BodyError(400, "invalid_request", "invalid request: {exc}", "{exc}"),
}
"""`POST /api/v1/chat/completions`: every refused body is logged (as OpenRouter's 400s)."""

_SCENARIO_NOT_JSON = BodyError(422, "unprocessable", "Invalid JSON body: {exc}")
SCENARIO_BODY_ERRORS: dict[type[Exception], BodyError] = {
    json.JSONDecodeError: _SCENARIO_NOT_JSON,
    UnicodeDecodeError: _SCENARIO_NOT_JSON,
    ScenarioError: BodyError(422, "unprocessable"),
}
"""`POST /_fleet/scenario`: a control request, answered 422 and never logged."""
_CHAT_REFUSED = tuple(CHAT_BODY_ERRORS)
_SCENARIO_REFUSED = tuple(SCENARIO_BODY_ERRORS)


def body_error(table: dict[type[Exception], BodyError], exc: Exception) -> BodyError:
    """The rule for `exc`: its class's, else its nearest base class's in `table`."""
    for cls in type(exc).__mro__:
        if cls in table:
            return table[cls]
    raise LookupError(f"no body-error rule for {type(exc).__name__}")


def _refuse_chat(
    fleet: FleetState,
    exc: Exception,
    body: Any,
    raw: bytes = b"",
    *,
    stream: bool = False,
    attempts: list[dict[str, Any]] | None = None,
) -> Response:
    """Log a chat body that cannot be served and answer it by `CHAT_BODY_ERRORS`."""
    rule = body_error(CHAT_BODY_ERRORS, exc)
    logged = raw.decode("utf-8", errors="replace") if rule.logs_text else body
    entry = fleet.record(log_entry(logged, rule.status, None, stream, attempts))
    if rule.logged_error is not None:
        entry["error"] = rule.logged_error.format(exc=exc)
    return rule.respond(exc)


# ---- the OpenRouter surface -----------------------------------------------------------


async def root(request: Request) -> Response:
    fleet: FleetState = request.app.state.fleet
    return JSONResponse(
        {
            "fleet": fleet.scenario.name,
            "base_url": str(request.base_url) + "api/v1",
            "models": [m.id for m in fleet.scenario.models],
        }
    )


async def list_models(request: Request) -> Response:
    fleet: FleetState = request.app.state.fleet
    return JSONResponse(models_json(list(fleet.scenario.models)))


async def list_endpoints(request: Request) -> Response:
    fleet: FleetState = request.app.state.fleet
    m = fleet.scenario.model(f"{request.path_params['author']}/{request.path_params['slug']}")
    if m is None:
        return error_response(404, "Resource not found", "not_found")
    return JSONResponse(endpoints_json(m))


async def chat(request: Request) -> Response:
    """`POST /api/v1/chat/completions`: the key first (an unauthenticated body is neither
    parsed nor logged), then the body, then the candidates."""
    fleet: FleetState = request.app.state.fleet
    token = bearer_token(request.headers.get("authorization"))
    if not key_matches(token, [fleet.key]):
        fleet.record(log_entry(None, 401, None))
        msg = "No auth credentials found" if token is None else "User not found."
        return error_response(401, msg, "authentication")
    raw = await request.body()
    body: Any = None
    try:
        body = json.loads(raw)
        req = parse_request(body)
        m = fleet.scenario.model(req.model)
        if m is None:
            raise RequestError(f"{req.model} is not a valid model ID")
    except _CHAT_REFUSED as exc:
        return _refuse_chat(fleet, exc, body, raw)
    arrival = request.scope.get(_ARRIVAL, asyncio.get_running_loop().time())
    return await _serve(fleet, req, body, m, arrival)


async def _serve(
    fleet: FleetState, req: ChatRequest, body: dict[str, Any], m: ModelSpec, started: float
) -> Response:
    """Try the candidates; each attempt's scripted delay counts from when it started
    (the first from the request's arrival, so parsing time is not added on top)."""
    prefs = req.provider or ProviderPrefs()
    images = count_images(req)
    found = candidates(m, prefs, body, prompt_tokens(req, fleet.scenario.image_tokens), images > 0)
    if isinstance(found, NoCandidate):
        fleet.record(log_entry(body, found.status, None))
        return error_response(found.status, found.message, found.error_type)
    if m.load_balance == "price" and not prefs.order and prefs.sort is None:
        found = balanced(found, fleet.balance_rng)
    attempts: list[dict[str, Any]] = []
    try:
        plan, started = await _attempt(
            fleet, req, m, found if prefs.allow_fallbacks else found[:1], started, attempts
        )
    except SchemaProblem as exc:  # e.g. an instance too large to generate
        return _refuse_chat(fleet, exc, body, stream=req.stream, attempts=attempts)
    gen_id = fleet.next_generation_id(m.id, plan.endpoint.tag)
    entry = fleet.record(log_entry(body, attempts[-1]["status"], plan, req.stream, attempts))
    if plan.prefill is not None:  # what a continuation was planned to send (tests compare it)
        entry["continuation"] = plan.content
    if plan.pre_error is not None:
        await _wait_until(started + plan.delay_s)
        entry["outcome"] = "reset" if plan.pre_error.reset else "http_error"
        return pre_error_response(plan.pre_error)
    if req.stream:
        gen = stream_reply(plan, m, gen_id, fleet.scenario.time_scale, images, entry, started)
        return SSEResponse(gen, entry)
    return await complete_reply(plan, m, gen_id, images, entry, started)


async def _attempt(
    fleet: FleetState,
    req: ChatRequest,
    m: ModelSpec,
    tries: list[EndpointSpec],
    started: float,
    attempts: list[dict[str, Any]],
) -> tuple[Plan, float]:
    """Plan the candidates in turn, appending each to `attempts`, until one does not fail
    before its first token or none is left: that plan, and when its attempt started (a
    failed attempt's scripted delay passes before the next one starts)."""
    plan: Plan | None = None
    for i, endpoint in enumerate(tries):
        plan = plan_request(fleet.scenario, m, endpoint, fleet.endpoints[(m.id, endpoint.tag)], req)
        attempts.append(
            {
                "tag": endpoint.tag,
                "provider_name": plan.served_as,
                "status": plan.pre_error.status if plan.pre_error else 200,
                "reset": bool(plan.pre_error and plan.pre_error.reset),
                "fault": plan.fault,
                "defect": plan.defect,
            }
        )
        if plan.pre_error is None or i == len(tries) - 1:
            break
        await _wait_until(started + plan.delay_s)
        started = asyncio.get_running_loop().time()
    assert plan is not None  # `candidates` never returns an empty list
    return plan, started


async def _wait_until(when: float) -> None:
    loop = asyncio.get_running_loop()
    await asyncio.sleep(max(0.0, when - loop.time()))


# ---- the /_fleet controls -------------------------------------------------------------


async def requests_log(request: Request) -> Response:
    """`GET` the request log, newest last; `DELETE` clears it."""
    fleet: FleetState = request.app.state.fleet
    if request.method == "DELETE":
        n = len(fleet.log)
        fleet.log.clear()
        return JSONResponse({"cleared": n})
    return JSONResponse(fleet.log)


async def scenario_control(request: Request) -> Response:
    """`GET` the active scenario; `POST` loads another (`SCENARIO_BODY_ERRORS` when not)."""
    fleet: FleetState = request.app.state.fleet
    if request.method == "GET":
        return JSONResponse(fleet.describe())
    try:
        new = _requested_scenario(json.loads(await request.body()))
    except _SCENARIO_REFUSED as exc:
        return body_error(SCENARIO_BODY_ERRORS, exc).respond(exc)
    fleet.load(new)
    return JSONResponse(fleet.describe())


def _requested_scenario(data: Any) -> Scenario:
    """The scenario a `POST /_fleet/scenario` body names or holds, with its overrides."""
    if not isinstance(data, dict) or ("name" in data) == ("scenario" in data):
        raise ScenarioError(
            'give exactly one of "name" (a built-in scenario or a path) or "scenario" (a full scenario object)'
        )
    if "name" in data and not isinstance(data["name"], str):
        raise ScenarioError(
            f'"name" must be a string (a built-in scenario or a path), got {type(data["name"]).__name__}'
        )
    new = (
        load_scenario(data["name"])
        if "name" in data
        else parse_scenario(data["scenario"], "scenario")
    )
    overrides = {k: data[k] for k in ("time_scale", "seed") if data.get(k) is not None}
    if overrides:
        new = parse_scenario({**new.model_dump(mode="json"), **overrides}, "scenario")
    return new


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own 404 / 405 in OpenRouter's envelope."""
    assert isinstance(exc, HTTPException)
    return error_response(
        exc.status_code,
        exc.detail or "error",
        "not_found" if exc.status_code == 404 else "invalid_request",
    )


ROUTES = [
    Route("/", root),
    Route("/api/v1/models", list_models),
    Route("/api/v1/models/{author}/{slug}/endpoints", list_endpoints),
    Route(_CHAT_PATH, chat, methods=["POST"]),
    Route("/_fleet/requests", requests_log, methods=["GET", "DELETE"]),
    Route("/_fleet/scenario", scenario_control, methods=["GET", "POST"]),
]


# ---- the app --------------------------------------------------------------------------


class FleetApp:
    """The Starlette app behind a thin front that stamps each request's arrival (the
    scripted TTFT counts from it) and sends the chat hot path straight to its endpoint:
    routing and middleware cost a few hundred microseconds per message."""

    def __init__(self, app: Starlette) -> None:
        self.app = app
        self.state: FleetState = app.state.fleet

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope[RAW_SEND] = send
            scope[_ARRIVAL] = asyncio.get_running_loop().time()
            # let every request that arrived in this loop iteration stamp its arrival
            # before any of them is processed, so a burst does not delay later ones
            await asyncio.sleep(0)
            if scope["path"] == _CHAT_PATH and scope["method"] == "POST":
                scope["app"] = self.app
                response = await chat(Request(scope, receive))
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def create_app(scenario: Scenario | str | Path, *, key: str | SecretStr) -> ASGIApp:
    """The fleet as an ASGI app serving `scenario`, accepting bearer `key`."""
    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario)
    secret = key.get_secret_value() if isinstance(key, SecretStr) else key
    warm_up()
    app = Starlette(routes=ROUTES, exception_handlers={HTTPException: http_error})
    app.state.fleet = FleetState(scenario, secret)
    return FleetApp(app)
