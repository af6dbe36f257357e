"""How the gateway is served: uvicorn with httptools (llhttp, C) on uvloop, with bounds on
slow, idle or oversized clients.

    gateway_config(app, settings.gateway, host=..., port=...)
    run_serving(main)   run the serving coroutine on uvloop's event loop

Chosen by measurement (issue 26, one run of `bench/bench_peers.py --levers` on two shared
cores): with h11 on asyncio's loop the gateway took 1.88 CPU-ms per request at 32 clients,
with httptools on uvloop 1.38 (httptools parses a request in C where h11 is pure Python;
uvloop's loop and transports cost less per read and write).

- `timeout_keep_alive` (settings.gateway.keep_alive_s): an idle connection between
  requests is closed after this;
- a header timeout (settings.gateway.header_timeout_s): a connection that has not sent a
  complete request head within this of opening (or of its previous response) is closed.
  uvicorn has no such timeout of its own (its keep-alive timer is disarmed by the first byte
  of a request), so one byte every few seconds would hold a connection forever;
  `HeaderTimeoutProtocol` adds it;
- the request head is at most `MAX_HEAD_BYTES` (16 KB, h11's bound): httptools itself has
  none, so a longer one is answered 400 and its connection closed, and so is a connection
  that sends more than that without completing a head (`HeaderTimeoutProtocol`);
- the body: `create_app` (same `GatewayConfig`) answers 408 to a body that has not fully
  arrived in time (settings.gateway.body_timeout_s), and 413 past its size limit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import uvicorn
import uvloop
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ground.settings import GatewayConfig

MAX_HEAD_BYTES = 16 * 1024  # h11's max_incomplete_event_size, uvicorn's default there


class CoalescingTransport:
    """A connection's transport whose writes within one turn of the event loop leave in one
    send: uvicorn writes a response's head and then its body, two system calls for every
    reply, where one carries both (issue 26: a send was the largest single cost per request
    in a profile; with two sends the gateway took 1.99 CPU-ms per request at 32 clients
    against 1.38 in one run of `bench/bench_peers.py --levers`). Writes are held until the
    end of the turn (`call_soon`), in order; closing sends what is held first. Everything
    else is the transport's own."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._held:
            self._loop.call_soon(self.flush)
        self._held.append(bytes(data))

    def flush(self) -> None:
        if self._held and not self._transport.is_closing():
            data = self._held[0] if len(self._held) == 1 else b"".join(self._held)
            self._transport.write(data)
        self._held.clear()

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class HeaderTimeoutProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol plus a deadline on each request head and a bound on its
    size (see module docstring); made with its deadline by `header_timeout_protocol`."""

    header_timeout_s: float

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None
        self._awaiting_head = True  # no complete head since the connection or last response
        self._pending_bytes = 0  # bytes received while awaiting it
        self._head_bytes = 0  # the head's URL and fields so far

    def _arm_header_timer(self) -> None:
        self._disarm_header_timer()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._header_timed_out)

    def _disarm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_timed_out(self) -> None:
        self._header_timer = None
        if self._awaiting_head and not self.transport.is_closing():
            self.transport.close()  # no head within the limit: drop the connection

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        coalescing = CoalescingTransport(transport, self.loop)
        super().connection_made(coalescing)  # type: ignore[arg-type]
        self._arm_header_timer()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        # bytes that trickle in while no head is complete (which disarm uvicorn's keep-alive
        # timer) disarm neither this timer nor the head's size bound
        if self._awaiting_head and not self.transport.is_closing():
            self._pending_bytes += len(data)
            if self._pending_bytes > MAX_HEAD_BYTES:  # no head, or one that never ends
                self.transport.close()

    def on_message_begin(self) -> None:
        self._head_bytes = 0
        super().on_message_begin()

    def on_url(self, url: bytes) -> None:
        self._count_head(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_head(len(name) + len(value) + 4)
        super().on_header(name, value)

    def _count_head(self, n: int) -> None:
        """A head larger than MAX_HEAD_BYTES, even one that arrived whole in one read, is
        refused: raised inside the parser, uvicorn answers 400 and closes the connection."""
        self._head_bytes += n
        if self._head_bytes > MAX_HEAD_BYTES:
            raise ValueError(f"request head over {MAX_HEAD_BYTES} bytes")

    def on_headers_complete(self) -> None:
        self._awaiting_head = False
        self._disarm_header_timer()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a pipelined request's head is already here: it is being answered
        self._awaiting_head, self._pending_bytes = True, 0
        self._arm_header_timer()  # the next request's head has the same deadline

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_timer()
        super().connection_lost(exc)


def header_timeout_protocol(seconds: float) -> type[HttpToolsProtocol]:
    """The httptools protocol class with a `seconds` head deadline."""
    return type("HeaderTimeoutProtocol", (HeaderTimeoutProtocol,), {"header_timeout_s": seconds})


def gateway_config(
    app: Any, config: GatewayConfig, *, host: str, port: int, log_level: str = "warning"
) -> uvicorn.Config:
    """The uvicorn config the gateway is served with (`canary gateway serve`, tests);
    `config`: settings.gateway (`keep_alive_s`, `header_timeout_s`). The loop is the
    caller's (`run_serving` in the CLI)."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        http=header_timeout_protocol(config.header_timeout_s),
        loop="uvloop",
        timeout_keep_alive=max(1, round(config.keep_alive_s)),
    )


def run_serving(main: Coroutine[Any, Any, None]) -> None:
    """Run the serving coroutine to its end on uvloop's event loop."""
    asyncio.run(main, loop_factory=uvloop.new_event_loop)
