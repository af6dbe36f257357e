"""The pinned streaming client: endpoint discovery and one-request probes.

    async with ProbeClient(base_url, api_key, ttft_threshold_s=10.0) as client:
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
  before the request is sent; SSE comments (keep-alives) never count (C3).
- Bounds: no text within `ttft_threshold_s` → give up (`gave_up_waiting`, or a
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
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import quote

import httpx
from pydantic import SecretStr

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

if TYPE_CHECKING:
    from ground.settings import Settings

log = logging.getLogger(__name__)

ERROR_BODY_MAX_BYTES = 64_000
DISCOVERY_MAX_BYTES = 5_000_000
USER_AGENT = "provider-canary/0.1"


@cache
def _tls() -> ssl.SSLContext:
    """httpx's default TLS context (certifi, or SSL_CERT_FILE / SSL_CERT_DIR), built once
    per process: building it costs ~40 ms of CPU, and a round opens a client per endpoint."""
    return httpx.create_ssl_context()


def _transport_code(exc: httpx.TransportError) -> str:
    """httpx's exception tree → our short transport codes (most specific first)."""
    if isinstance(exc, httpx.ConnectTimeout):
        return "connect_timeout"
    if isinstance(exc, httpx.ReadTimeout):
        return "read_timeout"
    if isinstance(exc, httpx.TimeoutException):
        return "timeout"
    if isinstance(exc, httpx.ConnectError):
        return "connect_error"
    if isinstance(exc, httpx.RemoteProtocolError):
        return "connection_reset"  # peer closed mid-message / broken framing
    if isinstance(exc, (httpx.ReadError, httpx.WriteError, httpx.CloseError)):
        return "connection_reset"
    if isinstance(exc, httpx.ProtocolError):
        return "protocol_error"
    return "network_error"


