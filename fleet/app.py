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
`choices`, then `data: [DONE]`. A mid-stream error chunk ends the stream
without `[DONE]`; a cut stream simply ends without `[DONE]`.

Routing: candidates come from `selection.candidates` (cheapest first unless
`order`/`sort`); with `allow_fallbacks` (default) a candidate that fails before
its first token is silently replaced by the next one, as on OpenRouter. Each
attempt's scripted TTFT counts from when it started (the first from the
request's arrival). The request log holds one entry per HTTP request (its
`attempts` list names every endpoint tried) and keeps the newest 10,000.
`Retry-After` values are sent as scripted (not scaled by `time_scale`).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
import zlib
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from fleet.behaviour import EndpointState, Plan, plan_request
from fleet.language import warm_up
from fleet.listing import endpoints_json, model_json
from fleet.request import ChatRequest, RequestError, count_images, parse_request, prompt_tokens
from fleet.responses import (
    RAW_SEND,
    SSEResponse,
    complete_reply,
    error_response,
    pre_error_response,
    stream_reply,
)
from fleet.scenario import ModelSpec, Scenario, ScenarioError, load_scenario, parse_scenario
from fleet.schema_check import SchemaProblem
from fleet.selection import NoCandidate, ProviderPrefs, candidates

_ARRIVAL = "fleet.arrival"
MAX_LOG_ENTRIES = 10_000


