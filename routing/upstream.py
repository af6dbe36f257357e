"""The upstream client: one streaming chat request per attempt, nothing more.

`aiohttp` (chosen by measurement over httpx: about half the CPU per streamed reply), one
pooled `ClientSession` per `Upstream` and event loop, made lazily inside the running loop:

- no retries: the router is the only retry owner (SPEC R3); aiohttp retries a stale
  keep-alive connection only for idempotent methods, and we only POST;
- no redirects followed, no `raise_for_status`: a status is ours to classify;
- the proxy the environment names (`HTTPS_PROXY` / `HTTP_PROXY` / `ALL_PROXY`, `NO_PROXY`
  honoured), read once when the `Upstream` is made, as httpx's `trust_env` did; otherwise
  `trust_env=False` (no `.netrc`, no per-request environment lookup); TLS trusts what httpx
  trusted: `SSL_CERT_FILE` / `SSL_CERT_DIR` when set, else certifi's bundle;
- `Accept-Encoding: gzip, deflate` pinned (what httpx sent; both decode it);
- the body is encoded as httpx encoded `json=` (compact UTF-8, NaN refused);
- a reply head of at most 128 lines of at most 16 KiB each (httpx allowed a 100 KiB head
  of any shape); a larger one is a `RemoteProtocolError`.

Every attempt gets timeouts cut to the remaining deadline by the caller (`AttemptBudget`):
connect, total, and two cuts of its own here (R13): no content (text or a tool call) within
`ttft_s` of sending the request raises `SlowFirstToken`, and once output started, no byte
for `stall_s` raises `StreamStalled` (our own cuts, not transport failures; the stall cut
holds for the whole stream, after its release to a client too: R15). The upstream is
always asked to stream, so the router sees time to first token, stream cuts (an end with
neither a finish reason nor `[DONE]`),
in-band error chunks and the reply start before anything reaches a client; the assembled
`Completion` is what the acceptance pipeline reads.

Transport failures leave this module as our own vocabulary (`routing.errors`: the
`UpstreamError` tree, each class with its `TransportCode`, and `MalformedStream`),
translated at this boundary through one table (`_AIOHTTP`, aiohttp's class -> ours;
`translate`), so `routing.classify` never sees a client library's exceptions. A test walks
every exception class aiohttp exports and fails unless each one has a row.

Bounds come from `ground.settings.RoutingConfig`, taken whole (`max_connections`,
`max_error_body_bytes`, `max_line_bytes`, `max_reply_bytes`, `max_malformed_events`). The upstream key lives in the
session's default headers only; it is never part of a repr, an error message (they are
scrubbed) or an event.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import ssl
import urllib.request
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any, NoReturn

import aiohttp
from aiohttp import http_exceptions
from pydantic import SecretStr
from yarl import URL

from ground.settings import RoutingConfig
from routing.deadline import AttemptBudget
from routing.errors import (
    ConnectError,
    ConnectTimeout,
    DecodingError,
    InvalidURL,
    MalformedStream,
    ReadError,
    ReadTimeout,
    RemoteProtocolError,
    SlowFirstToken,
    StreamStalled,
    UnsupportedProtocol,
    UpstreamError,
)
from routing.response import Completion, StreamAssembler
from wire import jsonio
from wire.errors import ErrorInfo, parse_error, unparseable
from wire.retry_after import parse_retry_after
from wire.sse import Event, SSEParser
from wire.text import Scrubber, upstream_text

# the reply head: aiohttp bounds each line and the number of lines (httpx bounded the whole
# head at 100 KiB); at most 16 KiB x 128 = 2 MiB held per response head
HEAD_LINE_MAX_BYTES = 16 * 1024
HEAD_MAX_FIELDS = 128
# An idle pooled connection is closed after this: shorter than the common 5 s server idle
# timeout (uvicorn's, so the fleet's). httpx (expiry 5 s) saw a close in flight by checking
# the socket before reuse; aiohttp does not, and a POST sent on a connection the server is
# closing fails (aiohttp retries only idempotent methods), so we let go first.
KEEPALIVE_S = 4.0
USAGE_ASKED = {"include_usage": True}  # every request's stream_options: the usage, always


# aiohttp's exceptions by exact type -> ours; `None` = not raised by a request of ours (a
# test walks every exception class aiohttp exports and fails unless each one has a row)
_AIOHTTP: dict[type[BaseException], type[UpstreamError] | None] = {
    aiohttp.ClientError: ReadError,
    aiohttp.ClientConnectionError: ReadError,  # "connection closed / lost"
    aiohttp.ClientOSError: ReadError,
    aiohttp.ClientConnectionResetError: ReadError,
    aiohttp.ServerConnectionError: ReadError,
    aiohttp.ClientConnectorError: ConnectError,
    aiohttp.ClientConnectorDNSError: ConnectError,
    aiohttp.ClientProxyConnectionError: ConnectError,
    aiohttp.ClientSSLError: ConnectError,
    aiohttp.ClientConnectorSSLError: ConnectError,
    aiohttp.ClientConnectorCertificateError: ConnectError,
    aiohttp.ServerFingerprintMismatch: ConnectError,
    aiohttp.ClientHttpProxyError: ConnectError,  # a proxy refused CONNECT (we set none)
    aiohttp.ConnectionTimeoutError: ConnectTimeout,
    aiohttp.ServerTimeoutError: ReadTimeout,
    aiohttp.SocketTimeoutError: ReadTimeout,
    aiohttp.ServerDisconnectedError: RemoteProtocolError,
    aiohttp.ClientPayloadError: RemoteProtocolError,  # or DecodingError, by its cause
    # we never raise_for_status: a ClientResponseError is aiohttp's parser refusing the head
    aiohttp.ClientResponseError: RemoteProtocolError,
    aiohttp.ContentTypeError: RemoteProtocolError,  # only from resp.json(), unused
    aiohttp.TooManyRedirects: RemoteProtocolError,  # redirects are not followed
    aiohttp.RedirectClientError: RemoteProtocolError,
    aiohttp.InvalidUrlRedirectClientError: RemoteProtocolError,
    aiohttp.NonHttpUrlRedirectClientError: RemoteProtocolError,
    aiohttp.WSServerHandshakeError: RemoteProtocolError,  # websockets, unused
    aiohttp.InvalidURL: InvalidURL,
    aiohttp.InvalidUrlClientError: InvalidURL,
    aiohttp.NonHttpUrlClientError: UnsupportedProtocol,
    http_exceptions.HttpProcessingError: RemoteProtocolError,  # normally wrapped by aiohttp
    # not raised by a request of ours: an upload tracker, websockets, multipart, warnings
    aiohttp.UploadAbortedError: None,
    aiohttp.WebSocketError: None,
    aiohttp.WSMessageTypeError: None,
    aiohttp.EofStream: None,
    aiohttp.BadContentDispositionHeader: None,
    aiohttp.BadContentDispositionParam: None,
}
_UNDECODABLE = (http_exceptions.ContentEncodingError, http_exceptions.DecompressSizeError)


def translate(exc: BaseException, scrub: Scrubber) -> BaseException:
    """An aiohttp exception -> ours (its message scrubbed and cut); any other exception is
    returned as it is (asyncio's and the standard library's are classified as they are)."""
    ours: type[UpstreamError] | None = None
    for t in type(exc).__mro__:
        if t in _AIOHTTP:
            ours = _AIOHTTP[t]
            break
    if ours is None:
        return exc
    if ours is RemoteProtocolError and isinstance(exc.__cause__, _UNDECODABLE):
        ours = DecodingError
    return ours(f"{type(exc).__name__}: {upstream_text(str(exc), scrub, 300)}")


def _raise_translated(exc: Exception, scrub: Scrubber) -> NoReturn:
    mine = translate(exc, scrub)
    if mine is exc:
        raise exc
    raise mine from None  # the cause may hold the request's headers (the key)


def _encode(body: dict[str, Any]) -> bytes:
    """The request body as httpx encoded `json=`: compact UTF-8, NaN and Infinity refused."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


