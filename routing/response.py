"""A completion as the router sees it, assembled from a JSON body or SSE chunks.

Pure parsing: no I/O. `assemble` is fed chunks one at a time by the upstream
client; `from_body` parses a non-streaming body. Either yields a `Completion`
(facts only) or an in-band `ErrorInfo`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from wire.chunks import provider_of, usage_cost, usage_of, usage_tokens
from wire.errors import ErrorInfo, parse_error, unparseable
from wire.text import NO_SECRET, Scrubber, upstream_text


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
        return usage_cost(self.usage)

    def tokens(self) -> tuple[int, int]:
        return usage_tokens(self.usage)


def _in_band_error(obj: Any, scrub: Scrubber) -> ErrorInfo:
    return parse_error(obj, in_band=True, scrub=scrub) or unparseable(in_band=True)


def from_body(body: Any, scrub: Scrubber = NO_SECRET) -> Completion:
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
    finish = choice.get("finish_reason")
    comp = Completion(
        id=_opt_text(body.get("id"), scrub),
        model=_opt_text(body.get("model"), scrub),
        provider=provider_of(body, scrub),
        content=message.get("content") or "",
        finish_reason=upstream_text(finish, scrub, 64) if finish is not None else None,
        usage=usage_of(body),
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
        comp.error = _in_band_error(choice if "error" in choice else body, scrub)
    return comp


def _opt_text(value: Any, scrub: Scrubber) -> str | None:
    return upstream_text(value, scrub, 200) if isinstance(value, str) else None


class StreamAssembler:
    """Feed SSE `data:` payloads (already JSON-decoded) in order; read `.completion`."""

    def __init__(self, scrub: Scrubber = NO_SECRET) -> None:
        self.completion = Completion()
        self.scrub = scrub
        self._calls: dict[int, ToolCall] = {}

    def feed(self, chunk: dict[str, Any]) -> str:
        """Add one chunk; return the content text it carried (possibly "")."""
        c = self.completion
        if c.id is None:
            c.id = _opt_text(chunk.get("id"), self.scrub)
            c.model = _opt_text(chunk.get("model"), self.scrub)
            c.provider = provider_of(chunk, self.scrub)
        usage = usage_of(chunk)
        if usage is not None:
            c.usage = usage
        if "error" in chunk:
            c.error = _in_band_error(chunk, self.scrub)
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
                c.finish_reason = upstream_text(finish, self.scrub, 64)
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
