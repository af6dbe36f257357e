"""A completion as the router sees it, assembled from a JSON body or SSE chunks.

Pure parsing: no I/O. `assemble` is fed chunks one at a time by the upstream
client; `from_body` parses a non-streaming body. Either yields a `Completion`
(facts only) or an in-band `ErrorInfo`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from probes.types import ErrorInfo


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text, as the model produced it


@dataclass
class Completion:
    id: str | None = None
    model: str | None = None
    provider: str | None = None
    content: str = ""
    finish_reason: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    done: bool = False  # a streaming reply saw [DONE]; a JSON body is complete by definition
    error: ErrorInfo | None = None  # in-band error (chunk or choice)

    @property
    def cost_usd(self) -> float | None:
        if self.usage and isinstance(self.usage.get("cost"), int | float):
            return float(self.usage["cost"])
        return None

    def tokens(self) -> tuple[int, int]:
        u = self.usage or {}
        return int(u.get("prompt_tokens") or 0), int(u.get("completion_tokens") or 0)


def parse_error(obj: Any, *, in_band: bool, retry_after_s: float | None = None) -> ErrorInfo:
    """An OpenRouter error envelope (both metadata dialects) -> ErrorInfo."""
    err = obj.get("error") if isinstance(obj, dict) else None
    if not isinstance(err, dict):
        return ErrorInfo(
            message="unparseable error body", in_band=in_band, retry_after_s=retry_after_s
        )
    raw_meta = err.get("metadata")
    meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
    code = err.get("code")
    return ErrorInfo(
        code=code if isinstance(code, int) else None,
        message=str(err.get("message") or "")[:500],
        error_type=meta.get("error_type")
        or (err.get("type") if isinstance(err.get("type"), str) else None),
        provider_code=str(meta["provider_code"]) if meta.get("provider_code") is not None else None,
        provider_name=meta.get("provider_name"),
        retry_after_s=retry_after_s,
        in_band=in_band,
        metadata={
            k: v for k, v in meta.items() if k in ("error_type", "provider_name", "provider_code")
        },
    )


def from_body(body: Any) -> Completion:
    """A non-streaming chat completion body. Raises ValueError if the envelope is not one."""
    if (
        not isinstance(body, dict)
        or not isinstance(body.get("choices"), list)
        or not body["choices"]
    ):
        raise ValueError("envelope has no choices")
    choice = body["choices"][0]
    if not isinstance(choice, dict):
        raise ValueError("choice is not an object")
    message = choice.get("message") or {}
    if not isinstance(message, dict):
        raise ValueError("message is not an object")
    comp = Completion(
        id=body.get("id"),
        model=body.get("model"),
        provider=body.get("provider"),
        content=message.get("content") or "",
        finish_reason=choice.get("finish_reason"),
        usage=body.get("usage") if isinstance(body.get("usage"), dict) else None,
        done=True,
    )
    if not isinstance(comp.content, str):
        raise ValueError("message.content is not a string")
    for i, call in enumerate(message.get("tool_calls") or []):
        if not isinstance(call, dict):
            raise ValueError("tool call is not an object")
        raw_fn = call.get("function")
        fn: dict[str, Any] = raw_fn if isinstance(raw_fn, dict) else {}
        args = fn.get("arguments")
        comp.tool_calls.append(
            ToolCall(
                id=str(call.get("id") or f"call_{i}"),
                name=str(fn.get("name") or ""),
                arguments=args if isinstance(args, str) else "",
            )
        )
    if "error" in choice or "error" in body:
        comp.error = parse_error(choice if "error" in choice else body, in_band=True)
    return comp


class StreamAssembler:
    """Feed SSE `data:` payloads (already JSON-decoded) in order; read `.completion`."""

    def __init__(self) -> None:
        self.completion = Completion()
        self._calls: dict[int, ToolCall] = {}

    def feed(self, chunk: dict[str, Any]) -> str:
        """Add one chunk; return the content text it carried (possibly "")."""
        c = self.completion
        if c.id is None:
            c.id, c.model, c.provider = chunk.get("id"), chunk.get("model"), chunk.get("provider")
        if "usage" in chunk and isinstance(chunk["usage"], dict):
            c.usage = chunk["usage"]
        if "error" in chunk:
            c.error = parse_error(chunk, in_band=True)
        choices = chunk.get("choices")
        if not choices or not isinstance(choices, list):
            return ""
        text = ""
        for choice in choices:
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict):
                piece = delta.get("content")
                if piece and isinstance(piece, str):
                    text += piece
                if "tool_calls" in delta:
                    self._tool_deltas(delta["tool_calls"] or [])
            finish = choice.get("finish_reason")
            if finish:
                c.finish_reason = finish
        if text:
            c.content += text
        return text

    def _tool_deltas(self, calls: list[Any]) -> None:
        for call in calls:
            if not isinstance(call, dict):
                continue
            idx = int(call.get("index", len(self._calls)))
            fn = call.get("function") or {}
            slot = self._calls.setdefault(idx, ToolCall(id="", name="", arguments=""))
            slot.id = slot.id or str(call.get("id") or f"call_{idx}")
            slot.name += fn.get("name") or ""
            slot.arguments += fn.get("arguments") or ""
        self.completion.tool_calls = [self._calls[k] for k in sorted(self._calls)]

    def finish(self) -> None:
        self.completion.done = True
