"""The OpenAI-compatible gateway: a thin Starlette shell around `Router`.

    POST /v1/chat/completions   OpenAI chat body, `stream` true or false
         Authorization: Bearer <one of CANARY_GATEWAY__KEYS>   (never the upstream key)
         X-Workload: chat | invoice_extraction | classify | tool_agent | ...; without it the
         body's `model` names the workload (what an off-the-shelf OpenAI client can set; a
         name that is no workload is a 400 naming the known ones), without either `chat`
         Idempotency-Key / X-Operation-Id: echoed back as X-Operation-Id (generated if absent)
         X-Request-Id (response): the gateway's own id of this request, also in an error
         body (`request_id`); `canary served --request ID` finds its attempts
         The client's `provider` and `stream_options` are ignored, and so is `model` once it
         has chosen the workload: the contract of the workload chooses the route. `tools`, `tool_choice`, `functions`,
         and `function_call` belong to the contract: refused (400, reason
         contract_owned_parameter). The OpenAI parameters (`stream` a boolean, `max_tokens`
         a positive integer, `temperature` 0..2, `n` only 1, ...) are checked by type and
         range before any route is tried: 400 invalid_parameter, `param` naming the field
         (routing/params.py). A body over settings.gateway.max_body_bytes
         gets 413, one not in within settings.gateway.body_timeout_s 408 (`BODY_REFUSALS`).
         Our own upstream key/credits rejected (401/402) -> 502 upstream_misconfigured.
    GET  /v1/models             the workloads, in OpenAI's list shape (what `models.list()`
                                and chat front-ends discover)
    GET  /metrics               Prometheus text (the router's own registry: counters and
                                the R11 figures, with the masking warning)
    GET  /healthz               {"status": "ok", "workloads": [...], "routes": [...]}

Errors use OpenAI's shape plus our failure class and the operation id:

    {"error": {"message": "...", "type": "capacity", "code": "capacity", "param": null,
               "failure_class": "capacity", "reason": "rate_limit_exceeded",
               "operation_id": "op-…", "request_id": "req-…", "attempts": 2}}

A streaming reply is released once the response-start check has decided its start (at its
first word when it can; routing/start_gate.py); a failure after release, a start found stray
once its window was complete included, ends the stream with an in-band error chunk
(`finish_reason: "error"`), as OpenRouter does.

Starlette as it is written: module-level endpoints reading one typed `GatewayState` off
`app.state.gateway` (the router it serves and `settings.gateway`, taken whole), behind
`GatewayApp`, which serves the hot path (`POST /v1/chat/completions`) as a plain ASGI
endpoint. The router is built elsewhere (`routing/compose.py`), so this module is only the
HTTP shell.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
import traceback
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ground.errors import CanaryError
from ground.heap import freeze_loaded
from ground.settings import GatewayConfig
from routing.accounting import RequestState
from routing.attempt import classify_unforeseen, end_verdict
from routing.errors import (
    BodyTooLarge,
    BodyTooSlow,
    FailureClass,
    PermanentRequestError,
    RoutingError,
)
from routing.outcomes import StreamEnd
from routing.records import EventSink
from routing.response import Completion
from routing.router import Router, RouterResult, new_operation_id, new_request_id
from wire import jsonio
from wire.auth import bearer_token, key_matches
from wire.text import NO_SECRET, Scrubber, upstream_text

log = logging.getLogger(__name__)
JSON = "application/json"
_OP_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def error_response(
    exc: RoutingError,
    operation_id: str,
    status: int | None = None,
    scrub: Scrubber = NO_SECRET,
    request_id: str | None = None,
) -> JSONResponse:
    """OpenAI's error shape; `message` and `reason` pass through `scrub` (the upstream key)
    once more at this boundary, whatever built them."""
    cls = exc.failure_class.value
    request_id = request_id or new_request_id()
    body = {
        "error": {
            "message": upstream_text(exc.message, scrub, 2000),
            "type": cls,
            "code": cls,
            "param": exc.param,
            "failure_class": cls,
            "reason": upstream_text(exc.reason, scrub, 200) if exc.reason else exc.reason,
            "operation_id": operation_id,
            "request_id": request_id,
            "attempts": exc.attempts,
        }
    }
    headers = {"X-Operation-Id": operation_id, "X-Request-Id": request_id}
    return JSONResponse(body, status_code=status or exc.http_status, headers=headers)


def _message(result: RouterResult) -> dict[str, Any]:
    comp = result.completion
    msg: dict[str, Any] = {
        "role": "assistant",
        "content": None
        if comp.tool_calls
        else (result.accepted.content if result.accepted else comp.content),
    }
    if comp.tool_calls:
        msg["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in comp.tool_calls
        ]
    return msg


def completion_body(result: RouterResult) -> dict[str, Any]:
    comp = result.completion
    return {
        "id": f"chatcmpl-{result.operation_id}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": result.route.model,
        "provider": comp.provider,
        "choices": [
            {"index": 0, "message": _message(result), "finish_reason": comp.finish_reason or "stop"}
        ],
        "usage": comp.usage or {},
    }


def json_bytes(obj: Any) -> bytes:
    """Compact UTF-8 JSON of what the gateway sends: orjson (a twentieth of the standard
    encoder's time per reply), the standard encoder for what orjson refuses (an integer
    beyond 64 bits an upstream put in its usage)."""
    try:
        return orjson.dumps(obj)
    except TypeError:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def _sse(obj: Any) -> bytes:
    return b"data: " + json_bytes(obj) + b"\n\n"


def _chunk(
    base: dict[str, Any], delta: dict[str, Any], finish: str | None = None, **extra: Any
) -> bytes:
    return _sse(
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
    )


def _tool_call_frames(base: dict[str, Any], comp: Completion) -> list[bytes]:
    """The reply's tool calls in OpenAI's delta format: for call `i`, a first delta with
    `index` i, its `id`, `type` and `function.name` (empty arguments), then its arguments
    under the same index (what the OpenAI SDK's stream helpers and accumulators read)."""
    frames: list[bytes] = []
    for i, call in enumerate(comp.tool_calls):
        head = {"index": i, "id": call.id, "type": "function"}
        head["function"] = {"name": call.name, "arguments": ""}
        frames.append(_chunk(base, {"tool_calls": [head]}))
        if call.arguments:
            piece = {"index": i, "function": {"arguments": call.arguments}}
            frames.append(_chunk(base, {"tool_calls": [piece]}))
    return frames


def _closing_frames(base: dict[str, Any], comp: Completion) -> list[bytes]:
    """The end of an accepted stream: its tool calls (`_tool_call_frames`), the finish
    reason, the usage (when reported), [DONE]."""
    frames = [*_tool_call_frames(base, comp), _chunk(base, {}, comp.finish_reason or "stop")]
    if comp.usage:
        frames.append(_sse({**base, "choices": [], "usage": comp.usage}))
    frames.append(b"data: [DONE]\n\n")
    return frames


def _stream_verdict(result: RouterResult, router: Router, req: RequestState) -> StreamEnd | None:
    """How a released stream that reached its end ended: None = accepted; else an in-band
    error, a cut, or the contract's full acceptance (R7) rejecting the whole reply."""
    comp = result.completion
    if comp.error is not None:
        return StreamEnd.failed(FailureClass.INVALID_RESPONSE, "in_band_error")
    if not comp.done:
        return StreamEnd.failed(FailureClass.AMBIGUOUS, "stream_cut")
    verdict = end_verdict(comp, req.contract, router.catalog.schemas, req.body)
    if verdict is None:
        return None
    return StreamEnd.failed(verdict.failure_class, verdict.reason, verdict.client_params)


def _broken(exc: Exception, scrub: Scrubber) -> StreamEnd:
    """A released stream the upstream broke (a stall, a reset, garbage past its bound): its
    failure as any attempt's after output started (`routing.classify`: `stream_stalled`, ...)."""
    c = classify_unforeseen(exc, True, scrub)
    return StreamEnd.failed(c.failure_class, c.reason)


def _failed_frame(
    base: dict[str, Any], end: StreamEnd, req: RequestState, scrub: Scrubber
) -> bytes:
    """The in-band error chunk that ends a stream which failed after it started."""
    err = {
        "code": 502,
        "message": upstream_text(f"the reply failed after it started: {end.reason}", scrub),
        "metadata": {
            "error_type": end.failure,
            "operation_id": req.operation_id,
            "request_id": req.request_id,
        },
    }
    return _chunk(base, {"content": ""}, "error", error=err)


async def _end_relay(result: RouterResult, end: StreamEnd) -> None:
    """Close the rest of the stream and the upstream call, then record how it ended."""
    rest = result.rest
    if rest is not None and hasattr(rest, "aclose"):
        with contextlib.suppress(Exception):
            await rest.aclose()
    with contextlib.suppress(Exception):
        await result.close()
    if result.finish is not None:
        await result.finish(end)


async def relay(result: RouterResult, router: Router, req: RequestState) -> AsyncIterator[bytes]:
    """SSE for the client: the released head, then the rest as the start gate lets it out;
    at the end the whole reply passes the contract's acceptance (a rejection, or a start
    found stray once its window came, ends with an in-band error)."""
    base = {
        "id": f"chatcmpl-{result.operation_id}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": result.route.model,
    }
    if result.rest is None:  # a complete, accepted answer (non-streaming contract, or short reply)
        yield _chunk(base, {"role": "assistant", "content": _message(result)["content"]})
        for frame in _closing_frames(base, result.completion):
            yield frame
        if result.finish is not None:
            await result.finish(StreamEnd.accepted())
        return
    end: StreamEnd | None = None
    finished = False
    try:
        yield _chunk(base, {"role": "assistant", "content": result.head})
        try:
            async with asyncio.timeout(max(0.0, req.deadline.at - router.clock())):
                async for piece in result.rest:
                    yield _chunk(base, {"content": piece})
            end = _stream_verdict(result, router, req)
        except TimeoutError:
            end = StreamEnd.failed(FailureClass.DEADLINE, "deadline_during_stream")
        except Exception as exc:  # the upstream broke after release: tell the client in-band
            end = _broken(exc, router.upstream.scrub)
        if end is None:
            for frame in _closing_frames(base, result.completion):
                yield frame
            end = StreamEnd.accepted()
        else:
            yield _failed_frame(base, end, req, router.upstream.scrub)
        finished = True
    finally:
        if not finished and end is None:  # the client went away mid-stream
            end = StreamEnd.client_gone()
        await _end_relay(result, end or StreamEnd.client_gone())


async def read_body(
    headers: Headers, stream: AsyncIterator[bytes], limit: int, timeout_s: float
) -> bytes:
    """The request body, refused past `limit` bytes (declared length first, then as read:
    `BodyTooLarge`) or when it has not fully arrived within `timeout_s` (a slow-body client:
    `BodyTooSlow`)."""
    too_large = f"request body exceeds {limit} bytes"
    declared = headers.get("content-length", "")
    if declared.isdigit() and len(declared) <= 18 and int(declared) > limit:
        raise BodyTooLarge(too_large)
    out = bytearray()
    try:
        async with asyncio.timeout(timeout_s):
            async for chunk in stream:
                out += chunk
                if len(out) > limit:
                    raise BodyTooLarge(too_large)
    except TimeoutError:
        raise BodyTooSlow(f"request body did not arrive within {timeout_s:g} s") from None
    return bytes(out)


# a client's body the gateway refuses -> (HTTP status, reason); the message is the error's
BODY_REFUSALS: dict[type[CanaryError], tuple[int, str]] = {
    BodyTooLarge: (413, "body_too_large"),
    BodyTooSlow: (408, "request_timeout"),
}


def parse_client_body(raw: bytes) -> dict[str, Any]:
    """A client's request body as strict JSON (wire.jsonio): NaN, Infinity, numbers that
    overflow, lone surrogates, integers over 100 digits and nesting deeper than 64 levels are
    refused with `PermanentRequestError` (400 invalid_request), as is a non-object."""
    try:
        body = jsonio.loads(raw, strict=True)
    except jsonio.WireJSONError as exc:
        raise PermanentRequestError(
            f"request body is not valid JSON: {exc}", reason="invalid_request"
        ) from None
    if not isinstance(body, dict):
        raise PermanentRequestError("request body must be a JSON object", reason="invalid_request")
    return body


class RelayResponse(StreamingResponse):
    """The SSE response of a released stream. Whatever happens to the response (the client
    went away before the first byte, so the relay generator never ran), the upstream call
    is closed and the stream's finisher runs once: a held half-open probe slot is never
    leaked (the finisher is idempotent; the relay normally calls it first)."""

    def __init__(self, result: RouterResult, content: AsyncIterator[bytes], **kw: Any) -> None:
        super().__init__(content, **kw)
        self.result = result

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            with contextlib.suppress(Exception):
                await self.result.close()
            if self.result.finish is not None:
                await self.result.finish(StreamEnd.client_gone())


class AnswerResponse(Response):
    """A complete JSON answer. The router's bookkeeping of it (verdict, metrics, events:
    `Router.admit(after_reply=True)`) runs once it has left: the reply is written at the end
    of this turn of the loop (`routing.serving.CoalescingTransport`), the bookkeeping on the
    next, before the next read of any connection is handled; and it runs whatever happens to
    the response (issue 26: the client does not wait for it)."""

    def __init__(self, req: RequestState, content: bytes, **kw: Any) -> None:
        super().__init__(content, **kw)
        self.req = req

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
            await asyncio.sleep(0)  # the reply leaves first
        finally:
            self.req.run_after_reply()


# ---- the app: its state and its endpoints ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class GatewayState:
    """What the endpoints read off `app.state.gateway`."""

    router: Router
    config: GatewayConfig  # settings.gateway: client keys, body bounds, events flush
    # the bearer keys clients may use (empty ones dropped); never in a repr
    keys: tuple[str, ...] = field(repr=False)

    @property
    def scrub(self) -> Scrubber:
        """The upstream key's scrubber: what an error quotes may echo the upstream."""
        return self.router.upstream.scrub

    def refuse(
        self,
        exc: RoutingError,
        operation_id: str,
        status: int | None = None,
        request_id: str | None = None,
    ) -> JSONResponse:
        """`exc` in OpenAI's error shape (its own status unless `status` is given)."""
        return error_response(exc, operation_id, status, self.scrub, request_id)


def _state(request: Request) -> GatewayState:
    state: GatewayState = request.app.state.gateway
    return state


def _operation_id(headers: Headers) -> tuple[str, RoutingError | None]:
    """The request's operation id (the client's Idempotency-Key / X-Operation-Id, else a
    new one) and the refusal of a client id of the wrong shape."""
    raw = headers.get("idempotency-key") or headers.get("x-operation-id")
    if not raw:
        return new_operation_id(), None
    if _OP_ID.match(raw):
        return raw, None
    refusal = PermanentRequestError(
        "Idempotency-Key / X-Operation-Id must match [A-Za-z0-9._:-]{1,128}",
        reason="invalid_operation_id",
    )
    return new_operation_id(), refusal


async def chat(request: Request) -> Response:
    """POST /v1/chat/completions through Starlette (`GatewayApp` serves it without Starlette's
    routing and request objects; this is the same endpoint for a Starlette mount)."""
    return await chat_response(_state(request), request.headers, request.stream())


async def chat_response(
    gw: GatewayState, headers: Headers, stream: AsyncIterator[bytes]
) -> Response:
    """POST /v1/chat/completions: the operation id, the client's key, its body (`stream`),
    the workload, then the router (see the module docstring)."""
    request_id = new_request_id()
    operation_id, refusal = _operation_id(headers)
    if refusal is not None:
        return gw.refuse(refusal, operation_id, request_id=request_id)
    if not _authorized(gw, headers):
        refusal = PermanentRequestError("missing or unknown gateway key", reason="authentication")
        return gw.refuse(refusal, operation_id, 401, request_id)
    try:
        raw = await read_body(headers, stream, gw.config.max_body_bytes, gw.config.body_timeout_s)
        body = parse_client_body(raw)
        workload = choose_workload(headers.get("x-workload"), body, gw.router)
    except (BodyTooLarge, BodyTooSlow) as exc:
        status, reason = BODY_REFUSALS[type(exc)]
        refusal = PermanentRequestError(str(exc), reason=reason)
        return gw.refuse(refusal, operation_id, status, request_id)
    except PermanentRequestError as exc:
        return gw.refuse(exc, operation_id, request_id=request_id)
    return await _routed(gw, body, workload, operation_id, request_id)


def _authorized(gw: GatewayState, headers: Headers) -> bool:
    token = bearer_token(headers.get("authorization"))
    return token is not None and key_matches(token, gw.keys)


def choose_workload(header: str | None, body: dict[str, Any], router: Router) -> str:
    """The request's workload: the `X-Workload` header when set; else the body's `model`
    when it names a workload (OpenAI clients select with `model`; a name that is none is
    refused, naming the known ones); else `chat`."""
    if header is not None and header.strip():
        return header.strip()
    model = body.get("model")
    if model is None or model == "":
        return "chat"
    known = sorted(router.catalog.contracts)
    if isinstance(model, str) and model in router.catalog.contracts:
        return model
    raise PermanentRequestError(
        f"model {upstream_text(model, NO_SECRET, 80)!r} names no workload of this gateway;"
        f" known: {known} (GET /v1/models lists them; or send the X-Workload header)",
        reason="unknown_workload",
    )


async def _routed(
    gw: GatewayState, body: dict[str, Any], workload: str, operation_id: str, request_id: str
) -> Response:
    """The router's answer to an admitted body: JSON, an SSE relay, or an explicit error."""
    wants_stream = body.get("stream") is True
    router = gw.router
    ids = {"X-Operation-Id": operation_id, "X-Request-Id": request_id}
    req: RequestState | None = None
    try:
        req = router.admit(
            body, workload, operation_id, stream=wants_stream, request_id=request_id,
            after_reply=not wants_stream,
        )  # fmt: skip
        result = await router.run(req)
    except RoutingError as exc:
        return gw.refuse(exc, operation_id, request_id=request_id)
    except Exception:  # a bug of ours: explicit, OpenAI-shaped, with the operation id
        if req is not None:
            req.run_after_reply()
        log.error(  # the traceback scrubbed: it may quote what an upstream sent
            "internal error for operation %s: %s",
            operation_id,
            upstream_text(traceback.format_exc(), gw.scrub, 8000),
        )
        error = {"message": "internal gateway error", "type": "internal_error", "code": "internal_error",
                 "param": None, "failure_class": None, "operation_id": operation_id,
                 "request_id": request_id}  # fmt: skip
        return JSONResponse({"error": error}, status_code=500, headers=ids)
    headers = {**ids, "X-Route": result.route.id, "X-Attempts": str(len(result.attempts))}
    if wants_stream:
        return RelayResponse(
            result,
            relay(result, router, req),
            media_type="text/event-stream",
            headers={**headers, "Cache-Control": "no-cache"},
        )
    return AnswerResponse(
        req, json_bytes(completion_body(result)), media_type=JSON, headers=headers
    )


async def models(request: Request) -> Response:
    """GET /v1/models: the workloads in OpenAI's list shape; a workload's name is what a
    client puts in `model`."""
    gw = _state(request)
    if not _authorized(gw, request.headers):
        refusal = PermanentRequestError("missing or unknown gateway key", reason="authentication")
        return gw.refuse(refusal, new_operation_id(), 401)
    catalog = gw.router.catalog
    data = [
        {"id": name, "object": "model", "created": 0, "owned_by": "provider-canary",
         "description": contract.description, "version": contract.version}
        for name, contract in sorted(catalog.contracts.items())
    ]  # fmt: skip
    return JSONResponse({"object": "list", "data": data})


async def metrics(request: Request) -> Response:
    """GET /metrics: the router's own Prometheus registry."""
    return Response(_state(request).router.metrics.render(), media_type=CONTENT_TYPE_LATEST)


async def healthz(request: Request) -> Response:
    """GET /healthz: the workloads and routes the gateway serves."""
    catalog = _state(request).router.catalog
    return JSONResponse(
        {
            "status": "ok",
            "workloads": sorted(catalog.contracts),
            "routes": [r.id for r in catalog.routes.routes],
        }
    )


async def flush_every(sink: EventSink, every_s: float) -> None:
    """Write the sink's records every `every_s`, forever (a background task of the gateway,
    cancelled at shutdown); a failed flush is logged and serving goes on."""
    while True:
        await asyncio.sleep(every_s)
        try:
            await sink.aflush()
        except Exception:  # pragma: no cover - keep serving; the next flush retries
            log.exception("flushing routing events failed")


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    """Read the routes' endpoints listings (each fetch bounded by `listing_timeout_s`, so a
    start waits at most that long), freeze what is loaded, then while the app serves flush
    the router's events every `events_flush_s` and re-read the listings every
    `listing_refresh_s`; at shutdown, flush the events once more and close the upstream pool."""
    gw: GatewayState = app.state.gateway
    router, events, listings = gw.router, gw.router.events, gw.router.listings
    tasks: list[asyncio.Task[None]] = []
    if listings is not None:
        models = sorted({r.model for r in router.catalog.routes.routes})
        await listings.refresh(models)
        tasks.append(asyncio.create_task(listings.refresh_every(models)))
    freeze_loaded()  # no full collection walks the loaded modules mid-request
    if events is not None:
        tasks.append(asyncio.create_task(flush_every(events, gw.config.events_flush_s)))
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if events is not None:
            await events.aflush()
        await router.upstream.aclose()


CHAT_PATH = "/v1/chat/completions"


async def _request_body(receive: Receive) -> AsyncIterator[bytes]:
    """A request's body as the ASGI server hands it over (Starlette's `Request.stream`)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        if message["type"] == "http.request":
            if chunk := message.get("body", b""):
                yield chunk
            if not message.get("more_body", False):
                return


class GatewayApp:
    """The gateway's ASGI app: `POST /v1/chat/completions`, the hot path, goes straight to its
    endpoint (`chat_response`), without Starlette's middleware, router and request object
    (about 30 us a request where a plain endpoint takes 3, in a micro-benchmark of issue 26);
    everything else (the other routes, a chat request of another method, the lifespan) is
    the Starlette app's."""

    def __init__(self, starlette: Starlette) -> None:
        self.starlette = starlette
        self.gateway: GatewayState = starlette.state.gateway

    @property
    def state(self) -> Any:
        return self.starlette.state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != CHAT_PATH or scope["method"] != "POST":
            await self.starlette(scope, receive, send)
            return
        try:
            response = await chat_response(
                self.gateway, Headers(scope=scope), _request_body(receive)
            )
        except ClientDisconnect:
            return  # gone before its body was read: nobody to answer
        await response(scope, receive, send)


def create_app(router: Router, config: GatewayConfig) -> GatewayApp:
    """The gateway app serving `router`; `config`: settings.gateway, taken whole (the bearer
    keys clients may use, the body's size limit (413) and timeout (408), the events flush)."""
    app = Starlette(
        routes=[
            Route(CHAT_PATH, chat, methods=["POST"]),
            Route("/v1/models", models),
            Route("/metrics", metrics),
            Route("/healthz", healthz),
        ],
        lifespan=lifespan,
    )
    keys = tuple(k.get_secret_value() for k in config.keys if k.get_secret_value())
    app.state.gateway = GatewayState(router, config, keys)
    return GatewayApp(app)
