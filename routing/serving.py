"""How the gateway is served: uvicorn (h11) with bounds on slow or idle clients.

    gateway_config(app, settings.gateway, host=..., port=...)

- `timeout_keep_alive` (settings.gateway.keep_alive_s): an idle connection between
  requests is closed after this;
- a header timeout (settings.gateway.header_timeout_s): a connection that has not sent a
  complete request head within this of opening (or of its previous response) is closed.
  uvicorn has no such timeout of its own (its keep-alive timer is disarmed by the first byte
  of a request), so one byte every few seconds would hold a connection forever;
  `HeaderTimeoutH11Protocol` adds it;
- h11's `max_incomplete_event_size` (16 KB, uvicorn's default) bounds the request head;
- the body: `create_app` (same `GatewayConfig`) answers 408 to a body that has not fully
  arrived in time (settings.gateway.body_timeout_s), and 413 past its size limit.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from ground.settings import GatewayConfig


class HeaderTimeoutH11Protocol(H11Protocol):
    """uvicorn's h11 protocol plus a deadline on each request head (see module docstring);
    made with its deadline by `header_timeout_protocol`."""

    header_timeout_s: float

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None

    def _arm_header_timer(self) -> None:
        self._disarm_header_timer()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._header_timed_out)

    def _disarm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_timed_out(self) -> None:
        self._header_timer = None
        waiting = self.conn.their_state is h11.IDLE or (
            self.cycle is not None and self.cycle.response_complete  # answered, body unread
        )
        if waiting and not self.transport.is_closing():
            self.transport.close()  # no head within the limit: drop the connection

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        answered = self.cycle is not None and self.cycle.response_complete
        if self.conn.their_state is not h11.IDLE and not answered:  # a head is complete
            self._disarm_header_timer()
        # else: still waiting for a head, or answered with its body unread: bytes that
        # trickle in (which disarm uvicorn's keep-alive timer) do not disarm this one

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_header_timer()  # the next request's head has the same deadline

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_timer()
        super().connection_lost(exc)


def header_timeout_protocol(seconds: float) -> type[H11Protocol]:
    """The h11 protocol class with a `seconds` head deadline."""
    return type(
        "HeaderTimeoutH11Protocol", (HeaderTimeoutH11Protocol,), {"header_timeout_s": seconds}
    )


def gateway_config(
    app: Any, config: GatewayConfig, *, host: str, port: int, log_level: str = "warning"
) -> uvicorn.Config:
    """The uvicorn config the gateway is served with (`canary gateway serve`, tests);
    `config`: settings.gateway (`keep_alive_s`, `header_timeout_s`)."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        http=header_timeout_protocol(config.header_timeout_s),
        loop="asyncio",
        timeout_keep_alive=max(1, round(config.keep_alive_s)),
    )