class UpstreamCall:
    """One in-flight attempt. Use `async with`; `start()` then `content()`."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        url: URL,
        body: dict[str, Any],
        budget: AttemptBudget,
        *,
        scrub: Scrubber,
        max_line_bytes: int,
        max_reply_bytes: int,
        max_error_bytes: int,
        max_malformed_events: int,
        proxy: str | None = None,
    ) -> None:
        self._session = session
        self._url = url
        self._proxy = proxy
        self._max_error_bytes = max_error_bytes
        self._body = body
        self._budget = budget
        self._scrub = scrub
        self._max_line_bytes = max_line_bytes
        self._max_reply_bytes = max_reply_bytes
        self._max_malformed = max_malformed_events
        self._response: aiohttp.ClientResponse | None = None
        self.assembler = StreamAssembler(scrub)
        self.output_started = False  # any content/tool delta seen: a cut now is ambiguous
        self.headers_received = False
        self.status_code: int | None = None
        self.stall_s = budget.stall_s  # no byte this long once output started: a stall
        self.hold_s = budget.hold_s  # the longest the caller holds the start after output
        self._first_token_at: float | None = None  # loop time by which content must come

    async def __aenter__(self) -> UpstreamCall:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Give the connection back: to the pool when the reply was read to its end, else
        closed (an unread rest is never drained)."""
        if self._response is not None:
            response, self._response = self._response, None
            with contextlib.suppress(Exception):  # a broken stream; already classified
                response.release()

    async def start(self) -> ErrorInfo | None:
        """Send the request and read the status; an error status returns its ErrorInfo."""
        b = self._budget
        connect_s = max(0.001, b.connect_s)
        timeout = aiohttp.ClientTimeout(
            total=None, connect=connect_s, sock_connect=connect_s, sock_read=max(0.001, b.total_s)
        )
        loop = asyncio.get_running_loop()
        if b.ttft_s is not None:
            self._first_token_at = loop.time() + b.ttft_s
        first_token = asyncio.timeout_at(self._first_token_at)
        try:
            async with first_token:
                response = await self._session.post(
                    self._url,
                    data=_encode(self._body),
                    timeout=timeout,
                    allow_redirects=False,
                    proxy=self._proxy,
                )
        except Exception as exc:
            if isinstance(exc, TimeoutError) and first_token.expired():
                raise SlowFirstToken(f"no reply head within {b.ttft_s:.3f} s") from None
            _raise_translated(exc, self._scrub)
        self._response = response
        self.headers_received = True
        status = self.status_code = response.status
        if status == 200:
            return None
        raw = await self._read_capped(self._max_error_bytes)
        retry_after = parse_retry_after(response.headers.get("retry-after"), datetime.now(UTC))
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
        """Yield content pieces as they arrive (one per read: whatever the upstream has sent
        by then; the start gate decides the same however a reply is cut, a property test
        of issue 26); tool-call deltas are assembled silently.

        Ends normally at `[DONE]`, or at a clean end of the body after a finish reason (R15:
        a complete reply without `[DONE]`); a stream that ends otherwise leaves
        `assembler.completion.done` False (a cut). An in-band error chunk ends it too (what
        came before the error in the same read is still yielded). A `data:` event that is
        not a JSON object is skipped and counted; more than `max_malformed_events` of them,
        or any at an end with no finish reason, raise `MalformedStream`. Raises `UpstreamError`s (and `MalformedStream`) as they come.
        """
        assert self._response is not None, "start() first"
        stream = self._response.content
        parser = SSEParser(max_line_bytes=self._max_line_bytes)
        assembler = self.assembler
        received = 0
        done = False
        while True:
            raw = await self._next(stream)
            if not raw:  # the end of the reply: after a finish reason, a complete one
                piece = assembler.finish() if not done and _ends_clean(assembler, parser) else ""
                if piece:
                    yield piece
                return
            received += len(raw)
            if done:  # read to the end so the connection goes back to the pool
                if received > self._max_reply_bytes:
                    return  # closing the stream drops the connection instead
                continue
            if received > self._max_reply_bytes:
                raise MalformedStream(f"reply larger than {self._max_reply_bytes} bytes")
            datas: list[str] = []
            for item in parser.feed(raw):
                if type(item) is not Event:
                    continue  # keep-alive comments (`:`)
                if item.data == "[DONE]":
                    done = True
                    break
                datas.append(item.data)
            failed = False
            for chunk in self._objects(datas):
                assembler.feed(chunk)
                if assembler.completion.error is not None:
                    failed = True
                    break
            if done and not failed:
                _whole_despite_skipped(assembler.completion)
            if assembler.raw_content or assembler.completion.tool_calls or failed:
                self.output_started = True
                self._first_token_at = None
            piece = assembler.finish() if done else assembler.release()
            if piece:
                yield piece
            if failed:
                return
            if parser.overlong_lines:
                raise MalformedStream(f"an SSE line is longer than {self._max_line_bytes} bytes")

    def _objects(self, datas: list[str]) -> list[dict[str, Any]]:
        """The JSON objects among one read's `data:` payloads, in order; each one that is not
        JSON or not an object is skipped and counted (`Completion.malformed_events`), and one
        more than `max_malformed_events` in the reply raises `MalformedStream` (a cut)."""
        chunks, not_json = jsonio.loads_each(datas)  # up to the first that is not JSON
        objects = [c for c in chunks if type(c) is dict]
        skipped = len(chunks) - len(objects)
        if not_json is not None:  # the rest, one by one
            rest = datas[len(chunks) + 1 :]
            skipped += 1
            for data in rest:
                try:
                    value = jsonio.loads(data)
                except ValueError:
                    value = None
                if type(value) is dict:
                    objects.append(value)
                else:
                    skipped += 1
        if skipped:
            completion = self.assembler.completion
            completion.malformed_events += skipped
            if completion.malformed_events > self._max_malformed:
                raise MalformedStream(
                    f"{completion.malformed_events} SSE data events not a JSON object"
                    f" (at most {self._max_malformed} are skipped)"
                )
        return objects

    async def _next(self, stream: aiohttp.StreamReader) -> bytes:
        """What the upstream sent since the last read (b"" at its end): what is buffered
        already at once, else the wait for more, within the first-token or stall cut when
        one applies (bytes already here arrived in time: no timer is set for them); the
        client library's errors translated into ours."""
        try:
            buffered = stream.read_nowait()
            if buffered:
                return buffered
            if self._first_token_at is None and self.stall_s is None:
                return await stream.readany()
            return await self._timed(stream)
        except (SlowFirstToken, StreamStalled):
            raise
        except Exception as exc:
            _raise_translated(exc, self._scrub)

    async def _timed(self, stream: aiohttp.StreamReader) -> bytes:
        """One wait for bytes within the first-token deadline (before output) or the stall
        timeout (after output started)."""
        first = self._first_token_at is not None
        cut = asyncio.timeout_at(self._first_token_at) if first else asyncio.timeout(self.stall_s)
        try:
            async with cut:
                return await stream.readany()
        except TimeoutError:
            if not cut.expired():  # the client library's own read timeout
                raise
            if first:
                raise SlowFirstToken(
                    f"no content within {self._budget.ttft_s:.3f} s of the request"
                ) from None
            raise StreamStalled(f"no byte for {self.stall_s:.3f} s after output started") from None

    async def _read_capped(self, limit: int) -> bytes | None:
        """The body up to `limit` bytes; None (and the rest unread) when it is longer."""
        assert self._response is not None
        read = self._response.content.readany
        buf = bytearray()
        while True:
            try:
                chunk = await read()
            except Exception as exc:
                _raise_translated(exc, self._scrub)
            if not chunk:
                return bytes(buf)
            buf.extend(chunk)
            if len(buf) > limit:
                return None


