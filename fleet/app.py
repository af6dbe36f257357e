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
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import math
import socket
import struct
import time
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from fleet import wire
from fleet.behaviour import EndpointState, Plan, PreError, plan_request
from fleet.language import warm_up
from fleet.request import ChatRequest, RequestError, count_images, parse_request, prompt_tokens
from fleet.scenario import ModelSpec, Scenario, ScenarioError, load_scenario, parse_scenario
from fleet.selection import NoCandidate, ProviderPrefs, candidates

MIN_WRITE_INTERVAL_S = 0.025
_RAW_SEND = "fleet.raw_send"
_ARRIVAL = "fleet.arrival"


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


def _error(
    status: int,
    message: str,
    error_type: str | None = None,
    headers: dict[str, str] | None = None,
    **meta: Any,
) -> JSONResponse:
    return JSONResponse(
        wire.envelope(status, message, error_type, **meta), status_code=status, headers=headers
    )


class ResetResponse(Response):
    """Close the TCP connection with a RST before any response byte."""

    def __init__(self) -> None:
        super().__init__(status_code=502)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get(_RAW_SEND)
        cycle = getattr(raw, "__self__", None)
        transport = getattr(cycle, "transport", None)
        if cycle is None or transport is None:  # not under uvicorn: degrade to a 502
            await _error(502, "connection reset", "provider_unavailable")(scope, receive, send)
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()
        cycle.disconnected = True


def _base(plan: Plan, model: ModelSpec, gen_id: str) -> dict[str, Any]:
    return {
        "id": gen_id,
        "created": int(time.time()),
        "model": model.id,
        "provider": plan.served_as,
    }


def _tool_deltas(plan: Plan) -> list[dict[str, Any]]:
    assert plan.tool_calls
    call = plan.tool_calls[0]
    args = call["function"]["arguments"]
    first = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "index": 0,
                "id": call["id"],
                "type": "function",
                "function": {"name": call["function"]["name"], "arguments": ""},
            }
        ],
    }
    pieces = [args[i : i + 16] for i in range(0, len(args), 16)] or [""]
    return [first] + [{"tool_calls": [{"index": 0, "function": {"arguments": p}}]} for p in pieces]


async def _stream(
    plan: Plan,
    model: ModelSpec,
    gen_id: str,
    scale: float,
    images: int,
    entry: dict[str, Any],
    started: float,
) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    base = _base(plan, model, gen_id)
    yield wire.KEEPALIVE
    keepalive_s = max(0.01, 1.0 * scale)
    deadline = started + plan.delay_s
    while (left := deadline - loop.time()) > 0:
        await asyncio.sleep(min(left, keepalive_s))
        if deadline - loop.time() > 0:
            yield wire.KEEPALIVE
    if plan.tool_calls:
        deltas = _tool_deltas(plan)
    elif plan.chunks:
        deltas = [{"content": c} for c in plan.chunks]
        deltas[0] = {"role": "assistant", **deltas[0]}
    else:
        deltas = [{"role": "assistant", "content": ""}]
    stop_at = plan.tail_at if plan.tail != "done" else len(deltas)
    encoder = wire.ChunkEncoder(base)
    start = loop.time()
    i = 0
    while i < stop_at:
        now = loop.time()
        batch = bytearray()
        while i < stop_at and start + i * plan.gap_s <= now + 1e-6:
            last = i == len(deltas) - 1
            delta = deltas[i]
            if not last and len(delta) == 1 and "content" in delta:
                batch += encoder.content(delta["content"])
            else:
                batch += wire.sse(wire.chunk(base, delta, plan.finish_reason if last else None))
            i += 1
        if batch:
            yield bytes(batch)
        if i < stop_at:
            # wake for the next token, but at most every MIN_WRITE_INTERVAL_S (tokens due
            # meanwhile go out together), and never later than the last token is due
            now = loop.time()
            wake = min(
                max(start + i * plan.gap_s, now + MIN_WRITE_INTERVAL_S),
                start + (stop_at - 1) * plan.gap_s,
            )
            await asyncio.sleep(max(0.0, wake - now))
    if plan.tail == "cut":
        entry["outcome"] = "cut"
        return
    if plan.tail == "midstream_error":
        entry["outcome"] = "midstream_error"
        err = wire.chunk(base, {"content": ""}, "error", error=plan.midstream_error)
        yield wire.sse(err)
        return
    yield wire.sse(
        {
            **base,
            "object": "chat.completion.chunk",
            "choices": [],
            "usage": wire.usage(plan.prompt_tokens, plan.completion_tokens, plan.cost(images)),
        }
    )
    yield wire.DONE
    entry["outcome"] = "done"


