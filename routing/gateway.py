"""The OpenAI-compatible gateway: a thin Starlette shell around `Router`.

    POST /v1/chat/completions   OpenAI chat body, `stream` true or false
         Authorization: Bearer <one of CANARY_GATEWAY__KEYS>   (never the upstream key)
         X-Workload: chat | invoice_extraction | classify | tool_agent | ...   (default chat)
         Idempotency-Key / X-Operation-Id: echoed back as X-Operation-Id (generated if absent)
         The client's `model`, `provider` and `stream_options` are ignored: the contract
         of the workload chooses the route. `tools`, `tool_choice`, `functions`,
         `function_call` and `n` (other than 1) belong to the contract: refused (400,
         reason contract_owned_parameter). A body over gateway_max_body_bytes gets 413.
         Our own upstream key/credits rejected (401/402) -> 502 upstream_misconfigured.
    GET  /metrics               Prometheus text (the router's own registry)
    GET  /healthz               {"status": "ok", "workloads": [...], "routes": [...]}

Errors use OpenAI's shape plus our failure class and the operation id:

    {"error": {"message": "...", "type": "capacity", "code": "capacity", "param": null,
               "failure_class": "capacity", "reason": "rate_limit_exceeded",
               "operation_id": "op-…", "attempts": 2}}

A streaming reply is released only after its start passed the response-start
check; a failure after release ends the stream with an in-band error chunk
(`finish_reason: "error"`), as OpenRouter does.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import re
import time
import traceback
from collections.abc import AsyncIterator
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ground.errors import CanaryError
from ground.heap import freeze_loaded
from routing.accounting import RequestState
from routing.attempt import end_verdict
from routing.errors import FailureClass, PermanentRequestError, RoutingError
from routing.outcomes import StreamEnd
from routing.router import Router, RouterResult, new_operation_id
from wire import jsonio
from wire.text import NO_SECRET, Scrubber, upstream_text

log = logging.getLogger(__name__)
_OP_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def error_response(
    exc: RoutingError, operation_id: str, status: int | None = None, scrub: Scrubber = NO_SECRET
) -> JSONResponse:
    """OpenAI's error shape; `message` and `reason` pass through `scrub` (the upstream key)
    once more at this boundary, whatever built them."""
    cls = exc.failure_class.value
    body = {
        "error": {
            "message": upstream_text(exc.message, scrub, 2000),
            "type": cls,
            "code": cls,
            "param": None,
            "failure_class": cls,
            "reason": upstream_text(exc.reason, scrub, 200) if exc.reason else exc.reason,
            "operation_id": operation_id,
            "attempts": exc.attempts,
        }
    }
    return JSONResponse(
        body, status_code=status or exc.http_status, headers={"X-Operation-Id": operation_id}
    )


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


def _sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n"


def _chunk(
    base: dict[str, Any], delta: dict[str, Any], finish: str | None = None, **extra: Any
) -> bytes:
    return _sse(
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
    )


async def relay(result: RouterResult, router: Router, req: RequestState) -> AsyncIterator[bytes]:
    """SSE for the client: the checked head, then the rest as it arrives; at the end the
    whole reply passes the contract's acceptance (a rejection ends with an in-band error)."""
    base = {
        "id": f"chatcmpl-{result.operation_id}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": result.route.model,
    }
    end: StreamEnd | None = None
    if result.rest is None:  # a complete, accepted answer (non-streaming contract, or short reply)
        msg = _message(result)
        yield _chunk(base, msg)
        yield _chunk(base, {}, result.completion.finish_reason or "stop")
        if result.completion.usage:
            yield _sse({**base, "choices": [], "usage": result.completion.usage})
        yield b"data: [DONE]\n\n"
        if result.finish is not None:
            await result.finish(StreamEnd.accepted())
        return
    finished = False
    try:
        yield _chunk(base, {"role": "assistant", "content": result.head})
        try:
            async with asyncio.timeout(max(0.0, req.deadline.at - router.clock())):
                async for piece in result.rest:
                    yield _chunk(base, {"content": piece})
            comp = result.completion
            if comp.error is not None:
                end = StreamEnd.failed(FailureClass.INVALID_RESPONSE, "in_band_error")
            elif not comp.done:
                end = StreamEnd.failed(FailureClass.AMBIGUOUS, "stream_cut")
            else:  # the whole reply: the contract's full acceptance (R7)
                verdict = end_verdict(comp, req.contract, router.catalog.schemas, req.body)
                if verdict is not None:
                    end = StreamEnd.failed(
                        verdict.failure_class, verdict.reason, verdict.client_params
                    )
        except TimeoutError:
            end = StreamEnd.failed(FailureClass.DEADLINE, "deadline_during_stream")
        except Exception as exc:  # the upstream broke after release: tell the client in-band
            end = StreamEnd.failed(FailureClass.AMBIGUOUS, type(exc).__name__[:64])
        if end is None:
            yield _chunk(base, {}, result.completion.finish_reason or "stop")
            if result.completion.usage:
                yield _sse({**base, "choices": [], "usage": result.completion.usage})
            yield b"data: [DONE]\n\n"
            end = StreamEnd.accepted()
        else:
            scrub = router.upstream.scrub
            err = {
                "code": 502,
                "message": upstream_text(f"the reply failed after it started: {end.reason}", scrub),
                "metadata": {"error_type": end.failure, "operation_id": result.operation_id},
            }
            yield _chunk(base, {"content": ""}, "error", error=err)
        finished = True
    finally:
        if not finished and end is None:  # the client went away mid-stream
            end = StreamEnd.client_gone()
        rest = result.rest
        if rest is not None and hasattr(rest, "aclose"):
            with contextlib.suppress(Exception):
                await rest.aclose()
        with contextlib.suppress(Exception):
            await result.close()
        if result.finish is not None:
            await result.finish(end or StreamEnd.client_gone())


