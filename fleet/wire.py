"""OpenRouter wire shapes the fleet serves: completion bodies and SSE chunks."""

from __future__ import annotations

import json
from typing import Any

from wire import sse as sse_wire
from wire.errors import error_envelope

# The envelope and SSE framing are the project's one wire module; the fleet only builds
# completion bodies and chunks around them.
KEEPALIVE = sse_wire.KEEPALIVE
DONE = sse_wire.DONE
envelope = error_envelope
sse = sse_wire.encode_event


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


def usage(
    prompt_tokens: int, completion_tokens: int, cost: float, reasoning_tokens: int = 0
) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "cost": cost,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": reasoning_tokens},
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
