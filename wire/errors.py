"""The error envelope: `{"error": {"code", "message", "metadata"}}` (HTTP or in-band).

`parse_error` reads both metadata dialects, current (`error_type`, `provider_code`) and
older (`provider_name`, `raw`), a `code` given as a number or a digit string, and an `error`
given as a bare string; and the OpenAI-compatible dialect many providers and servers speak,
`{"error": {"message", "type", "param", "code"}}`, whose `code` is a string naming the error's
kind (`context_length_exceeded`, `content_policy_violation`, ...: `ErrorInfo.error_code`)
and whose `type` its family (`invalid_request_error`: `ErrorInfo.error_type` when no metadata
names one; `routing.classify` reads both through one table). Every string in it passes through `wire.text` (key scrubbed, then
cut), at any depth of `metadata`. `error_envelope` builds one for servers of ours (the
fleet, the gateway's in-band errors).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from wire.text import MAX_TEXT_CHARS, NO_SECRET, Scrubber, upstream_text

MAX_FIELD_CHARS = 200  # error_type, provider_code, provider_name


class ErrorInfo(BaseModel):
    """An OpenRouter error envelope (HTTP or in-band), both metadata dialects, scrubbed."""

    model_config = ConfigDict(frozen=True)

    code: int | None = None
    message: str = ""
    error_type: str | None = None  # metadata.error_type (current dialect) or error.type
    error_code: str | None = None  # error.code as a kind (OpenAI's dialect), not a status
    provider_code: str | None = None
    provider_name: str | None = None  # metadata.provider_name (older dialect)
    retry_after_s: float | None = None  # from the Retry-After header
    in_band: bool = False  # arrived as a stream chunk after HTTP 200
    metadata: dict[str, Any] = Field(default_factory=dict)


def status_code(value: Any) -> int | None:
    """An HTTP-like status from an int or a digit string ("429"); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 <= value < 1000 else None
    if isinstance(value, str) and value.strip().isdigit() and len(value.strip()) <= 3:
        return int(value.strip())
    return None


def _field(value: Any, scrub: Scrubber) -> str | None:
    if value is None:
        return None
    return upstream_text(value, scrub, MAX_FIELD_CHARS)


def parse_error(
    payload: Any,
    *,
    scrub: Scrubber = NO_SECRET,
    retry_after_s: float | None = None,
    in_band: bool = False,
    fallback_code: int | None = None,
) -> ErrorInfo | None:
    """The envelope in `payload` as `ErrorInfo`; None when `payload` carries none."""
    if not isinstance(payload, dict) or "error" not in payload:
        return None
    err = payload["error"]
    if isinstance(err, str):
        err = {"message": err}
    if not isinstance(err, dict):
        err = {"message": err} if err not in (None, False) else {}
    raw_meta = err.get("metadata")
    meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
    raw_code = err.get("code")
    code = status_code(raw_code)
    error_type = meta.get("error_type") or err.get("type")
    kind_code = (
        raw_code if isinstance(raw_code, str) and code is None and raw_code.strip() else None
    )
    return ErrorInfo(
        code=code if code is not None else fallback_code,
        message=upstream_text(err.get("message", ""), scrub, MAX_TEXT_CHARS)
        if err.get("message") is not None
        else "",
        error_type=_field(error_type, scrub) if error_type else None,
        error_code=_field(kind_code, scrub),
        provider_code=_field(meta.get("provider_code"), scrub),
        provider_name=_field(meta.get("provider_name"), scrub),
        retry_after_s=retry_after_s,
        in_band=in_band,
        metadata=scrub.deep(meta) if meta else {},
    )


def unparseable(
    *, code: int | None = None, in_band: bool = False, retry_after_s: float | None = None
) -> ErrorInfo:
    """An error status whose body held no envelope we could read."""
    return ErrorInfo(
        code=code, message="unparseable error body", in_band=in_band, retry_after_s=retry_after_s
    )


def error_envelope(
    status: int, message: str, error_type: str | None = None, **metadata: Any
) -> dict[str, Any]:
    """`{"error": {"code": status, "message": ..., "metadata": {...}}}`."""
    meta = dict(metadata)
    if error_type is not None:
        meta = {"error_type": error_type, **meta}
    body: dict[str, Any] = {"code": status, "message": message}
    if meta:
        body["metadata"] = meta
    return {"error": body}
