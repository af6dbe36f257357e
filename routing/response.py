"""A completion as the router sees it, assembled from the upstream's SSE chunks.

Pure parsing: no I/O. A `StreamAssembler` is fed chunks one at a time by the upstream
client (the upstream is always asked to stream) and yields a `Completion` (facts only),
with an in-band `ErrorInfo` when the upstream sent one.

Everything in a `Completion` may reach a client, so every string in it is ours: the
upstream key scrubbed (the content piece by piece, through `wire.text.StreamScrubber`,
so a key split across chunks is still found), lone surrogates replaced, usage reduced to
finite numbers and short strings. A chunk of an unexpected shape is skipped where it can
be, never raised on.

What the assembler holds is bounded, and nothing over a bound is cut and passed as whole: a
reply over one of its caps on content (more than `MAX_TOOL_CALLS` tool calls, a call's id
or name longer than `MAX_CALL_FIELD_CHARS`, a choice other than the one asked for) is
marked (`Completion.over_cap`: the cap's own reason and the detail), and acceptance rejects
it with that reason (routing/acceptance.py); the calls past the cap are not kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from wire.chunks import provider_of, usage_cost, usage_of, usage_tokens
from wire.errors import ErrorInfo, parse_error, unparseable
from wire.text import NO_SECRET, Scrubber, StreamScrubber, upstream_text, valid_unicode

MAX_TOOL_CALLS = 64
MAX_CALL_FIELD_CHARS = 200  # a tool call's id or function name


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
    done: bool = False  # the stream ended complete: [DONE], or a clean end after a finish reason
    error: ErrorInfo | None = None  # in-band error (chunk or choice)
    # the first cap on content the reply went over: (reason, detail); acceptance rejects it
    over_cap: tuple[str, str] | None = None
    malformed_events: int = 0  # `data:` events that were not a JSON object, skipped (R15)

    @property
    def cost_usd(self) -> float | None:
        return usage_cost(self.usage)

    def tokens(self) -> tuple[int, int]:
        return usage_tokens(self.usage)


def _in_band_error(obj: Any, scrub: Scrubber) -> ErrorInfo:
    return parse_error(obj, in_band=True, scrub=scrub) or unparseable(in_band=True)


def _opt_text(value: Any, scrub: Scrubber) -> str | None:
    return upstream_text(value, scrub, 200) if isinstance(value, str) else None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 24 else text[:23] + "…"


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _usage(obj: Any, scrub: Scrubber) -> dict[str, Any] | None:
    """The usage object with only JSON-safe, scrubbed values (NaN/Infinity become null)."""
    usage = usage_of(obj)
    return scrub.deep(usage, limit=200, depth=3) if usage is not None else None


def _scrubbed_call(call: ToolCall, scrub: Scrubber) -> ToolCall:
    return ToolCall(
        id=upstream_text(call.id, scrub, 200),
        name=upstream_text(call.name, scrub, 200),
        arguments=valid_unicode(scrub(call.arguments)),
    )


class StreamAssembler:
    """Feed SSE `data:` payloads (already JSON-decoded) in order with `feed`; `release` the
    content they carried once per network read (the scrubbing is done there, so its cost is
    per read, not per chunk); read `.completion`."""

    def __init__(self, scrub: Scrubber = NO_SECRET) -> None:
        self.completion = Completion()
        self.scrub = scrub
        self.raw_content = False  # the upstream sent content (some may still be held back)
        self._text = StreamScrubber(scrub)
        self._pending: list[str] = []  # content fed, not yet released
        self._calls: dict[int, ToolCall] = {}

    def feed(self, chunk: dict[str, Any]) -> None:
        """Add one chunk (its content waits for `release`)."""
        c = self.completion
        if c.id is None:
            c.id = _opt_text(chunk.get("id"), self.scrub)
            c.model = _opt_text(chunk.get("model"), self.scrub)
            c.provider = provider_of(chunk, self.scrub)
        if "usage" in chunk:
            usage = _usage(chunk, self.scrub)
            if usage is not None:
                c.usage = usage
        if "error" in chunk:
            c.error = _in_band_error(chunk, self.scrub)
        choices = chunk.get("choices")
        if not choices or not isinstance(choices, list):
            return
        for choice in choices:
            if not isinstance(choice, dict):
                continue
            index = choice.get("index", 0)
            if index != 0 or isinstance(index, bool):  # one choice is asked for (n: 1)
                self._over("too_many_choices", f"a choice with index {_short(index)}")
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict):
                piece = delta.get("content")
                if piece and isinstance(piece, str):
                    self._pending.append(piece)
                    self.raw_content = True
                calls = delta.get("tool_calls")
                if calls and isinstance(calls, list):
                    self._tool_deltas(calls)
            finish = choice.get("finish_reason")
            if finish:
                c.finish_reason = upstream_text(finish, self.scrub, 64)

    def release(self) -> str:
        """The scrubbed content that may go out now (possibly "": the last few characters
        wait for more, see `finish`)."""
        if not self._pending:
            return ""
        text = self._pending[0] if len(self._pending) == 1 else "".join(self._pending)
        self._pending.clear()
        released = self._text.feed(text)
        self.completion.content += released
        return released

    def _tool_deltas(self, calls: list[Any]) -> None:
        for call in calls:
            if not isinstance(call, dict):
                continue
            idx = call.get("index")
            if isinstance(idx, bool) or not isinstance(idx, int) or not 0 <= idx < 2**31:
                idx = len(self._calls)
            if idx not in self._calls and len(self._calls) >= MAX_TOOL_CALLS:
                self._over("too_many_tool_calls", f"more than {MAX_TOOL_CALLS} tool calls")
                continue
            raw_fn = call.get("function")
            fn: dict[str, Any] = raw_fn if isinstance(raw_fn, dict) else {}
            slot = self._calls.setdefault(idx, ToolCall(id="", name="", arguments=""))
            slot.id = slot.id or _str(call.get("id")) or f"call_{idx}"
            slot.name += _str(fn.get("name"))
            slot.arguments += _str(fn.get("arguments"))
        self.completion.tool_calls = [self._calls[k] for k in sorted(self._calls)]

    def _over(self, reason: str, detail: str) -> None:
        """Mark the reply over a cap (the first one found is kept)."""
        if self.completion.over_cap is None:
            self.completion.over_cap = (reason, detail)

    def _checked_call(self, call: ToolCall) -> ToolCall:
        """The call scrubbed, its id and name over `MAX_CALL_FIELD_CHARS` marked (they are
        kept cut, and the reply is rejected for them)."""
        for reason, value in (
            ("tool_call_id_too_long", call.id),
            ("tool_name_too_long", call.name),
        ):
            if len(value) > MAX_CALL_FIELD_CHARS:
                self._over(reason, f"{len(value)} characters > {MAX_CALL_FIELD_CHARS}")
        return _scrubbed_call(call, self.scrub)

    def finish(self) -> str:
        """The stream ended complete ([DONE], or a clean end after a finish reason): the
        content not yet released, with the held-back end, and the tool calls scrubbed (only a finished reply's calls are ever handed out)."""
        released = self.release()
        held = self._text.flush()
        self.completion.content += held
        self.completion.tool_calls = [
            self._checked_call(self._calls[k]) for k in sorted(self._calls)
        ]
        self.completion.done = True
        return released + held
