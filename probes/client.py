"""The pinned streaming client: endpoint discovery and one-request probes.

    async with ProbeClient(base_url, api_key, ProbeConfig()) as client:
        endpoints = await client.discover("meta-llama/llama-3.3-70b-instruct")
        transcript = await client.probe(endpoints[0], Contract.LANGUAGE, messages, locale="pt-BR")

- One `httpx.AsyncClient` per ProbeClient; the transport never retries
  (`retries=0`): the canary round decides on confirmations (SPEC R3). The TLS context
  is built once per process and shared.
- Every probe is pinned: `provider: {"only": [tag], "allow_fallbacks": false}`,
  plus `require_parameters: true` when it carries a `response_format` (C2, C6).
- `probe()` never raises for provider behaviour: status, error envelope (both
  metadata dialects), `Retry-After`, in-band error chunk, `[DONE]`, usage,
  `served_by`, TTFT and the transport error are data in the `Transcript`.
- TTFT is the first non-empty content delta on a monotonic clock started just
  before the request is sent; SSE comments (keep-alives) never count (C3). The first
  output of any kind (content, reasoning, a tool call) ends the wait for the first token.
- Tool probes carry `tools` / `tool_choice` (and `require_parameters`); tool-call deltas,
  reasoning fields, chunk times and the reply's `model` are facts in the `Transcript`
  (probes/decode.py `StreamRecorder`).
- Bounds (`ground.settings.ProbeConfig`, taken whole): no text within
  `ttft_threshold_s` → give up (`gave_up_waiting`, or a
  `read_timeout` transport error when not even headers came); total time
  `total_timeout_s` (`time_limit_hit`); total decoded bytes `max_bytes`
  (`byte_limit_hit`). A stream that never ends or sends megabytes cannot hang
  or bloat the canary.
- The API key is held as `SecretStr`, never logged, and scrubbed from any
  server text that we store.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
import uuid
from datetime import UTC, datetime
from functools import cache
from types import TracebackType
from typing import Any, Self
from urllib.parse import quote

import httpx
from pydantic import SecretStr

from ground.settings import ProbeConfig, Settings
from probes.decode import StreamRecorder, parse_endpoints
from probes.errors import (
    ClientNotOpenError,
    DiscoveryAuthError,
    DiscoveryError,
    DiscoveryHTTPError,
    DiscoveryTransportError,
    InvalidModelIdError,
    MalformedDiscoveryPayload,
    ModelNotFoundError,
)
from probes.types import Contract, Endpoint, Transcript
from wire import jsonio
from wire.errors import parse_error, unparseable
from wire.retry_after import parse_retry_after
from wire.sse import Comment, SSEParser
from wire.text import Scrubber, upstream_text
from wire.transport import TransportCode

log = logging.getLogger(__name__)

USER_AGENT = "provider-canary/0.1"


@cache
def _tls() -> ssl.SSLContext:
    """httpx's default TLS context (certifi, or SSL_CERT_FILE / SSL_CERT_DIR), built once
    per process: building it costs ~40 ms of CPU, and a round opens a client per endpoint."""
    return httpx.create_ssl_context()


# httpx's exceptions by exact type -> our transport codes; `None` = not raised by a request
# of ours (a test walks every exception class httpx exports and fails unless each one has a
# row). A class without a row of its own takes its nearest ancestor's (`transport_code`).
_HTTPX: dict[type[BaseException], TransportCode | None] = {
    httpx.HTTPError: TransportCode.NETWORK_ERROR,
    httpx.RequestError: TransportCode.NETWORK_ERROR,
    httpx.TransportError: TransportCode.NETWORK_ERROR,
    httpx.TimeoutException: TransportCode.TIMEOUT,
    httpx.ConnectTimeout: TransportCode.CONNECT_TIMEOUT,
    httpx.ReadTimeout: TransportCode.READ_TIMEOUT,
    httpx.WriteTimeout: TransportCode.TIMEOUT,
    httpx.PoolTimeout: TransportCode.TIMEOUT,
    httpx.NetworkError: TransportCode.CONNECTION_RESET,
    httpx.ConnectError: TransportCode.CONNECT_ERROR,
    httpx.ReadError: TransportCode.CONNECTION_RESET,
    httpx.WriteError: TransportCode.CONNECTION_RESET,
    httpx.CloseError: TransportCode.CONNECTION_RESET,
    httpx.ProxyError: TransportCode.CONNECT_ERROR,  # we set no proxy (trust_env=False)
    httpx.ProtocolError: TransportCode.PROTOCOL_ERROR,
    httpx.LocalProtocolError: TransportCode.PROTOCOL_ERROR,
    httpx.RemoteProtocolError: TransportCode.REMOTE_PROTOCOL_ERROR,
    httpx.DecodingError: TransportCode.DECODING_ERROR,  # a broken content-encoding
    httpx.TooManyRedirects: TransportCode.REMOTE_PROTOCOL_ERROR,  # redirects not followed
    httpx.UnsupportedProtocol: TransportCode.UNSUPPORTED_PROTOCOL,
    httpx.InvalidURL: TransportCode.INVALID_URL,
    # not raised by a request of ours: we never raise_for_status, read a closed stream twice
    # or touch a body's cookies
    httpx.HTTPStatusError: None,
    httpx.CookieConflict: None,
    httpx.StreamError: None,
    httpx.StreamConsumed: None,
    httpx.StreamClosed: None,
    httpx.ResponseNotRead: None,
    httpx.RequestNotRead: None,
}


def transport_code(exc: BaseException) -> TransportCode | None:
    """httpx's exception -> our transport code (its nearest row, most specific first); None
    for an exception that is not httpx's or that a request of ours never raises."""
    for t in type(exc).__mro__:
        if t in _HTTPX:
            return _HTTPX[t]
    return None


