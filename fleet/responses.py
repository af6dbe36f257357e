"""How one planned reply goes on the wire: the SSE stream (keep-alives while
waiting, word chunks at the scripted rate, usage chunk, `[DONE]`, or a cut /
in-band error tail; the wire faults: no `[DONE]`, non-JSON data events mid-reply, a stall
after some chunks), the non-streamed body, pre-token errors and resets."""

from __future__ import annotations

import asyncio
import contextlib
import math
import socket
import struct
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from fleet import wire
from fleet.behaviour import Plan, PreError
from fleet.scenario import ModelSpec

MIN_WRITE_INTERVAL_S = 0.05
# Tokens due within this of now go out in the current write: the event loop cannot sleep for
# less (epoll waits in whole milliseconds), so an instant reply due over 59 us was written in
# two pieces a millisecond or more apart, which every path that streams from the fleet paid.
TIMER_RESOLUTION_S = 0.001
RAW_SEND = "fleet.raw_send"
GARBAGE = b'data: {"id": "gen-garbled", "choices": [{"delta": {"content": \n\n'  # not JSON


def error_response(
    status: int,
    message: str,
    error_type: str | None = None,
    headers: dict[str, str] | None = None,
    **meta: Any,
) -> JSONResponse:
    """The OpenRouter error envelope with `metadata.error_type` (and extra metadata)."""
    return JSONResponse(
        wire.envelope(status, message, error_type, **meta), status_code=status, headers=headers
    )


class ResetResponse(Response):
    """Close the TCP connection with a RST before any response byte."""

    def __init__(self) -> None:
        super().__init__(status_code=502)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get(RAW_SEND)
        cycle = getattr(raw, "__self__", None)
        transport = getattr(cycle, "transport", None)
        if cycle is None or transport is None:  # not under uvicorn: degrade to a 502
            await error_response(502, "connection reset", "provider_unavailable")(
                scope, receive, send
            )
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()
        cycle.disconnected = True


class SSEResponse(Response):
    """A lean event-stream response: sends each generated batch straight to the
    server (no task group per stream) and stops when the client has gone."""

    def __init__(self, body: AsyncIterator[bytes], entry: dict[str, Any]) -> None:
        self.body_iterator = body
        self.entry = entry
        self.status_code = 200
        self.background = None
        self.raw_headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"),
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        cycle = getattr(scope.get(RAW_SEND), "__self__", None)
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        try:
            async for chunk in self.body_iterator:
                if cycle is not None and getattr(cycle, "disconnected", False):
                    self.entry["outcome"] = "client_disconnected"
                    return
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:
                await aclose()


def _base(plan: Plan, model: ModelSpec, gen_id: str) -> dict[str, Any]:
    return {
        "id": gen_id,
        "created": int(time.time()),
        "model": plan.served_model or model.id,
        "provider": plan.served_as,
    }


def _reasoning_detail(text: str) -> list[dict[str, Any]]:
    return [{"type": "reasoning.text", "text": text, "format": "unknown", "index": 0}]


def _reasoning_deltas(plan: Plan) -> list[dict[str, Any]]:
    """Healthy reasoning tokens, before any content: `content` stays empty."""
    if plan.reasoning_hidden:
        return []
    return [
        {"content": "", "reasoning": piece, "reasoning_details": _reasoning_detail(piece)}
        for piece in plan.reasoning
    ]


def _deltas(plan: Plan) -> list[dict[str, Any]]:
    """Every delta of the reply in order (reasoning, then the call or the content); a
    buffered plan sends them merged into one."""
    if plan.tool_calls:
        body = _tool_deltas(plan)
    elif plan.chunks:
        body = [{"content": c} for c in plan.chunks]
    else:
        body = [{"content": ""}]
    deltas = [*_reasoning_deltas(plan), *body]
    if plan.buffered:
        deltas = [_merged(deltas)]
    deltas[0] = {"role": "assistant", **deltas[0]}
    return deltas


def _merged(deltas: list[dict[str, Any]]) -> dict[str, Any]:
    """All deltas as one (the whole reply in a single chunk): each call's pieces joined
    under its index."""
    content = "".join(d.get("content") or "" for d in deltas)
    reasoning = "".join(d.get("reasoning") or "" for d in deltas)
    out: dict[str, Any] = {"content": content}
    if reasoning:
        out.update(reasoning=reasoning, reasoning_details=_reasoning_detail(reasoning))
    calls: dict[int, dict[str, Any]] = {}
    for tc in (tc for d in deltas for tc in d.get("tool_calls") or []):
        piece = tc["function"].get("arguments", "")
        if tc["index"] not in calls:
            calls[tc["index"]] = {**tc, "function": {**tc["function"], "arguments": piece}}
        else:
            calls[tc["index"]]["function"]["arguments"] += piece
    if calls:
        out["content"] = None
        out["tool_calls"] = list(calls.values())
    return out