def _whole_despite_skipped(completion: Completion) -> None:
    """At `[DONE]`: a reply with skipped `data:` events is whole only when a finish reason
    came (a skipped event may have been its end): else `MalformedStream`."""
    if completion.malformed_events and completion.finish_reason is None:
        raise MalformedStream(
            f"{completion.malformed_events} SSE data events not a JSON object, and no finish reason"
        )


def _ends_clean(assembler: StreamAssembler, parser: SSEParser) -> bool:
    """The body ended after a finish reason, with no in-band error and no event left
    unfinished: a complete reply even without `[DONE]` (R15); else the end is a cut."""
    c = assembler.completion
    return c.finish_reason is not None and c.error is None and not parser.pending


def env_proxy(url: URL) -> str | None:
    """The proxy the environment names for `url`, or None (none set, or `NO_PROXY` covers
    its host): `HTTPS_PROXY` / `HTTP_PROXY` by scheme, else `ALL_PROXY`, in either case."""
    proxies = urllib.request.getproxies_environment()
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]  # not in typeshed
    if not proxies or bypass(url.host or "", proxies):
        return None
    return proxies.get(url.scheme) or proxies.get("all")


def _tls_context() -> ssl.SSLContext:
    """What httpx trusted: `SSL_CERT_FILE` or `SSL_CERT_DIR` when set, else certifi's bundle."""
    if os.environ.get("SSL_CERT_FILE"):
        return ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    if os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context(capath=os.environ["SSL_CERT_DIR"])
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