class FleetState:
    """The running scenario, per-endpoint RNGs/counters and the request log."""

    def __init__(self, scenario: Scenario, key: str) -> None:
        self.key = key
        self.log: list[dict[str, Any]] = []
        self.load(scenario)

    def load(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.seq = 0
        self.endpoints = {
            (m.id, e.tag): EndpointState(scenario.seed, m.id, e.tag)
            for m in scenario.models
            for e in m.endpoints
        }

    def describe(self) -> dict[str, Any]:
        data = self.scenario.model_dump(mode="json")
        scale = self.scenario.time_scale
        for model, spec in zip(data["models"], self.scenario.models, strict=True):
            for ep, e in zip(model["endpoints"], spec.endpoints, strict=True):
                slow = [f.ttft_s for f in e.faults if f.kind == "slow_first_token"]
                ep["scripted_ttft_s"] = round(e.timing.ttft_s * scale, 6)
                ep["scripted_slow_ttft_s"] = round(slow[0] * scale, 6) if slow else None
        return data


def create_app(scenario: Scenario | str | Path, *, key: str | SecretStr) -> ASGIApp:
    """The fleet as an ASGI app serving `scenario`, accepting bearer `key`."""
    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario)
    secret = key.get_secret_value() if isinstance(key, SecretStr) else key
    state = FleetState(scenario, secret)
    warm_up()

    def log(entry: dict[str, Any]) -> dict[str, Any]:
        state.log.append(entry)
        if len(state.log) > MAX_LOG_ENTRIES:  # a long demo must not grow without bound
            del state.log[: len(state.log) - MAX_LOG_ENTRIES]
        return entry

    async def list_models(request: Request) -> Response:
        return JSONResponse({"data": [model_json(m) for m in state.scenario.models]})

    async def list_endpoints(request: Request) -> Response:
        model_id = f"{request.path_params['author']}/{request.path_params['slug']}"
        m = state.scenario.model(model_id)
        if m is None:
            return error_response(404, "Resource not found", "not_found")
        return JSONResponse(endpoints_json(m))

    async def chat(request: Request) -> Response:
        # auth before the body is even read: an unauthenticated body is neither parsed nor logged
        auth = request.headers.get("authorization", "")
        token = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
        if not token or not hmac.compare_digest(token.encode(), state.key.encode()):
            log(_entry(None, 401, None))
            msg = "No auth credentials found" if not token else "User not found."
            return error_response(401, msg, "authentication")
        raw = await request.body()
        try:
            body: Any = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            body = raw.decode("utf-8", errors="replace")
            entry = log(_entry(body, 400, None))
            entry["error"] = "malformed JSON"
            return error_response(400, f"Invalid JSON body: {exc}", "invalid_request")
        try:
            req = parse_request(body)
        except RequestError as exc:
            log(_entry(body, 400, None))
            return error_response(400, str(exc), "invalid_request")
        m = state.scenario.model(req.model)
        if m is None:
            log(_entry(body, 400, None))
            return error_response(400, f"{req.model} is not a valid model ID", "invalid_request")
        arrival = request.scope.get(_ARRIVAL, asyncio.get_running_loop().time())
        return await _serve(req, body, m, arrival)

    async def _serve(
        req: ChatRequest, body: dict[str, Any], m: ModelSpec, started: float
    ) -> Response:
        """Try the candidates; each attempt's scripted delay counts from when it started
        (the first from the request's arrival, so parsing time is not added on top)."""
        loop = asyncio.get_running_loop()
        prefs = req.provider or ProviderPrefs()
        images = count_images(req)
        found = candidates(
            m, prefs, body, prompt_tokens(req, state.scenario.image_tokens), images > 0
        )
        if isinstance(found, NoCandidate):
            log(_entry(body, found.status, None))
            return error_response(found.status, found.message, found.error_type)
        tries = found if prefs.allow_fallbacks else found[:1]
        attempts: list[dict[str, Any]] = []
        plan: Plan | None = None
        for i, endpoint in enumerate(tries):
            try:
                plan = plan_request(
                    state.scenario, m, endpoint, state.endpoints[(m.id, endpoint.tag)], req
                )
            except SchemaProblem as exc:  # e.g. an instance too large to generate
                log(_entry(body, 400, None, req.stream, attempts))["error"] = str(exc)
                return error_response(400, f"invalid request: {exc}", "invalid_request")
            status = plan.pre_error.status if plan.pre_error else 200
            attempts.append(
                {
                    "tag": endpoint.tag,
                    "provider_name": plan.served_as,
                    "status": status,
                    "reset": bool(plan.pre_error and plan.pre_error.reset),
                    "fault": plan.fault,
                    "defect": plan.defect,
                }
            )
            if plan.pre_error is None or i == len(tries) - 1:
                break
            await asyncio.sleep(max(0.0, started + plan.delay_s - loop.time()))
            started = loop.time()
        assert plan is not None
        state.seq += 1
        gen_id = f"gen-{state.seq:06d}-{zlib.crc32(f'{m.id}|{plan.endpoint.tag}'.encode()):08x}"
        entry = log(_entry(body, attempts[-1]["status"], plan, req.stream, attempts))
        if plan.pre_error is not None:
            await asyncio.sleep(max(0.0, started + plan.delay_s - loop.time()))
            entry["outcome"] = "reset" if plan.pre_error.reset else "http_error"
            return pre_error_response(plan.pre_error)
        if req.stream:
            gen = stream_reply(plan, m, gen_id, state.scenario.time_scale, images, entry, started)
            return SSEResponse(gen, entry)
        return await complete_reply(plan, m, gen_id, images, entry, started)

    async def get_requests(request: Request) -> Response:
        if request.method == "DELETE":
            n = len(state.log)
            state.log.clear()
            return JSONResponse({"cleared": n})
        return JSONResponse(state.log)

    async def scenario_control(request: Request) -> Response:
        if request.method == "GET":
            return JSONResponse(state.describe())
        try:
            data = json.loads(await request.body())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return error_response(422, f"Invalid JSON body: {exc}", "unprocessable")
        if not isinstance(data, dict) or ("name" in data) == ("scenario" in data):
            return error_response(
                422,
                'give exactly one of "name" (a built-in scenario or a path) or "scenario" (a full scenario object)',
                "unprocessable",
            )
        if "name" in data and not isinstance(data["name"], str):
            return error_response(
                422,
                f'"name" must be a string (a built-in scenario or a path), got {type(data["name"]).__name__}',
                "unprocessable",
            )
        try:
            new = (
                load_scenario(data["name"])
                if "name" in data
                else parse_scenario(data["scenario"], "scenario")
            )
            overrides = {k: data[k] for k in ("time_scale", "seed") if data.get(k) is not None}
            if overrides:
                new = parse_scenario({**new.model_dump(mode="json"), **overrides}, "scenario")
        except ScenarioError as exc:
            return error_response(422, str(exc), "unprocessable")
        state.load(new)
        return JSONResponse(state.describe())

    async def root(request: Request) -> Response:
        return JSONResponse(
            {
                "fleet": state.scenario.name,
                "base_url": str(request.base_url) + "api/v1",
                "models": [m.id for m in state.scenario.models],
            }
        )

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return error_response(
            exc.status_code,
            exc.detail or "error",
            "not_found" if exc.status_code == 404 else "invalid_request",
        )

    app = Starlette(
        routes=[
            Route("/", root),
            Route("/api/v1/models", list_models),
            Route("/api/v1/models/{author}/{slug}/endpoints", list_endpoints),
            Route("/api/v1/chat/completions", chat, methods=["POST"]),
            Route("/_fleet/requests", get_requests, methods=["GET", "DELETE"]),
            Route("/_fleet/scenario", scenario_control, methods=["GET", "POST"]),
        ],
        exception_handlers={HTTPException: http_error},
    )

    async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope[RAW_SEND] = send
            scope[_ARRIVAL] = asyncio.get_running_loop().time()
            # let every request that arrived in this loop iteration stamp its arrival
            # before any of them is processed, so a burst does not delay later ones
            await asyncio.sleep(0)
            if scope["path"] == "/api/v1/chat/completions" and scope["method"] == "POST":
                # the hot path skips routing and middleware (a few hundred us per message)
                response = await chat(Request(scope, receive))
                await response(scope, receive, send)
                return
        await app(scope, receive, send)

    asgi.state = state  # type: ignore[attr-defined]
    return asgi


def _entry(
    body: Any,
    status: int,
    plan: Plan | None,
    stream: bool = False,
    attempts: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "ts": time.time(),
        "model": body.get("model") if isinstance(body, dict) else None,
        "tag": plan.endpoint.tag if plan else None,
        "provider_name": plan.served_as if plan else None,
        "status": status,
        "stream": stream,
        "locale": plan.locale if plan else None,
        "scripted_ttft_s": round(plan.delay_s, 6) if plan else None,
        "fault": plan.fault if plan else None,
        "defect": plan.defect if plan else None,
        "attempts": attempts or [],
        "outcome": None,
        "body": body,
    }
