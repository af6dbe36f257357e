"""The upstream client: one streaming chat request per attempt, nothing more.

`httpx.AsyncClient` with `retries=0` on its transport: the router is the only
retry owner (SPEC R3). Every attempt gets timeouts cut to the remaining
deadline by the caller. The upstream is always asked to stream, so the router
sees time to first token, stream cuts (no `[DONE]`), in-band error chunks and
the reply start before anything reaches a client; the assembled `Completion`
is what the acceptance pipeline reads.

The upstream key lives in the client's default headers only; it is never part
of a repr, an error or an event.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import httpx
from pydantic import SecretStr

from routing.deadline import AttemptBudget
from routing.response import StreamAssembler
from wire import jsonio
from wire.errors import ErrorInfo, parse_error, unparseable
from wire.retry_after import parse_retry_after
from wire.sse import Event, SSEParser
from wire.text import Scrubber

ERROR_BODY_MAX_BYTES = 64_000  # default of settings.routing_max_error_body_bytes


class MalformedStream(Exception):
    """An SSE data line that is not JSON, or a line or reply over its cap: an invalid
    successful response."""


class UpstreamCall:
    """One in-flight attempt. Use `async with`; `start()` then `content()`."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        body: dict[str, Any],
        budget: AttemptBudget,
        *,
        scrub: Scrubber,
        max_line_bytes: int,
        max_reply_bytes: int,
        max_error_bytes: int = ERROR_BODY_MAX_BYTES,
    ) -> None:
        self._client = client
        self._max_error_bytes = max_error_bytes
        self._body = body
        self._budget = budget
        self._scrub = scrub
        self._max_line_bytes = max_line_bytes
        self._max_reply_bytes = max_reply_bytes
        self._response: httpx.Response | None = None
        self._stream_cm: Any = None
        self.assembler = StreamAssembler(scrub)
        self.output_started = False  # any content/tool delta seen: a cut now is ambiguous
        self.headers_received = False
        self.status_code: int | None = None

    async def __aenter__(self) -> UpstreamCall:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._stream_cm is not None:
            cm, self._stream_cm = self._stream_cm, None
            with contextlib.suppress(Exception):  # a broken stream; already classified
                await cm.__aexit__(None, None, None)

    async def start(self) -> ErrorInfo | None:
        """Send the request and read the status; an error status returns its ErrorInfo."""
        b = self._budget
        timeout = httpx.Timeout(connect=max(0.001, b.connect_s), read=max(0.001, b.total_s),
                                write=max(0.001, b.total_s), pool=max(0.001, b.connect_s))  # fmt: skip
        self._stream_cm = self._client.stream(
            "POST", "/chat/completions", json=self._body, timeout=timeout
        )
        self._response = await self._stream_cm.__aenter__()
        self.headers_received = True
        self.status_code = self._response.status_code
        if self._response.status_code == 200:
            return None
        raw = await _read_capped(self._response, self._max_error_bytes)
        status = self._response.status_code
        retry_after = parse_retry_after(
            self._response.headers.get("retry-after"), datetime.now(UTC)
        )
        try:
            payload = jsonio.loads(raw) if raw is not None else None
        except ValueError:
            payload = None
        info = parse_error(payload, scrub=self._scrub, retry_after_s=retry_after) or unparseable(
            code=status, retry_after_s=retry_after
        )
        if info.code != status:
            info = info.model_copy(update={"code": status})
        return info

    async def content(self) -> AsyncIterator[str]:
        """Yield content pieces as they arrive (one per network read that carried content);
        tool-call deltas are assembled silently.

        Ends normally at `[DONE]`; a stream that ends without it leaves
        `assembler.completion.done` False (a cut). An in-band error chunk ends it too (what
        came before the error in the same read is still yielded). Raises httpx errors as
        they come.
        """
        assert self._response is not None, "start() first"
        parser = SSEParser(max_line_bytes=self._max_line_bytes)
        assembler = self.assembler
        received = 0
        done = False
        async for raw in self._response.aiter_bytes():
            received += len(raw)
            if done:  # read to the end so the connection goes back to the pool
                if received > self._max_reply_bytes:
                    return  # closing the stream drops the connection instead
                continue
            if received > self._max_reply_bytes:
                raise MalformedStream(f"reply larger than {self._max_reply_bytes} bytes")
            failed = False
            for item in parser.feed(raw):
                if type(item) is not Event:
                    continue  # keep-alive comments (`:`)
                if item.data == "[DONE]":
                    done = True
                    break
                try:
                    chunk = jsonio.loads(item.data)
                except ValueError:
                    raise MalformedStream("an SSE data line is not JSON") from None
                if not isinstance(chunk, dict):
                    raise MalformedStream("an SSE data line is not an object")
                assembler.feed(chunk)
                if assembler.completion.error is not None:
                    failed = True
                    break
            if assembler.raw_content or assembler.completion.tool_calls or failed:
                self.output_started = True
            piece = assembler.finish() if done else assembler.release()
            if piece:
                yield piece
            if failed:
                return
            if parser.overlong_lines:
                raise MalformedStream(f"an SSE line is longer than {self._max_line_bytes} bytes")


async def _read_capped(response: httpx.Response, limit: int) -> bytes | None:
    """The body up to `limit` bytes; None (and the rest unread) when it is longer."""
    buf = bytearray()
    async for chunk in response.aiter_bytes():
        buf.extend(chunk)
        if len(buf) > limit:
            return None
    return bytes(buf)


class Upstream:
    """A pooled client for an OpenRouter-compatible base URL."""

    def __init__(
        self,
        base_url: str,
        api_key: SecretStr | None,
        *,
        max_connections: int = 200,
        max_line_bytes: int = 1_000_000,
        max_reply_bytes: int = 8_000_000,
        max_error_bytes: int = ERROR_BODY_MAX_BYTES,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        """`max_error_bytes`, `max_line_bytes`, `max_reply_bytes`: the settings
        `routing_max_error_body_bytes`, `routing_max_line_bytes`, `routing_max_reply_bytes`."""
        headers = {"Content-Type": "application/json", "X-Title": "provider-canary gateway"}
        if api_key is not None:
            headers["Authorization"] = f"Bearer {api_key.get_secret_value()}"
        self.scrub = Scrubber(api_key.get_secret_value() if api_key is not None else None)
        self.max_line_bytes = max_line_bytes
        self.max_reply_bytes = max_reply_bytes
        self.max_error_bytes = max_error_bytes
        self.base_url = base_url.rstrip("/")
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            timeout=None,
            transport=transport or httpx.AsyncHTTPTransport(retries=0),
            limits=httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
        )

    def __repr__(self) -> str:
        return f"Upstream(base_url={self.base_url!r})"

    def call(self, body: dict[str, Any], budget: AttemptBudget) -> UpstreamCall:
        return UpstreamCall(
            self._client,
            {**body, "stream": True},
            budget,
            scrub=self.scrub,
            max_line_bytes=self.max_line_bytes,
            max_reply_bytes=self.max_reply_bytes,
            max_error_bytes=self.max_error_bytes,
        )

    async def aclose(self) -> None:
        await self._client.aclose()