class ProbeClient:
    """Async context manager holding one pooled httpx client for a base URL."""

    def __init__(
        self,
        base_url: str,
        api_key: SecretStr | str | None,
        *,
        ttft_threshold_s: float = 10.0,
        connect_timeout_s: float = 5.0,
        total_timeout_s: float = 60.0,
        max_bytes: int = 1_000_000,
        max_connections: int = 64,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}")
        for name, value in (
            ("ttft_threshold_s", ttft_threshold_s),
            ("connect_timeout_s", connect_timeout_s),
            ("total_timeout_s", total_timeout_s),
            ("max_bytes", max_bytes),
        ):
            if value <= 0:
                raise ValueError(f"{name} must be > 0, got {value!r}")
        self.base_url = base_url.rstrip("/")
        self._key = (
            api_key if isinstance(api_key, SecretStr) or api_key is None else SecretStr(api_key)
        )
        self.ttft_threshold_s = float(ttft_threshold_s)
        self.connect_timeout_s = float(connect_timeout_s)
        self.total_timeout_s = float(total_timeout_s)
        self.max_bytes = int(max_bytes)
        self.max_connections = max_connections
        self._http: httpx.AsyncClient | None = None
        self._scrubber: Scrubber | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> ProbeClient:
        return cls(
            settings.base_url,
            settings.api_key,
            ttft_threshold_s=settings.ttft_threshold_s,
            connect_timeout_s=settings.connect_timeout_s,
            total_timeout_s=settings.probe_total_timeout_s,
            max_bytes=settings.probe_max_bytes,
            max_connections=max(8, settings.probe_concurrency * 4),
        )

    def __repr__(self) -> str:
        key = "set" if self._key else "none"
        return f"ProbeClient(base_url={self.base_url!r}, api_key=<{key}>, ttft_threshold_s={self.ttft_threshold_s})"

    async def __aenter__(self) -> Self:
        headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
        if self._key is not None:
            headers["Authorization"] = f"Bearer {self._key.get_secret_value()}"
        limits = httpx.Limits(
            max_connections=self.max_connections,
            max_keepalive_connections=self.max_connections,
        )
        self._http = httpx.AsyncClient(
            headers=headers,
            transport=httpx.AsyncHTTPTransport(verify=_tls(), retries=0, limits=limits),
            timeout=httpx.Timeout(
                connect=self.connect_timeout_s,
                read=self.total_timeout_s,
                write=self.connect_timeout_s,
                pool=self.total_timeout_s,
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
        deadline = self.connect_timeout_s + self.total_timeout_s
        try:
            async with asyncio.timeout(deadline):
                async with self._client.stream("GET", url) as response:
                    body = await self._read_bounded(response, DISCOVERY_MAX_BYTES)
        except TimeoutError as exc:
            raise DiscoveryTransportError(model, f"no answer within {deadline:.0f} s") from exc
        except httpx.TransportError as exc:
            raise DiscoveryTransportError(model, _transport_code(exc)) from exc
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
            raise MalformedDiscoveryPayload(
                model, f"body larger than {DISCOVERY_MAX_BYTES} bytes", status=status
            )
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
        max_tokens: int = 300,
        temperature: float | None = None,
    ) -> dict[str, Any]:
        """The exact JSON body of a pinned probe request."""
        provider: dict[str, Any] = {"only": [endpoint.tag], "allow_fallbacks": False}
        body: dict[str, Any] = {
            "model": endpoint.model_id,
            "messages": messages,
            "stream": True,
            "max_tokens": max_tokens,
            "provider": provider,
        }
        if temperature is not None:
            body["temperature"] = temperature
        if response_format is not None:
            body["response_format"] = response_format
            provider["require_parameters"] = True
        return body

    async def probe(
        self,
        endpoint: Endpoint,
        contract: Contract,
        messages: list[dict[str, Any]],
        *,
        locale: str | None,
        response_format: dict[str, Any] | None = None,
        max_tokens: int = 300,
        temperature: float | None = None,
    ) -> Transcript:
        """Send one pinned streaming request and record everything it produced."""
        body = self.request_body(
            endpoint,
            messages,
            response_format=response_format,
            max_tokens=max_tokens,
            temperature=temperature,
        )
        transcript = Transcript(
            request_id=uuid.uuid4().hex,
            model_id=endpoint.model_id,
            tag=endpoint.tag,
            pinned_provider=endpoint.provider_name,
            contract=contract,
            locale=locale,
        )
        recorder = StreamRecorder(transcript, scrub=self._scrub)
        request = self._client.build_request(
            "POST",
            f"{self.base_url}/chat/completions",
            json=body,
            headers={"Accept": "text/event-stream", "X-Request-Id": transcript.request_id},
        )
        loop = asyncio.get_running_loop()
        started = time.perf_counter()
        loop_start = loop.time()
        first_deadline = loop_start + min(self.ttft_threshold_s, self.total_timeout_s)
        got_headers = False
        try:
            async with asyncio.timeout_at(first_deadline) as scope:
                response = await self._client.send(request, stream=True)
                got_headers = True
                try:
                    await self._consume(response, transcript, recorder, started, scope, loop_start)
                finally:
                    await response.aclose()
        except TimeoutError:
            if not got_headers:
                transcript.transport_error = "read_timeout"
            elif not recorder.has_text:
                transcript.gave_up_waiting = True
            else:
                transcript.time_limit_hit = True
            if loop.time() - loop_start >= self.total_timeout_s - 1e-3:
                transcript.time_limit_hit = True
        except httpx.TransportError as exc:
            transcript.transport_error = _transport_code(exc)
        except httpx.DecodingError:
            transcript.transport_error = "decoding_error"  # a broken content-encoding
        except httpx.HTTPError:
            transcript.transport_error = "network_error"
        except Exception as exc:  # provider bytes no reader of ours expected: this probe's
            # typed outcome (`invalid_response`), never the round's failure
            transcript.transport_error = "invalid_response"
            log.warning(
                "probe %s %s: unreadable reply (%s: %s)",
                endpoint.tag,
                contract.value,
                type(exc).__name__,
                upstream_text(str(exc), self._scrub, 200),
            )
        transcript.total_s = time.perf_counter() - started
        if (
            transcript.transport_error is None
            and transcript.http_status == 200
            and not transcript.done
        ):
            if transcript.byte_limit_hit:
                transcript.transport_error = "byte_limit"
            elif transcript.time_limit_hit:
                transcript.transport_error = "time_limit"
            elif not transcript.gave_up_waiting and transcript.error is None:
                transcript.transport_error = "stream_cut"
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
            raw = await self._read_bounded(response, ERROR_BODY_MAX_BYTES)
            t.bytes_received = len(raw) if raw is not None else ERROR_BODY_MAX_BYTES
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
                payload,
                retry_after_s=retry,
                scrub=self._scrub,
                fallback_code=response.status_code,
            )
            if envelope is None and response.status_code != 200:
                envelope = unparseable(code=response.status_code, retry_after_s=retry)
            t.error = envelope
            if response.status_code == 200 and isinstance(payload, dict):
                recorder.chunk(payload, time.perf_counter() - started)  # a non-streaming body
                t.done = not t.byte_limit_hit
            return
        parser = SSEParser(max_line_bytes=self.max_bytes)
        try:
            async for chunk in response.aiter_bytes():
                t.bytes_received += len(chunk)
                had_text = recorder.has_text
                for item in parser.feed(chunk):
                    if isinstance(item, Comment):
                        t.keepalives += 1
                    else:
                        recorder.data(item.data, time.perf_counter() - started)
                    if t.done:
                        break
                if not had_text and recorder.has_text:
                    scope.reschedule(loop_start + self.total_timeout_s)
                if t.done:
                    break
                if t.bytes_received > self.max_bytes:
                    t.byte_limit_hit = True
                    break
        finally:
            t.malformed_lines += parser.malformed_lines
            t.non_utf8_lines += parser.non_utf8_lines
        if t.error is not None and retry is not None and t.error.retry_after_s is None:
            t.error = t.error.model_copy(update={"retry_after_s": retry})
