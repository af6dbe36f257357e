"""Bad input through a tiny raw HTTP/1.1 server of our own on 127.0.0.1 port 0 (C1, C2, C3):
malformed SSE lines, non-UTF-8 bytes, JSON with a BOM, a 10 MB response, a never-ending
stream, keep-alives forever, resets, missing headers. Every case ends in a typed outcome,
never a crash, within bounded time and memory."""

from __future__ import annotations

import asyncio
import json
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from ground.settings import ProbeConfig
from probes.client import ProbeClient
from probes.contracts import classify_transport, judge_latency, judge_refusal
from probes.errors import DiscoveryAuthError, DiscoveryTransportError, MalformedDiscoveryPayload
from probes.types import Contract, Endpoint, OutcomeStatus, Transcript
from wire.transport import TransportCode

S = OutcomeStatus
# What the client records of its own bounds, never a window of wall-clock time: a timer
# never fires before its time (a lower bound only a bug breaks, whatever the load), and an
# upper bound far above the bound (a loaded machine is slower, not that much slower).
TIMER_SLACK_S = 0.01
BOUND_MARGIN_S = 5.0
Writer = asyncio.StreamWriter
EP = Endpoint(model_id="a/m", tag="p/fp8", provider_name="P")
MSGS = [{"role": "user", "content": "*I wave.* Hello!"}]


def _sse(obj: dict[str, Any] | str) -> bytes:
    return (
        b"data: " + (obj.encode() if isinstance(obj, str) else json.dumps(obj).encode()) + b"\n\n"
    )


def _delta(text: str, provider: str = "P", finish: str | None = None) -> bytes:
    return _sse(
        {
            "id": "g",
            "provider": provider,
            "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}],
        }
    )


async def _head(
    w: Writer, status: int = 200, ctype: str = "text/event-stream", extra: str = ""
) -> None:
    w.write(
        f"HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\nTransfer-Encoding: chunked\r\n{extra}\r\n".encode()
    )
    await w.drain()


async def _chunk(w: Writer, data: bytes) -> None:
    w.write(b"%x\r\n%s\r\n" % (len(data), data))
    await w.drain()


async def _end(w: Writer) -> None:
    w.write(b"0\r\n\r\n")
    await w.drain()


async def _full(
    w: Writer, status: int, body: bytes, ctype: str = "application/json", extra: str = ""
) -> None:
    w.write(
        f"HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n{extra}\r\n".encode()
        + body
    )
    await w.drain()


async def malformed(w: Writer) -> None:
    await _head(w)
    body = b": keep\n\ngarbage without colon\nfoo: bar\ndata: {not json\n\ndata: [1, 2]\n\n"
    await _chunk(w, body + _delta("*Hi*") + _delta(" there", finish="stop") + _sse("[DONE]"))
    await _end(w)


async def non_utf8(w: Writer) -> None:
    await _head(w)
    await _chunk(
        w,
        b'data: {"provider":"P","choices":[{"delta":{"content":"ol\xff\xfe!"}}]}\n\n'
        + _sse("[DONE]"),
    )
    await _end(w)


async def bom_stream(w: Writer) -> None:
    await _head(w)
    await _chunk(
        w,
        b"\xef\xbb\xbf"
        + _delta("*Hi*", finish="stop")
        + b"data: \xef\xbb\xbf{}\n\n"
        + _sse("[DONE]"),
    )
    await _end(w)


async def bom_error(w: Writer) -> None:
    body = "\ufeff" + json.dumps(
        {
            "error": {
                "code": 429,
                "message": "slow down",
                "metadata": {"error_type": "rate_limit_exceeded"},
            }
        }
    )
    await _full(w, 429, body.encode(), extra="Retry-After: 3\r\n")


