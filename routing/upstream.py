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
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
from pydantic import SecretStr

from probes.types import ErrorInfo
from routing.backoff import parse_retry_after
from routing.deadline import AttemptBudget
from routing.response import StreamAssembler, parse_error


class MalformedStream(Exception):
    """An SSE data line that is not JSON: an invalid successful response."""


class UpstreamCall:
    """One in-flight attempt. Use `async with`; `start()` then `content()`."""

    def __init__(
        self, client: httpx.AsyncClient, body: dict[str, Any], budget: AttemptBudget
    ) -> None:
        self._client = client
        self._body = body
        self._budget = budget
        self._response: httpx.Response | None = None
        self._stream_cm: Any = None
        self.assembler = StreamAssembler()
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
        raw = await self._response.aread()
        retry_after = parse_retry_after(
            self._response.headers.get("retry-after"), now_unix=time.time()
        )
        try:
            payload = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            payload = {}
        info = parse_error(payload, in_band=False, retry_after_s=retry_after)
        if info.code is None or info.code != self._response.status_code:
            info = info.model_copy(update={"code": self._response.status_code})
        return info

    async def content(self) -> AsyncIterator[str]:
        """Yield content pieces as they arrive; tool-call deltas are assembled silently.

        Ends normally at `[DONE]`; a stream that ends without it leaves
        `assembler.completion.done` False (a cut). Raises httpx errors as they come.
        """
        assert self._response is not None, "start() first"
        lines = _sse_lines(self._response.aiter_bytes())
        async for line in lines:
            if not line.startswith(b"data:"):
                continue  # keep-alive comments (`:`), event/id fields, blank lines
            data = line[5:].strip()
            if data == b"[DONE]":
                self.assembler.finish()
                # read to the end of the body so the connection goes back to the pool
                async for _ in lines:
                    pass
                return
            try:
                chunk = json.loads(data.decode("utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError):
                raise MalformedStream("an SSE data line is not JSON") from None
            if not isinstance(chunk, dict):
                raise MalformedStream("an SSE data line is not an object")
            piece = self.assembler.feed(chunk)
            if piece or self.assembler.completion.tool_calls:
                self.output_started = True
            if self.assembler.completion.error is not None:
                self.output_started = True
                return
            if piece:
                yield piece


async def _sse_lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Split a byte stream into lines (LF or CRLF); cheaper than httpx's text decoding path."""
    buffer = b""
    async for chunk in chunks:
        buffer += chunk
        if b"\n" not in chunk:
            continue
        *complete, buffer = buffer.split(b"\n")
        for line in complete:
            yield line.rstrip(b"\r")
    if buffer:
        yield buffer.rstrip(b"\r")


class Upstream:
    """A pooled client for an OpenRouter-compatible base URL."""

    def __init__(
        self,
        base_url: str,
        api_key: SecretStr | None,
        *,
        max_connections: int = 200,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        headers = {"Content-Type": "application/json", "X-Title": "provider-canary gateway"}
        if api_key is not None:
            headers["Authorization"] = f"Bearer {api_key.get_secret_value()}"
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
        return UpstreamCall(self._client, {**body, "stream": True}, budget)

    async def aclose(self) -> None:
        await self._client.aclose()