class Upstream:
    """A pooled client for an OpenRouter-compatible base URL."""

    def __init__(
        self, base_url: str, api_key: SecretStr | None, config: RoutingConfig | None = None
    ) -> None:
        """`config`: settings.routing (its pool size and the bounds on what an upstream reply
        can make us hold)."""
        config = config or RoutingConfig()
        self._headers = {
            "Content-Type": "application/json",
            "Accept-Encoding": "gzip, deflate",
            "X-Title": "provider-canary gateway",
        }
        if api_key is not None:
            self._headers["Authorization"] = f"Bearer {api_key.get_secret_value()}"
        self.scrub = Scrubber(api_key.get_secret_value() if api_key is not None else None)
        self.max_connections = config.max_connections
        self.max_line_bytes = config.max_line_bytes
        self.max_reply_bytes = config.max_reply_bytes
        self.max_malformed_events = config.max_malformed_events
        self.max_error_bytes = config.max_error_body_bytes
        self.base_url = base_url.rstrip("/")
        self._url = URL(self.base_url + "/chat/completions")
        self.proxy = env_proxy(self._url)
        self._session: aiohttp.ClientSession | None = None
        self._session_loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"Upstream(base_url={self.base_url!r})"

    def _pool(self) -> aiohttp.ClientSession:
        """The session of the running loop, made on first use (aiohttp binds one to a loop)."""
        loop = asyncio.get_running_loop()
        if self._session is not None and self._session_loop is loop:
            return self._session
        if self._session is not None:  # another loop's (tests run several): let it go
            _abandon(self._session)
        connector = aiohttp.TCPConnector(
            limit=self.max_connections,
            limit_per_host=0,
            keepalive_timeout=KEEPALIVE_S,
            ssl=_tls_context(),
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            headers=self._headers,
            timeout=aiohttp.ClientTimeout(total=None),  # each call brings its budget
            trust_env=False,
            raise_for_status=False,
            max_line_size=HEAD_LINE_MAX_BYTES,
            max_field_size=HEAD_LINE_MAX_BYTES,
            max_headers=HEAD_MAX_FIELDS,
        )
        self._session_loop = loop
        return self._session

    def call(self, body: dict[str, Any], budget: AttemptBudget) -> UpstreamCall:
        """One attempt with `body`, always streamed and always asking for the usage (a plain
        OpenAI-compatible server sends it only when asked; OpenRouter always does): the
        attempt's tokens and cost, the client's usage."""
        return UpstreamCall(
            self._pool(),
            self._url,
            {**body, "stream": True, "stream_options": USAGE_ASKED},
            budget,
            scrub=self.scrub,
            max_line_bytes=self.max_line_bytes,
            max_reply_bytes=self.max_reply_bytes,
            max_error_bytes=self.max_error_bytes,
            max_malformed_events=self.max_malformed_events,
            proxy=self.proxy,
        )

    async def get_json(self, path: str, *, timeout_s: float, max_bytes: int) -> Any:
        """GET `base_url + path` (the endpoints listing) within `timeout_s`, at most
        `max_bytes` read, as JSON. Raises our transport errors, or ValueError for a status
        other than 200, a longer body or one that is not JSON."""
        url = URL(self.base_url + path, encoded=False)
        try:
            async with (
                asyncio.timeout(timeout_s),
                self._pool().get(url, allow_redirects=False, proxy=self.proxy) as response,
            ):
                if response.status != 200:
                    raise ValueError(f"HTTP {response.status}")
                body = bytearray()
                async for piece in response.content.iter_chunked(64 * 1024):
                    body += piece
                    if len(body) > max_bytes:
                        raise ValueError(f"larger than {max_bytes} bytes")
        except TimeoutError:
            raise ReadTimeout(f"no complete reply within {timeout_s:g} s") from None
        except aiohttp.ClientError as exc:
            _raise_translated(exc, self.scrub)
        return jsonio.loads(bytes(body))

    async def aclose(self) -> None:
        """Close the pool; a later call opens a new one."""
        session, self._session = self._session, None
        if session is None:
            return
        if self._session_loop is asyncio.get_running_loop():
            await session.close()
        else:
            _abandon(session)


def _abandon(session: aiohttp.ClientSession) -> None:
    """Drop a session whose loop is not the running one: its connections are closed
    without awaiting (that loop may be closed already)."""
    connector = session.connector
    session.detach()
    if connector is not None:
        with contextlib.suppress(Exception):
            connector._close()  # the synchronous part of `await connector.close()`