class BodyTooLarge(CanaryError):
    pass


class BodyTooSlow(CanaryError):
    pass


async def read_body(request: Request, limit: int, timeout_s: float | None = None) -> bytes:
    """The request body, refused past `limit` bytes (declared length first, then as read)
    or when it has not fully arrived within `timeout_s` (a slow-body client)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and len(declared) <= 18 and int(declared) > limit:
        raise BodyTooLarge
    out = bytearray()
    try:
        async with asyncio.timeout(timeout_s):
            async for chunk in request.stream():
                out += chunk
                if len(out) > limit:
                    raise BodyTooLarge
    except TimeoutError:
        raise BodyTooSlow from None
    return bytes(out)


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


def create_app(
    router: Router,
    *,
    keys: list[str],
    flush_every_s: float = 0.5,
    max_body_bytes: int = 2_000_000,
    body_timeout_s: float | None = 30.0,
) -> Starlette:
    """The gateway app. `keys`: the bearer keys clients may use (settings.gateway.keys);
    a body over `max_body_bytes` (settings.gateway.max_body_bytes) gets 413, one that has
    not arrived within `body_timeout_s` (settings.gateway.body_timeout_s) 408."""
    accepted_keys = [k.encode() for k in keys if k]
    scrub = router.upstream.scrub

    def refuse(exc: RoutingError, operation_id: str, status: int | None = None) -> JSONResponse:
        return error_response(exc, operation_id, status, scrub)

    def authorised(request: Request) -> bool:
        auth = request.headers.get("authorization", "")
        token = auth[7:].strip().encode() if auth.lower().startswith("bearer ") else b""
        return bool(token) and any(hmac.compare_digest(token, k) for k in accepted_keys)

    async def chat(request: Request) -> Response:
        raw_op = request.headers.get("idempotency-key") or request.headers.get("x-operation-id")
        operation_id = raw_op if raw_op and _OP_ID.match(raw_op) else new_operation_id()
        if raw_op and not _OP_ID.match(raw_op):
            return refuse(
                PermanentRequestError(
                    "Idempotency-Key / X-Operation-Id must match [A-Za-z0-9._:-]{1,128}",
                    reason="invalid_operation_id",
                ),
                operation_id,
            )
        if not authorised(request):
            return refuse(
                PermanentRequestError("missing or unknown gateway key", reason="authentication"),
                operation_id,
                401,
            )
        try:
            body = parse_client_body(await read_body(request, max_body_bytes, body_timeout_s))
        except BodyTooLarge:
            return refuse(
                PermanentRequestError(
                    f"request body exceeds {max_body_bytes} bytes", reason="body_too_large"
                ),
                operation_id,
                413,
            )
        except BodyTooSlow:
            return refuse(
                PermanentRequestError(
                    f"request body did not arrive within {body_timeout_s:g} s",
                    reason="request_timeout",
                ),
                operation_id,
                408,
            )
        except PermanentRequestError as exc:
            return refuse(exc, operation_id)
        workload = request.headers.get("x-workload", "chat").strip() or "chat"
        wants_stream = body.get("stream") is True
        try:
            req = router.admit(body, workload, operation_id, stream=wants_stream)
            result = await router.run(req)
        except RoutingError as exc:
            return refuse(exc, operation_id)
        except Exception:  # a bug of ours: explicit, OpenAI-shaped, with the operation id
            log.error(  # the traceback scrubbed: it may quote what an upstream sent
                "internal error for operation %s: %s",
                operation_id,
                upstream_text(traceback.format_exc(), scrub, 8000),
            )
            body = {"error": {"message": "internal gateway error", "type": "internal_error", "code": "internal_error",
                              "param": None, "failure_class": None, "operation_id": operation_id}}  # fmt: skip
            return JSONResponse(body, status_code=500, headers={"X-Operation-Id": operation_id})
        headers = {
            "X-Operation-Id": operation_id,
            "X-Route": result.route.id,
            "X-Attempts": str(len(result.attempts)),
        }
        if wants_stream:
            return RelayResponse(
                result,
                relay(result, router, req),
                media_type="text/event-stream",
                headers={**headers, "Cache-Control": "no-cache"},
            )
        return JSONResponse(completion_body(result), headers=headers)

    async def metrics(request: Request) -> Response:
        return Response(router.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    async def healthz(request: Request) -> Response:
        return JSONResponse(
            {
                "status": "ok",
                "workloads": sorted(router.catalog.contracts),
                "routes": [r.id for r in router.catalog.routes.routes],
            }
        )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        freeze_loaded()  # no full collection walks the loaded modules mid-request
        flusher = (
            asyncio.create_task(router.events.run_flusher(flush_every_s)) if router.events else None
        )
        try:
            yield
        finally:
            if flusher is not None:
                flusher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await flusher
                await router.events.aflush()  # type: ignore[union-attr]
            await router.upstream.aclose()

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/metrics", metrics),
            Route("/healthz", healthz),
        ],
        lifespan=lifespan,
    )


def build_router(
    settings: Any, *, contracts_dir: Any = None, ignore_source: Any = None, events: bool = True
) -> Router:
    """A Router wired from settings: upstream = settings.base_url + api_key, quarantine exclusions."""
    from routing.breaker import BreakerBoard
    from routing.events import EventLog
    from routing.exclusions import CachedIgnoreSource, quarantine_source
    from routing.router import RetryPolicy
    from routing.routes import load_catalog
    from routing.upstream import Upstream

    s = settings
    catalog = load_catalog(contracts_dir or s.routing.contracts_dir)
    policy = RetryPolicy(
        backoff_base_s=s.routing.backoff_base_s,
        backoff_cap_s=s.routing.backoff_cap_s,
        connect_timeout_s=s.routing.connect_timeout_s,
        allowances=s.allowances,
    )
    breakers = BreakerBoard(s.breaker)
    return Router(
        catalog,
        Upstream(
            s.base_url,
            s.api_key,
            max_connections=s.routing.max_connections,
            max_line_bytes=s.routing.max_line_bytes,
            max_reply_bytes=s.routing.max_reply_bytes,
            max_error_bytes=s.routing.max_error_body_bytes,
        ),
        ignore_source=CachedIgnoreSource(
            ignore_source or quarantine_source(),
            ttl_s=s.routing.ignore_ttl_s,
            fetch_timeout_s=s.routing.ignore_fetch_timeout_s,
        ),
        breakers=breakers,
        events=EventLog(s.resolved_ledger_url) if events else None,
        policy=policy,
    )