async def _complete(
    plan: Plan, model: ModelSpec, gen_id: str, images: int, entry: dict[str, Any], started: float
) -> Response:
    loop = asyncio.get_running_loop()
    finish = started + plan.delay_s + len(plan.chunks) * plan.gap_s
    await asyncio.sleep(max(0.0, finish - loop.time()))
    if plan.tail == "cut":
        entry["outcome"] = "cut"
        return ResetResponse()
    message: dict[str, Any] = {
        "role": "assistant",
        "content": None if plan.tool_calls else plan.content,
        "refusal": None,
    }
    if plan.tool_calls:
        message["tool_calls"] = plan.tool_calls
    choice: dict[str, Any] = {
        "index": 0,
        "logprobs": None,
        "finish_reason": plan.finish_reason,
        "native_finish_reason": plan.finish_reason,
        "message": message,
    }
    if plan.tail == "midstream_error":
        message["content"] = "".join(plan.chunks[: plan.tail_at])
        choice.update(
            finish_reason="error", native_finish_reason="error", error=plan.midstream_error
        )
    entry["outcome"] = "midstream_error" if plan.tail == "midstream_error" else "done"
    body = {
        **_base(plan, model, gen_id),
        "object": "chat.completion",
        "choices": [choice],
        "usage": wire.usage(plan.prompt_tokens, plan.completion_tokens, plan.cost(images)),
    }
    return JSONResponse(body)


def _pre_error_response(err: PreError) -> Response:
    if err.reset:
        return ResetResponse()
    headers = (
        {"Retry-After": str(math.ceil(err.retry_after_s))}
        if err.retry_after_s is not None
        else None
    )
    return _error(err.status, err.message, err.error_type, headers=headers, **err.metadata)