async def huge(w: Writer) -> None:
    await _head(w)
    piece = _delta("x" * 16_000)
    for _ in range(10_000_000 // len(piece) + 1):  # ~10 MB
        await _chunk(w, piece)
    await _chunk(w, _sse("[DONE]"))
    await _end(w)


async def huge_line(w: Writer) -> None:
    await _head(w)
    for _ in range(160):  # 10 MB in one line, never a newline
        await _chunk(w, b"data: " + b"y" * 64_000)
    await _end(w)


async def huge_error(w: Writer) -> None:
    await _head(w, 500, "application/json")
    for _ in range(160):
        await _chunk(w, b"z" * 64_000)
    await _end(w)


async def never_ending(w: Writer) -> None:
    await _head(w)
    for _ in range(2_000):
        await _chunk(w, _delta("la "))
        await asyncio.sleep(0.01)


async def keepalive_forever(w: Writer) -> None:
    await _head(w)
    for _ in range(2_000):
        await _chunk(w, b": OPENROUTER PROCESSING\n\n")
        await asyncio.sleep(0.02)


async def no_headers(w: Writer) -> None:
    await asyncio.sleep(30)


async def reset_mid(w: Writer) -> None:
    await _head(w)
    await _chunk(w, _delta("*She"))
    w.transport.abort()


async def cut_clean(w: Writer) -> None:
    await _head(w)
    await _chunk(w, _delta("*She smiles*"))
    await _end(w)  # a proper end of body, but no [DONE]


async def in_band_502(w: Writer) -> None:
    await _head(w)
    err = {"id": "g", "provider": "P", "error": {"code": 502, "message": "Provider returned error", "metadata": {"error_type": "provider_unavailable"}},
           "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}]}  # fmt: skip
    await _chunk(w, _delta("*She") + _sse(err))
    await _end(w)


async def misrouted(w: Writer) -> None:
    await _head(w)
    await _chunk(w, _delta("*She smiles*", provider="Other", finish="stop") + _sse("[DONE]"))
    await _end(w)


async def sse_as_text_plain(w: Writer) -> None:
    await _head(w, 200, "text/plain")
    await _chunk(w, _delta("*Hi*", finish="stop") + _sse("[DONE]"))
    await _end(w)


async def plain_json(w: Writer) -> None:
    body = {
        "id": "g",
        "provider": "P",
        "choices": [{"message": {"content": "*Hi* all"}, "finish_reason": "stop"}],
    }
    await _full(w, 200, json.dumps(body).encode())


async def list_401(w: Writer) -> None:
    await _full(w, 401, b'{"error": {"code": 401, "message": "No auth credentials found"}}')


async def list_malformed(w: Writer) -> None:
    await _full(w, 200, b'{"data": {"endpoints": [{"tag": "x"}]}}')


async def list_503(w: Writer) -> None:
    await _full(w, 503, b"\xff\xfe not json", extra="Retry-After: 5\r\n")


async def list_huge(w: Writer) -> None:
    await _head(w, 200, "application/json")
    for _ in range(100):
        await _chunk(w, b" " * 64_000)
    await _end(w)


SCENARIOS: dict[str, Callable[[Writer], Awaitable[None]]] = {f.__name__: f for f in (
    malformed, non_utf8, bom_stream, bom_error, huge, huge_line, huge_error, never_ending, keepalive_forever,
    no_headers, reset_mid, cut_clean, in_band_502, misrouted, plain_json, sse_as_text_plain, list_401, list_malformed, list_503, list_huge,
)}  # fmt: skip


@asynccontextmanager
async def raw_server() -> AsyncIterator[str]:
    """A raw HTTP/1.1 server; the first path segment of a request names its scenario."""
    tasks: set[asyncio.Task[None]] = set()

    async def handle(reader: asyncio.StreamReader, writer: Writer) -> None:
        tasks.add(asyncio.current_task())  # type: ignore[arg-type]
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            path = lines[0].split(" ")[1]
            length = next(
                (
                    int(v)
                    for k, _, v in (ln.partition(":") for ln in lines[1:])
                    if k.lower() == "content-length"
                ),
                0,
            )
            if length:
                await reader.readexactly(length)
            await SCENARIOS[path.strip("/").split("/")[0]](writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.transport.abort()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()


async def _probe(scenario: str, **client_kw: Any) -> tuple[Transcript, float]:
    kw: dict[str, Any] = {"ttft_threshold_s": 1.0, "total_timeout_s": 3.0, **client_kw}
    async with (
        raw_server() as root,
        ProbeClient(f"{root}/{scenario}", "sk-test-secret", ProbeConfig(**kw)) as client,
    ):
        started = time.monotonic()
        t = await client.probe(EP, Contract.REFUSAL, MSGS, locale="en")
        return t, time.monotonic() - started


async def test_c3_malformed_sse_lines_counted() -> None:
    """Bad input: junk SSE lines and non-object JSON are counted; the good content still arrives."""
    t, _ = await _probe("malformed")
    assert (t.text, t.done, t.finish_reason) == ("*Hi* there", True, "stop")
    assert t.malformed_lines >= 4 and t.keepalives == 1
    assert classify_transport(t) is None and judge_refusal(t, "en").status is S.PASS


async def test_c7_non_utf8_bytes_become_replacement_chars() -> None:
    """Bad input: non-UTF-8 bytes are decoded with U+FFFD (encoding evidence), never a crash."""
    t, _ = await _probe("non_utf8")
    assert t.non_utf8_lines == 1 and "\ufffd" in t.text and t.done


async def test_c2_bom_stream_and_bom_error_body() -> None:
    """Bad input: a BOM at stream start is dropped; a BOM before an error envelope still parses (with Retry-After)."""
    t, _ = await _probe("bom_stream")
    assert t.text == "*Hi*" and t.done and t.malformed_lines == 1  # `data: <BOM>{}` is not JSON
    t, _ = await _probe("bom_error")
    assert t.http_status == 429 and t.error is not None
    assert (t.error.error_type, t.error.retry_after_s, t.error.message) == (
        "rate_limit_exceeded",
        3.0,
        "slow down",
    )
    o = classify_transport(t)
    assert o is not None and (o.status, o.reason) == (S.TRANSPORT, "http_429")


@pytest.mark.parametrize("scenario", ["huge", "huge_line"])
async def test_c2_ten_megabytes_bounded(scenario: str) -> None:
    """Bad input: a 10 MB response stops at the byte bound (1 MB) with bounded memory and time."""
    tracemalloc.start()
    try:
        t, elapsed = await _probe(scenario, total_timeout_s=20.0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert t.byte_limit_hit and t.transport_error == "byte_limit"
    assert t.bytes_received <= 1_000_000 + 70_000
    assert peak < 12_000_000, peak
    assert elapsed < 10.0
    o = classify_transport(t)
    assert o is not None and o.status is S.TRANSPORT


async def test_c2_huge_error_body_bounded() -> None:
    """Bad input: a 10 MB non-JSON 500 body is read only up to the error-body bound."""
    t, _ = await _probe("huge_error")
    assert t.http_status == 500 and t.byte_limit_hit and t.bytes_received <= 64_000
    o = classify_transport(t)
    assert o is not None and (o.status, o.reason) == (S.TRANSPORT, "http_500")


async def test_c2_never_ending_stream_hits_time_limit() -> None:
    """Bad input: a stream that never ends (20 s of text) stops at the total time bound
    (1.5 s, not the 1 s first-token one) and is transport."""
    t, _ = await _probe("never_ending", total_timeout_s=1.5)
    assert t.time_limit_hit and t.transport_error is TransportCode.TIME_LIMIT
    assert t.text.startswith("la ") and not t.done and not t.gave_up_waiting
    assert t.total_s is not None and t.total_s >= 1.5 - TIMER_SLACK_S  # not cut at 1 s
    assert t.total_s < 1.5 + BOUND_MARGIN_S  # cut by the bound, not by the stream's end
    assert judge_latency(t, 1.0).status is S.PASS  # text came quickly; only the end never did


async def test_c3_keepalives_forever_is_latency_failure() -> None:
    """C3: keep-alive comments are not tokens: no text within the threshold fails latency."""
    t, _ = await _probe("keepalive_forever", ttft_threshold_s=0.6)
    assert t.gave_up_waiting and t.ttft_s is None and t.keepalives >= 5
    assert not t.time_limit_hit and t.transport_error is None
    assert t.total_s is not None and t.total_s >= 0.6 - TIMER_SLACK_S  # waited the threshold
    assert t.total_s < 0.6 + BOUND_MARGIN_S  # then gave up, not at the 3 s total bound
    o = judge_latency(t, 0.6)
    assert (o.status, o.reason) == (S.FAIL, "no_first_token")
    assert classify_transport(t) is None


async def test_c2_no_headers_is_read_timeout() -> None:
    """Q1: a server that accepts but never answers is a transport read timeout within the threshold."""
    t, elapsed = await _probe("no_headers", ttft_threshold_s=0.5)
    assert t.transport_error == "read_timeout" and t.http_status is None and elapsed < 1.5
    assert judge_latency(t, 0.5).status is S.TRANSPORT


@pytest.mark.parametrize(
    ("scenario", "reason"),
    [
        ("reset_mid", "remote_protocol_error"),  # the peer closed mid-body
        ("cut_clean", "stream_cut"),
        ("in_band_502", "in_band_502"),
    ],
)
async def test_c2_cuts_resets_in_band_errors_are_transport(scenario: str, reason: str) -> None:
    """Q1/C2: a reset, a stream ended without [DONE] and an in-band 502 chunk are transport, never quality."""
    t, _ = await _probe(scenario)
    o = classify_transport(t)
    assert o is not None and (o.status, o.reason) == (S.TRANSPORT, reason), t
    assert judge_refusal(t, "en").status is S.TRANSPORT


async def test_c2_misrouted_and_plain_json() -> None:
    """C2: another provider's answer is misrouted; a non-streaming JSON body is still read."""
    t, _ = await _probe("misrouted")
    assert t.served_by == "Other" and judge_refusal(t, "en").status is S.MISROUTED
    t, _ = await _probe("plain_json")
    assert (t.text, t.done, t.finish_reason) == ("*Hi* all", True, "stop")
    t, _ = await _probe("sse_as_text_plain")
    assert (t.text, t.done) == ("*Hi*", True)


@pytest.mark.parametrize(
    ("scenario", "error", "status"),
    [
        ("list_401", DiscoveryAuthError, 401),
        ("list_malformed", MalformedDiscoveryPayload, 200),
        ("list_503", DiscoveryTransportError, 503),
        ("list_huge", MalformedDiscoveryPayload, 200),
    ],
)
async def test_c1_discovery_bad_answers_typed(
    scenario: str, error: type[Exception], status: int
) -> None:
    """C1: 401, malformed payloads, 503 (+Retry-After) and oversized listings raise typed errors without the key."""
    async with raw_server() as root, ProbeClient(f"{root}/{scenario}", "sk-test-secret") as client:
        with pytest.raises(error) as info:
            await client.discover("a/m")
    assert getattr(info.value, "status", None) == status
    assert "sk-test-secret" not in str(info.value) and "sk-test-secret" not in repr(info.value)
    if scenario == "list_503":
        assert getattr(info.value, "retry_after_s", None) == 5.0
