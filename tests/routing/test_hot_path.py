"""The gateway's hot path (issue 26 item 2) keeps its bounds: httptools on uvloop still
refuses a request head over 16 KB and answers pipelined requests; a reply's head and body
leave in one send; the fleet writes an instant reply in one piece (no sub-millisecond sleep
between its writes); an event row is its record's fields as they are; the breaker board's
outcome window is kept in place, exactly as the pure one; an answer's bookkeeping runs
after it has left, and runs when it could not be sent."""

from __future__ import annotations

import asyncio
import socket
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import SecretStr

from ground.settings import BreakerConfig, GatewayConfig
from routing.breaker import BreakerBoard, _added, _prune
from routing.deadline import AttemptBudget
from routing.errors import FailureClass
from routing.events import EventLog, _row
from routing.gateway import create_app
from routing.records import AttemptRecord, RequestRecord, SuspectRecord
from routing.serving import MAX_HEAD_BYTES, CoalescingTransport, gateway_config, run_serving
from routing.upstream import Upstream
from tests.fixtures.fleet import FleetHandle
from tests.fixtures.routing import ServedApp, chat_body, make_router, routing_scenario

GW = "gw-hot-key"


async def _served(fleet: FleetHandle) -> ServedApp:
    app = create_app(make_router(fleet.base_url, fleet.key), GatewayConfig(keys=[GW]))
    return ServedApp(app, gateway_config(app, GatewayConfig(keys=[GW]), host="127.0.0.1", port=0))