def create_app(scenario: Scenario | str | Path, *, key: str | SecretStr) -> ASGIApp:
    """The fleet as an ASGI app serving `scenario`, accepting bearer `key`."""
    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario)
    secret = key.get_secret_value() if isinstance(key, SecretStr) else key
    state = FleetState(scenario, secret)
    warm_up()

    def log(entry: dict[str, Any]) -> dict[str, Any]:
        state.log.append(entry)
        return entry

    async def list_models(request: Request) -> Response:
        data = []
        for m in state.scenario.models:
            cheapest = min(
                m.endpoints, key=lambda e: float(e.pricing.prompt) + float(e.pricing.completion)
            )
            params = sorted({p for e in m.endpoints for p in e.supported_parameters})
            data.append(
                {
                    "id": m.id,
                    "canonical_slug": m.id,
                    "name": m.name or m.id,
                    "created": m.created,
                    "description": m.description,
                    "context_length": m.context_length,
                    "architecture": _architecture(m),
                    "pricing": cheapest.pricing.model_dump(),
                    "top_provider": {
                        "context_length": m.context_length,
                        "max_completion_tokens": cheapest.max_completion_tokens,
                        "is_moderated": False,
                    },
                    "supported_parameters": params,
                }
            )
        return JSONResponse({"data": data})

    async def list_endpoints(request: Request) -> Response:
        model_id = f"{request.path_params['author']}/{request.path_params['slug']}"
        m = state.scenario.model(model_id)
        if m is None:
            return _error(404, "Resource not found", "not_found")
        return JSONResponse(
            {
                "data": {
                    "id": m.id,
                    "name": m.name or m.id,
                    "created": m.created,
                    "description": m.description,
                    "architecture": _architecture(m),
                    "endpoints": [_endpoint_json(m, e) for e in m.endpoints],
                }
            }
        )

    async def chat(request: Request) -> Response:
        raw = await request.body()
        try:
            body: Any = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            body = raw.decode("utf-8", errors="replace")
            entry = log(_entry(body, 400, None))
            entry["error"] = "malformed JSON"
            return _error(400, f"Invalid JSON body: {exc}", "invalid_request")
        auth = request.headers.get("authorization", "")
        token = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
        if not token or not hmac.compare_digest(token.encode(), state.key.encode()):
            log(_entry(body, 401, None))
            msg = "No auth credentials found" if not token else "User not found."
            return _error(401, msg, "authentication")
        try:
            req = parse_request(body)
        except RequestError as exc:
            log(_entry(body, 400, None))
            return _error(400, str(exc), "invalid_request")
        m = state.scenario.model(req.model)
        if m is None:
            log(_entry(body, 400, None))
            return _error(400, f"{req.model} is not a valid model ID", "invalid_request")
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
            return _error(found.status, found.message, found.error_type)
        tries = found if prefs.allow_fallbacks else found[:1]
        attempts: list[dict[str, Any]] = []
        plan: Plan | None = None
        for i, endpoint in enumerate(tries):
            plan = plan_request(
                state.scenario, m, endpoint, state.endpoints[(m.id, endpoint.tag)], req
            )
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
            return _pre_error_response(plan.pre_error)
        if req.stream:
            gen = _stream(plan, m, gen_id, state.scenario.time_scale, images, entry, started)
            return StreamingResponse(
                gen,
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        return await _complete(plan, m, gen_id, images, entry, started)

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
            return _error(422, f"Invalid JSON body: {exc}", "unprocessable")
        if not isinstance(data, dict) or ("name" in data) == ("scenario" in data):
            return _error(
                422,
                'give exactly one of "name" (a built-in scenario or a path) or "scenario" (a full scenario object)',
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
            return _error(422, str(exc), "unprocessable")
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
        return _error(
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
            scope[_RAW_SEND] = send
            scope[_ARRIVAL] = asyncio.get_running_loop().time()
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


def _architecture(m: ModelSpec) -> dict[str, Any]:
    inputs = list(m.input_modalities)
    return {
        "input_modalities": inputs,
        "output_modalities": ["text"],
        "modality": "+".join(inputs) + "->text",
        "tokenizer": m.tokenizer,
        "instruct_type": None,
    }


def _endpoint_json(m: ModelSpec, e: Any) -> dict[str, Any]:
    t = e.timing
    tps = t.tokens_per_s
    return {
        "name": f"{e.provider_name} | {m.id}",
        "model_id": m.id,
        "model_name": m.name or m.id,
        "provider_name": e.provider_name,
        "tag": e.tag,
        "quantization": e.quantization,
        "status": e.status,
        "context_length": e.context_length,
        "max_completion_tokens": e.max_completion_tokens,
        "max_prompt_tokens": None,
        "pricing": e.pricing.model_dump(),
        "supported_parameters": list(e.supported_parameters),
        "uptime_last_5m": e.uptime_last_30m,
        "uptime_last_30m": e.uptime_last_30m,
        "uptime_last_1d": e.uptime_last_30m,
        "latency_last_30m": {
            "p50": t.ttft_s,
            "p75": round(t.ttft_s * 1.3, 3),
            "p90": round(t.ttft_s * 1.8, 3),
            "p99": round(t.ttft_s * 3.2, 3),
        },
        "throughput_last_30m": {
            "p50": tps,
            "p75": round(tps * 0.85, 1),
            "p90": round(tps * 0.65, 1),
            "p99": round(tps * 0.35, 1),
        },
    }