class ProbeClient:
    """Async context manager holding one pooled httpx client for a base URL."""

    def __init__(
        self,
        base_url: str,
        api_key: SecretStr | str | None,
        config: ProbeConfig | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self._key = (
            api_key if isinstance(api_key, SecretStr) or api_key is None else SecretStr(api_key)
        )
        self.config = config or ProbeConfig()
        self._http: httpx.AsyncClient | None = None
        self._scrubber: Scrubber | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> ProbeClient:
        return cls(settings.base_url, settings.api_key, settings.probe)

    def __repr__(self) -> str:
        key = "set" if self._key else "none"
        return (
            f"ProbeClient(base_url={self.base_url!r}, api_key=<{key}>, "
            f"ttft_threshold_s={self.config.ttft_threshold_s})"
        )

    async def __aenter__(self) -> Self:
        headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
        if self._key is not None:
            headers["Authorization"] = f"Bearer {self._key.get_secret_value()}"
        c = self.config
        limits = httpx.Limits(
            max_connections=c.max_connections, max_keepalive_connections=c.max_connections
        )
        self._http = httpx.AsyncClient(
            headers=headers,
            transport=httpx.AsyncHTTPTransport(verify=_tls(), retries=0, limits=limits),
            timeout=httpx.Timeout(
                connect=c.connect_timeout_s,
                read=c.total_timeout_s,
                write=c.connect_timeout_s,
                pool=c.total_timeout_s,
            ),
            follow_redirects=False,
            trust_env=False,
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    @property
    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            raise ClientNotOpenError("use `async with ProbeClient(...) as client:`")
        return self._http

    @property
    def _scrub(self) -> Scrubber:
        if self._scrubber is None:
            self._scrubber = Scrubber(self._key.get_secret_value() if self._key else None)
        return self._scrubber

    # ---- discovery (C1) -------------------------------------------------------

    async def discover(self, model: str) -> list[Endpoint]:
        """The endpoints of `model`; raises a `DiscoveryError` subclass on failure."""
        author, slash, slug = model.partition("/")
        if not author or not slash or not slug or "/" in slug or any(c.isspace() for c in model):
            raise InvalidModelIdError(f"model id must be 'author/slug', got {model!r}")
        url = f"{self.base_url}/models/{quote(author, safe='')}/{quote(slug, safe='')}/endpoints"
        limit = self.config.max_discovery_bytes
        deadline = self.config.connect_timeout_s + self.config.total_timeout_s
        try:
            async with asyncio.timeout(deadline):
                async with self._client.stream("GET", url) as response:
                    body = await self._read_bounded(response, limit)
        except TimeoutError as exc:
            raise DiscoveryTransportError(model, f"no answer within {deadline:.0f} s") from exc
        except httpx.HTTPError as exc:
            code = transport_code(exc) or TransportCode.NETWORK_ERROR
            raise DiscoveryTransportError(model, code.value) from exc
        status = response.status_code
        if status != 200:
            retry = parse_retry_after(response.headers.get("retry-after"), datetime.now(UTC))
            try:
                envelope = parse_error(
                    jsonio.loads(body or b""), scrub=self._scrub, fallback_code=status
                )
            except ValueError:
                envelope = None
            message = (
                envelope.message
                if envelope and envelope.message
                else upstream_text(response.reason_phrase, self._scrub, 200)
            )
            kind: type[DiscoveryError]
            if status == 404:
                kind = ModelNotFoundError
            elif status in (401, 403):
                kind = DiscoveryAuthError
            elif status in (408, 429) or status >= 500:
                kind = DiscoveryTransportError
            else:
                kind = DiscoveryHTTPError
            raise kind(model, message, status=status, retry_after_s=retry)
        if body is None:
            raise MalformedDiscoveryPayload(model, f"body larger than {limit} bytes", status=status)
        try:
            return parse_endpoints(jsonio.loads(body), model, scrub=self._scrub)
        except Exception as exc:  # any parse failure is this one typed error (never chained:
            # a cause's message could hold unscrubbed provider text)
            detail = str(exc) if isinstance(exc, ValueError) else type(exc).__name__
            raise MalformedDiscoveryPayload(
                model, upstream_text(detail, self._scrub, 300), status=status
            ) from None

    @staticmethod
    async def _read_bounded(response: httpx.Response, limit: int) -> bytes | None:
        """The body, or None when it exceeds `limit` bytes (reading stops there)."""
        buf = bytearray()
        async for chunk in response.aiter_bytes():
            buf.extend(chunk)
            if len(buf) > limit:
                return None
        return bytes(buf)

    # ---- one pinned probe (C2, C3) -------------------------------------------

    def request_body(
        self,
        endpoint: Endpoint,
        messages: list[dict[str, Any]],
        *,
        response_format: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The exact JSON body of a pinned probe request (`max_tokens` default: the config's).
        A body that needs a parameter (a response format, tools) also requires it of the
        endpoint (`require_parameters`), so a pinned host that cannot honour it refuses
        instead of silently dropping it."""
        provider: dict[str, Any] = {"only": [endpoint.tag], "allow_fallbacks": False}
        body: dict[str, Any] = {
            "model": endpoint.model_id,
            "messages": messages,
            "stream": True,
            "max_tokens": self.config.max_tokens if max_tokens is None else max_tokens,
            "provider": provider,
        }
        if temperature is not None:
            body["temperature"] = temperature
        if response_format is not None:
            body["response_format"] = response_format
            provider["require_parameters"] = True
        if tools is not None:
            body["tools"] = tools
            provider["require_parameters"] = True
            if tool_choice is not None:
                body["tool_choice"] = tool_choice
        if self.disables_reasoning(endpoint):
            body["reasoning"] = {"enabled": False}
        return body

    def disables_reasoning(self, endpoint: Endpoint) -> bool:
        """The probes ask for no reasoning (`ProbeConfig.disable_reasoning`) where the
        endpoint advertises the `reasoning` parameter."""
        return self.config.disable_reasoning and "reasoning" in endpoint.supported_parameters

    async def probe(
        self,
        endpoint: Endpoint,
        contract: Contract,
        messages: list[dict[str, Any]],
        *,
        locale: str | None,
        response_format: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        probe: str | None = None,
        expect: str | None = None,
    ) -> Transcript:
        """Send one pinned streaming request and record everything it produced (`probe` and
        `expect` are the tool probes' labels, kept in the transcript for the judge)."""
        body = self.request_body(
            endpoint,
            messages,
            response_format=response_format,
            max_tokens=max_tokens,
            temperature=temperature,
            tools=tools,
            tool_choice=tool_choice,
        )
        transcript = Transcript(
            request_id=uuid.uuid4().hex,
            model_id=endpoint.model_id,
            tag=endpoint.tag,
            pinned_provider=endpoint.provider_name,
            contract=contract,
            locale=locale,
            probe=probe,
            expect=expect,
            reasoning_disabled="reasoning" in body,
        )
        recorder = StreamRecorder(transcript, scrub=self._scrub)
        started = time.perf_counter()
        await self._exchange(body, transcript, recorder, started)
        transcript.total_s = time.perf_counter() - started
        settle_cut(transcript)
        result = recorder.finish()
        log.debug(
            "probe %s %s status=%s ttft=%s served_by=%s err=%s",
            endpoint.tag,
            contract.value,
            result.http_status,
            result.ttft_s,
            result.served_by,
            result.transport_error or (result.error.error_type if result.error else None),
        )
        return result

    async def _exchange(
        self, body: dict[str, Any], t: Transcript, recorder: StreamRecorder, started: float
    ) -> None:
        """The request and its reply within the probe's bounds: no text within the latency
        threshold gives up, the total bound cuts the rest; whatever goes wrong is recorded
        in `t`, never raised."""
        request = self._client.build_request(
            "POST",
            f"{self.base_url}/chat/completions",
            json=body,
            headers={"Accept": "text/event-stream", "X-Request-Id": t.request_id},
        )
        loop = asyncio.get_running_loop()
        loop_start = loop.time()
        total_s = self.config.total_timeout_s
        first_deadline = loop_start + min(self.config.ttft_threshold_s, total_s)
        got_headers = False
        try:
            async with asyncio.timeout_at(first_deadline) as scope:
                response = await self._client.send(request, stream=True)
                got_headers = True
                t.headers_s = time.perf_counter() - started
                try:
                    await self._consume(response, t, recorder, started, scope, loop_start)
                finally:
                    await response.aclose()
        except TimeoutError:
            if not got_headers:
                t.transport_error = TransportCode.READ_TIMEOUT
            elif not recorder.has_output:
                t.gave_up_waiting = True
            else:
                t.time_limit_hit = True
            if loop.time() - loop_start >= total_s - 1e-3:
                t.time_limit_hit = True
        except httpx.HTTPError as exc:
            t.transport_error = transport_code(exc) or TransportCode.NETWORK_ERROR
        except Exception as exc:  # provider bytes no reader of ours expected: this probe's
            # typed outcome (`invalid_response`), never the round's failure
            t.transport_error = TransportCode.INVALID_RESPONSE
            log.warning(
                "probe %s %s: unreadable reply (%s: %s)",
                t.tag,
                t.contract.value,
                type(exc).__name__,
                upstream_text(str(exc), self._scrub, 200),
            )

    async def _consume(
        self,
        response: httpx.Response,
        t: Transcript,
        recorder: StreamRecorder,
        started: float,
        scope: asyncio.Timeout,
        loop_start: float,
    ) -> None:
        t.http_status = response.status_code
        retry = parse_retry_after(response.headers.get("retry-after"), datetime.now(UTC))
        content_type = response.headers.get("content-type", "")
        if response.status_code != 200 or "json" in content_type:
            await self._consume_body(response, t, recorder, started, retry)
            return
        parser = SSEParser(max_line_bytes=self.config.max_bytes)
        try:
            async for chunk in response.aiter_bytes():
                t.bytes_received += len(chunk)
                had_output = recorder.has_output
                for item in parser.feed(chunk):
                    if isinstance(item, Comment):
                        t.keepalives += 1
                    else:
                        recorder.data(item.data, time.perf_counter() - started)
                    if t.done:
                        break
                if not had_output and recorder.has_output:
                    scope.reschedule(loop_start + self.config.total_timeout_s)
                elif not recorder.has_output:
                    t.idle_read_s = time.perf_counter() - started  # read, and nothing came yet
                if t.done:
                    break
                if t.bytes_received > self.config.max_bytes:
                    t.byte_limit_hit = True
                    break
        finally:
            t.malformed_lines += parser.malformed_lines
            t.non_utf8_lines += parser.non_utf8_lines
        if t.error is not None and retry is not None and t.error.retry_after_s is None:
            t.error = t.error.model_copy(update={"retry_after_s": retry})

    async def _consume_body(
        self,
        response: httpx.Response,
        t: Transcript,
        recorder: StreamRecorder,
        started: float,
        retry: float | None,
    ) -> None:
        """A reply that is not a stream: an error body (bounded), or a 200 JSON body."""
        limit = self.config.max_error_body_bytes
        raw = await self._read_bounded(response, limit)
        t.bytes_received = len(raw) if raw is not None else limit
        if raw is None:
            t.byte_limit_hit = True
            raw = b""
        try:
            payload = jsonio.loads(raw)
        except ValueError:
            payload = None
            if response.status_code == 200:
                t.malformed_lines += 1
        envelope = parse_error(
            payload, retry_after_s=retry, scrub=self._scrub, fallback_code=response.status_code
        )
        if envelope is None and response.status_code != 200:
            envelope = unparseable(code=response.status_code, retry_after_s=retry)
        t.error = envelope
        if response.status_code == 200 and isinstance(payload, dict):
            recorder.chunk(payload, time.perf_counter() - started)  # a non-streaming body
            t.done = not t.byte_limit_hit


def settle_cut(t: Transcript) -> None:
    """A 200 reply that ended without `[DONE]` and without a transport error of its own was
    cut: by our byte bound, our time bound, or the stream itself (pure, in place)."""
    if t.transport_error is not None or t.http_status != 200 or t.done:
        return
    if t.byte_limit_hit:
        t.transport_error = TransportCode.BYTE_LIMIT
    elif t.time_limit_hit:
        t.transport_error = TransportCode.TIME_LIMIT
    elif not t.gave_up_waiting and t.error is None:
        t.transport_error = TransportCode.STREAM_CUT
