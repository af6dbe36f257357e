"""OpenRouter wire shapes: error envelopes, completion bodies, SSE events."""

from __future__ import annotations

import json
from typing import Any

KEEPALIVE = b": OPENROUTER PROCESSING\n\n"
DONE = b"data: [DONE]\n\n"


def envelope(
    status: int, message: str, error_type: str | None = None, **metadata: Any
) -> dict[str, Any]:
    meta = dict(metadata)
    if error_type is not None:
        meta = {"error_type": error_type, **meta}
    body: dict[str, Any] = {"code": status, "message": message}
    if meta:
        body["metadata"] = meta
    return {"error": body}


def sse(payload: dict[str, Any]) -> bytes:
    return (
        b"data: "
        + json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        + b"\n\n"
    )


def chunk(
    base: dict[str, Any],
    delta: dict[str, Any],
    finish_reason: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    return {
        **base,
        "object": "chat.completion.chunk",
        "choices": [
            {
                "index": 0,
                "delta": delta,
                "finish_reason": finish_reason,
                "native_finish_reason": finish_reason,
                "logprobs": None,
            }
        ],
        **extra,
    }


def usage(prompt_tokens: int, completion_tokens: int, cost: float) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "cost": cost,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


class ChunkEncoder:
    """Fast SSE encoding of plain content deltas for one stream: the JSON around
    the content string is encoded once; only the content is encoded per token."""

    def __init__(self, base: dict[str, Any]) -> None:
        marker = "\x00MARK\x00"
        template = sse(chunk(base, {"content": marker}))
        token = json.dumps(marker).encode("utf-8")
        self._prefix, self._suffix = template.split(token)

    def content(self, text: str) -> bytes:
        return self._prefix + json.dumps(text, ensure_ascii=False).encode("utf-8") + self._suffix