def _tool_deltas(plan: Plan) -> list[dict[str, Any]]:
    """OpenAI's delta format, call after call: the first delta of call `i` carries `index`
    i, its `id`, `type` and `function.name` (empty arguments), the next ones pieces of its
    arguments under the same index."""
    assert plan.tool_calls
    out: list[dict[str, Any]] = []
    for i, call in enumerate(plan.tool_calls):
        args = call["function"]["arguments"]
        head = {"index": i, "id": call["id"], "type": "function"}
        head["function"] = {"name": call["function"]["name"], "arguments": ""}
        out.append({"tool_calls": [head]})
        pieces = [args[j : j + 16] for j in range(0, len(args), 16)] or [""]
        out += [{"tool_calls": [{"index": i, "function": {"arguments": p}}]} for p in pieces]
    out[0] = {"content": None, **out[0]}
    return out


async def stream_reply(
    plan: Plan,
    model: ModelSpec,
    gen_id: str,
    scale: float,
    images: int,
    entry: dict[str, Any],
    started: float,
) -> AsyncIterator[bytes]:
    """SSE body: keep-alives until `started + delay_s`, then one chunk per token at
    the scripted rate (written at most every MIN_WRITE_INTERVAL_S), then usage (unless the
    endpoint sends it only when asked and the request did not ask: `Plan.send_usage`) and
    `[DONE]` -- or the plan's tail (cut: just stop; midstream_error: error chunk)."""
    loop = asyncio.get_running_loop()
    base = _base(plan, model, gen_id)
    yield wire.KEEPALIVE
    keepalive_s = max(0.01, 1.0 * scale)
    deadline = started + plan.delay_s
    while (left := deadline - loop.time()) > 0:
        await asyncio.sleep(min(left, keepalive_s))
        if deadline - loop.time() > 0:
            yield wire.KEEPALIVE
    deltas = _deltas(plan)
    lead = 0 if plan.buffered else len(_reasoning_deltas(plan))  # a cut counts content tokens
    cut = plan.tail in ("cut", "midstream_error")
    stop_at = min(len(deltas), plan.tail_at + lead) if cut else len(deltas)
    garbage_at = None if plan.garbage_at is None else plan.garbage_at + lead
    stall_at = None if plan.stall_at is None else plan.stall_at + lead
    encoder = wire.ChunkEncoder(base)
    start = loop.time()
    i = 0
    while i < stop_at:
        now = loop.time()
        batch = bytearray()
        while i < stop_at and start + i * plan.gap_s <= now + TIMER_RESOLUTION_S:
            if i == garbage_at:
                batch += GARBAGE * plan.garbage_n
                garbage_at = None
            if i == stall_at:
                break
            last = i == len(deltas) - 1
            delta = deltas[i]
            if not last and len(delta) == 1 and "content" in delta:
                batch += encoder.content(delta["content"])
            else:
                batch += wire.sse(wire.chunk(base, delta, plan.finish_reason if last else None))
            i += 1
        if batch:
            yield bytes(batch)
        if i == stall_at:  # silent for the stall, then the rest at the scripted rate
            stall_at = None
            await asyncio.sleep(plan.stall_s)
            start += plan.stall_s
            continue
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
    if plan.send_usage:
        yield wire.sse(
            {
                **base,
                "object": "chat.completion.chunk",
                "choices": [],
                "usage": _usage(plan, images),
            }
        )
    if plan.tail == "no_done":  # complete, and a clean end without [DONE]
        entry["outcome"] = "no_done"
        return
    yield wire.DONE
    entry["outcome"] = "done"


async def complete_reply(
    plan: Plan, model: ModelSpec, gen_id: str, images: int, entry: dict[str, Any], started: float
) -> Response:
    """Non-streamed body, returned once the whole scripted generation time has passed."""
    loop = asyncio.get_running_loop()
    tokens = 0 if plan.buffered else len(plan.reasoning) + len(plan.chunks)
    stall = plan.stall_s if plan.stall_at is not None else 0.0
    finish = started + plan.delay_s + tokens * plan.gap_s + stall
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
    if plan.reasoning and not plan.reasoning_hidden:
        reasoning = "".join(plan.reasoning)
        message["reasoning"] = reasoning
        message["reasoning_details"] = _reasoning_detail(reasoning)
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
        "system_fingerprint": None,
        "choices": [choice],
        "usage": _usage(plan, images),
    }
    return JSONResponse(body)


def _usage(plan: Plan, images: int) -> dict[str, Any]:
    return wire.usage(
        plan.prompt_tokens, plan.completion_tokens, plan.cost(images), plan.reasoning_tokens
    )


def pre_error_response(err: PreError) -> Response:
    """A pre-token failure: the envelope (or the body of another dialect: `openai_error`),
    with `Retry-After` if scripted, or a reset."""
    if err.reset:
        return ResetResponse()
    headers = (
        {"Retry-After": str(math.ceil(err.retry_after_s))}
        if err.retry_after_s is not None
        else None
    )
    if err.body is not None:  # another dialect's body, as that server sends it
        return JSONResponse(err.body, status_code=err.status, headers=headers)
    return error_response(err.status, err.message, err.error_type, headers=headers, **err.metadata)
