"""Pure parsing of OpenRouter wire data (no I/O, no clock): error envelopes in both
metadata dialects, `Retry-After`, the endpoints listing, and the stream chunks
folded into a `Transcript` under construction (`StreamRecorder`).

The client (probes/client.py) is the thin I/O shell around these functions.
"""

from __future__ import annotations

import json
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any

from pydantic import ValidationError

from probes.types import Endpoint, ErrorInfo, Pricing, Transcript

MAX_MESSAGE_CHARS = 500


def scrub(text: str, secret: str | None) -> str:
    """Remove the API key from any text a server sent us (some echo headers back)."""
    if secret and secret in text:
        return text.replace(secret, "***")
    return text


def loads_json(raw: bytes | str) -> Any:
    """json.loads that tolerates a UTF-8 BOM and invalid bytes (replaced); raises ValueError."""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8-sig", errors="replace")
    return json.loads(raw.removeprefix("\ufeff"))


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """`Retry-After` as seconds (delta-seconds or an HTTP date relative to `now`)."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None or now.tzinfo is None:
            return None
        seconds = (when - now).total_seconds()
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        return None
    return max(0.0, seconds)


def parse_error(
    payload: Any,
    *,
    retry_after_s: float | None = None,
    in_band: bool = False,
    secret: str | None = None,
    fallback_code: int | None = None,
) -> ErrorInfo | None:
    """The `{"error": {...}}` envelope as ErrorInfo; None when there is no envelope.

    Reads both metadata dialects: current (`error_type`, `provider_code`) and
    older (`provider_name`, `raw`); `raw` is kept (truncated) in `metadata`.
    """
    if not isinstance(payload, dict) or "error" not in payload:
        return None
    err = payload["error"]
    if isinstance(err, str):
        err = {"message": err}
    if not isinstance(err, dict):
        err = {}
    meta_raw = err.get("metadata")
    meta: dict[str, Any] = meta_raw if isinstance(meta_raw, dict) else {}
    code = err.get("code")
    if isinstance(code, str) and code.strip().isdigit():
        code = int(code)
    if not isinstance(code, int) or isinstance(code, bool):
        code = fallback_code
    error_type = meta.get("error_type") or err.get("type")
    provider_code = meta.get("provider_code")
    provider_name = meta.get("provider_name")
    safe_meta: dict[str, Any] = {}
    for key, value in meta.items():
        if isinstance(value, str):
            safe_meta[key] = scrub(value[:MAX_MESSAGE_CHARS], secret)
        elif isinstance(value, (int, float, bool)) or value is None:
            safe_meta[key] = value
        elif isinstance(value, list):
            safe_meta[key] = [scrub(str(v)[:200], secret) for v in value[:20]]
        else:
            safe_meta[key] = scrub(json.dumps(value, default=str)[:MAX_MESSAGE_CHARS], secret)
    return ErrorInfo(
        code=code,
        message=scrub(str(err.get("message", ""))[:MAX_MESSAGE_CHARS], secret),
        error_type=str(error_type) if error_type is not None else None,
        provider_code=str(provider_code) if provider_code is not None else None,
        provider_name=str(provider_name) if provider_name is not None else None,
        retry_after_s=retry_after_s,
        in_band=in_band,
        metadata=safe_meta,
    )


def _float(value: Any) -> float:
    if value is None or value == "":
        return 0.0
    return float(value)


def parse_endpoints(payload: Any, model: str) -> list[Endpoint]:
    """`GET /models/{id}/endpoints` body → Endpoints. Raises ValueError naming what is wrong.

    Negative `status` values are kept (degraded endpoints are still listed and probed).
    """
    if not isinstance(payload, dict) or not isinstance(payload.get("data"), dict):
        raise ValueError('expected an object with a "data" object')
    data = payload["data"]
    rows = data.get("endpoints")
    if not isinstance(rows, list):
        raise ValueError('"data.endpoints" is missing or not a list')
    model_id = str(data.get("id") or model)
    out: list[Endpoint] = []
    for index, row in enumerate(rows):
        if not isinstance(row, dict):
            raise ValueError(f"endpoints[{index}] is not an object")
        try:
            tag = row["tag"]
            provider_name = row["provider_name"]
            if not isinstance(tag, str) or not tag or not isinstance(provider_name, str):
                raise ValueError("tag and provider_name must be non-empty strings")
            pricing_raw = row.get("pricing") or {}
            latency = row.get("latency_last_30m") or {}
            params = row.get("supported_parameters") or []
            if not isinstance(params, list):
                raise ValueError("supported_parameters must be a list")
            status = row.get("status", 0)
            out.append(
                Endpoint(
                    model_id=str(row.get("model_id") or model_id),
                    tag=tag,
                    provider_name=provider_name,
                    name=str(row.get("name") or ""),
                    quantization=row.get("quantization"),
                    status=int(status if status is not None else 0),
                    context_length=row.get("context_length"),
                    max_completion_tokens=row.get("max_completion_tokens"),
                    max_prompt_tokens=row.get("max_prompt_tokens"),
                    supported_parameters=tuple(str(p) for p in params),
                    pricing=Pricing(
                        prompt=_float(pricing_raw.get("prompt")),
                        completion=_float(pricing_raw.get("completion")),
                        request=_float(pricing_raw.get("request")),
                        image=_float(pricing_raw.get("image")),
                    ),
                    uptime_last_30m=row.get("uptime_last_30m"),
                    latency_p50_s=latency.get("p50") if isinstance(latency, dict) else None,
                )
            )
        except KeyError as exc:
            raise ValueError(f"endpoints[{index}] lacks {exc.args[0]!r}") from exc
        except (TypeError, ValidationError, ValueError, AttributeError) as exc:
            first = str(exc).splitlines()[0]
            raise ValueError(f"endpoints[{index}] ({row.get('tag')!r}): {first}") from exc
    return out


class StreamRecorder:
    """Folds decoded stream chunks (`data:` JSON objects) into a Transcript.

    Pure: the caller passes `elapsed_s` (monotonic seconds since the request was
    sent) with each chunk; the first non-empty content delta sets `ttft_s`.
    """

    def __init__(self, transcript: Transcript, *, secret: str | None = None) -> None:
        self.t = transcript
        self.secret = secret
        self._parts: list[str] = []

    @property
    def has_text(self) -> bool:
        return bool(self._parts)

    def data(self, payload: str, elapsed_s: float) -> None:
        """One SSE `data:` payload (a JSON chunk or `[DONE]`)."""
        if payload.strip() == "[DONE]":
            self.t.done = True
            return
        try:
            chunk = json.loads(payload)
        except ValueError:
            self.t.malformed_lines += 1
            return
        if not isinstance(chunk, dict):
            self.t.malformed_lines += 1
            return
        self.chunk(chunk, elapsed_s)

    def chunk(self, chunk: dict[str, Any], elapsed_s: float) -> None:
        provider = chunk.get("provider")
        if isinstance(provider, str) and (
            self.t.served_by is None or self.t.served_by == self.t.pinned_provider
        ):
            self.t.served_by = provider  # keep the first one that disagrees with the pin
        if self.t.generation_id is None and isinstance(chunk.get("id"), str):
            self.t.generation_id = chunk["id"]
        if chunk.get("error"):
            self.t.error = parse_error(chunk, in_band=self.t.http_status == 200, secret=self.secret)
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.t.usage = usage
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return
        choice = choices[0]
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            delta = choice.get("message")  # a non-streaming body
        if isinstance(delta, dict):
            content = delta.get("content")
            if isinstance(content, str) and content:
                if not self._parts:
                    self.t.ttft_s = elapsed_s
                self._parts.append(content)
        if choice.get("finish_reason") is not None:
            self.t.finish_reason = str(choice["finish_reason"])
        if choice.get("native_finish_reason") is not None:
            self.t.native_finish_reason = str(choice["native_finish_reason"])
        if choice.get("error") and self.t.error is None:
            self.t.error = parse_error(
                {"error": choice["error"]}, in_band=self.t.http_status == 200, secret=self.secret
            )

    def finish(self) -> Transcript:
        self.t.text = scrub("".join(self._parts), self.secret)
        return self.t