async def _exchange(url: str, raw: bytes, timeout_s: float = 5.0) -> bytes:
    """Send `raw` on one connection; everything the server sent until it closed (or went
    quiet for half a second)."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(raw)
    await writer.drain()
    data = b""
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                try:
                    chunk = await asyncio.wait_for(reader.read(65536), 0.5)
                except TimeoutError:
                    break
                if not chunk:
                    break
                data += chunk
    finally:
        writer.close()
    return data


async def test_issue26_a_request_head_over_16_kb_is_cut_and_one_below_is_answered(
    fleet: FleetHandle,
) -> None:
    """httptools has no head bound of its own: the gateway's protocol refuses a head past
    MAX_HEAD_BYTES (400, connection closed) whether it arrives whole or never ends, and
    answers a head just below it."""
    async with await _served(fleet) as s:
        big = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * MAX_HEAD_BYTES + b"\r\n\r\n"
        near = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 15_000 + b"\r\n\r\n"
        assert (await _exchange(s.url, big)).startswith(b"HTTP/1.1 400")
        endless = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * (2 * MAX_HEAD_BYTES)
        cut = await _exchange(s.url, endless)
        assert cut == b"" or cut.startswith(b"HTTP/1.1 400"), cut[:80]
        assert (await _exchange(s.url, near)).startswith(b"HTTP/1.1 200")


async def test_issue26_pipelined_requests_are_both_answered(fleet: FleetHandle) -> None:
    """Two requests in one write get two answers, in order (the head deadline is not armed
    while a pipelined request is waiting)."""
    async with await _served(fleet) as s:
        one = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
        data = await _exchange(s.url, one + one)
    assert data.count(b"HTTP/1.1 200") == 2


def test_issue26_the_cli_serves_on_uvloop() -> None:
    """`run_serving` runs the gateway's coroutine on uvloop's event loop."""
    seen: list[str] = []

    async def main() -> None:
        seen.append(type(asyncio.get_running_loop()).__module__)

    run_serving(main())
    assert seen and seen[0].startswith("uvloop")


async def test_issue26_an_instant_reply_reaches_the_gateway_in_one_piece(
    fleet: FleetHandle,
) -> None:
    """Tokens due within the loop's timer resolution go out in one write: the upstream
    client reads an instant reply's whole content as one piece (it was two, a millisecond
    apart: the fleet slept 59 us, which the loop rounds up to 1 ms)."""
    scenario = routing_scenario()
    for model in scenario["models"]:
        for ep in model["endpoints"]:
            ep["timing"] = {"ttft_s": 0.0, "tokens_per_s": 1_000_000.0, "jitter": 0.0}
    fleet.load(scenario)
    upstream = Upstream(fleet.base_url, SecretStr(fleet.key))
    body = {"model": "acme/alpha", "messages": [{"role": "user", "content": "Go on."}]}
    call = upstream.call(body, AttemptBudget(connect_s=2, ttft_s=None, total_s=5))
    try:
        assert await call.start() is None
        pieces = [piece async for piece in call.content()]
    finally:
        await call.aclose()
        await upstream.aclose()
    assert len(pieces) == 1 and len(pieces[0]) > 40, pieces


def test_issue26_an_event_row_is_its_records_fields() -> None:
    """The flush thread's row of each record is `asdict` of it, its time in UTC (a shallow
    copy: the fields are plain values)."""
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    records: list[AttemptRecord | RequestRecord | SuspectRecord] = [
        AttemptRecord("op", "at-1", 0, "chat", "alpha", "acme/alpha", provider="A", at=at),
        RequestRecord("op", "chat", 1, "accepted", final_route="alpha", at=at),
        SuspectRecord("acme/alpha", "A", "start", "ejected", 3, 20, 0, 60, 0.01, until=at, at=at),
    ]
    for record in records:
        assert _row(record) == asdict(record)


async def test_issue26_a_reply_head_and_body_leave_in_one_send() -> None:
    """Over a real socket: what is written within one turn of the loop is held until the end
    of the turn and then sent at once, in order; closing sends what is held first."""
    loop = asyncio.get_running_loop()
    ours, peer = socket.socketpair()
    peer.setblocking(False)
    transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)
    coalescing = CoalescingTransport(transport, loop)
    try:
        coalescing.write(b"HTTP/1.1 200 OK\r\n\r\n")
        coalescing.write(b"{}")
        try:
            early = peer.recv(100)
        except BlockingIOError:
            early = b""
        assert early == b""  # nothing left before the turn ended
        await asyncio.sleep(0.05)
        assert peer.recv(100) == b"HTTP/1.1 200 OK\r\n\r\n{}"
        coalescing.write(b"last")
        coalescing.close()
        await asyncio.sleep(0.05)
        assert peer.recv(100) == b"last"
    finally:
        transport.close()
        peer.close()


async def test_issue26_the_plain_chat_endpoint_leaves_the_other_methods_to_starlette(
    fleet: FleetHandle,
) -> None:
    """`POST /v1/chat/completions` is served without Starlette's router; a GET on the same
    path is still Starlette's 405, and a client gone before its body is no error: the next
    request on a new connection is answered."""
    async with await _served(fleet) as s:
        get = await _exchange(s.url, b"GET /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n")
        assert get.startswith(b"HTTP/1.1 405")
        host, port = s.url.removeprefix("http://").split(":")
        _, writer = await asyncio.open_connection(host, int(port))
        writer.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n"
            b"Authorization: Bearer " + GW.encode() + b"\r\n\r\n{"
        )
        await writer.drain()
        writer.close()  # gone with its body unsent
        await asyncio.sleep(0.2)
        ok = await _exchange(s.url, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert ok.startswith(b"HTTP/1.1 200")


@settings(max_examples=200, deadline=None)
@given(
    events=st.lists(
        st.tuples(st.floats(0, 20, allow_nan=False), st.sampled_from([None, *FailureClass])),
        max_size=80,
    )
)
def test_issue26_the_boards_outcome_window_is_the_pure_one(
    events: list[tuple[float, FailureClass | None]],
) -> None:
    """The board keeps its route's outcomes in place (an append per verdict, not a copy of
    the window): after every verdict they are exactly what the pure `_added` / `_prune` give."""
    board = BreakerBoard(BreakerConfig(window_s=30, consecutive_failures=1000))
    expected: tuple[tuple[float, bool], ...] = ()
    now = 0.0
    for dt, failure in events:
        now += dt
        board.record("r", failure, now)
        if failure is None or failure.counts_against_route:
            expected = _added(_prune(expected, now, 30), (now, failure is not None))
        assert tuple(board.windows.get(("r", ""), ())) == expected


async def _ask(app: Any, send: Any) -> None:
    """One non-streamed chat request straight into the ASGI app, answered through `send`."""
    body = orjson.dumps(chat_body())
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions",
        "query_string": b"", "root_path": "", "client": ("127.0.0.1", 1), "server": ("x", 80),
        "headers": [(b"authorization", f"Bearer {GW}".encode()), (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode())],
    }  # fmt: skip
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    await app(scope, receive, send)


async def test_issue26_an_answers_bookkeeping_runs_after_it_has_left(
    fleet: FleetHandle, ledger_url: str
) -> None:
    """The router's verdict, metrics and events of an accepted answer wait until its body
    was sent (the client does not wait for them), and then they are all there."""
    fleet.load(routing_scenario())
    log = EventLog(ledger_url)
    router = make_router(fleet.base_url, fleet.key, events=log)
    app = create_app(router, GatewayConfig(keys=[GW]))
    seen: list[tuple[str, int]] = []

    async def send(message: dict[str, Any]) -> None:
        seen.append((message["type"], len(log._buffer)))

    await _ask(app, send)
    assert seen == [("http.response.start", 0), ("http.response.body", 0)]
    assert sorted(type(r).__name__ for r in log._buffer) == ["AttemptRecord", "RequestRecord"]
    assert router.metrics.snapshot()["requests"] == 1
    assert "alpha" in router.health.health  # the verdict reached the route's health
    await router.upstream.aclose()


async def test_issue26_an_answers_bookkeeping_runs_when_its_reply_cannot_be_sent(
    fleet: FleetHandle, ledger_url: str
) -> None:
    """A reply that fails to go out (the connection broke under it) still leaves its
    attempt and request recorded: the upstream answered and billed."""
    fleet.load(routing_scenario())
    log = EventLog(ledger_url)
    router = make_router(fleet.base_url, fleet.key, events=log)
    app = create_app(router, GatewayConfig(keys=[GW]))

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            raise OSError("connection reset under the reply")

    with pytest.raises(OSError):
        await _ask(app, send)
    assert sorted(type(r).__name__ for r in log._buffer) == ["AttemptRecord", "RequestRecord"]
    await router.upstream.aclose()
