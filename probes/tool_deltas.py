"""Tool calls of a reply assembled from their pieces (pure): the streamed
`delta.tool_calls` entries of every chunk, or a non-streamed `message.tool_calls`.

OpenAI's stream format (OPENROUTER.md): the first delta of a call carries its `index`, `id`,
`type` and `function.name` (with empty `arguments`); later deltas append pieces of
`function.arguments` under the same `index`. What does not fit is recorded in words, never
raised, so the tools contract can fail it as `tools:inconsistent_deltas`:

    a delta without an integer index, or not an object
    arguments for an index whose call never began (no id or name first)
    an index whose id or name changes mid-call
    indices that do not run 0, 1, 2, ... (a gap, or a first call that is not 0)
    arguments sent as an object instead of a JSON string

Bounded: at most MAX_CALLS calls (MAX_CALLS x 4 entries in one delta) and
MAX_ARGUMENT_CHARS characters of arguments each (the reply's own byte bound holds too);
every string is scrubbed of the key before it is kept. A reply over a bound is never read as
whole: what is past it is dropped and the overflow recorded as a problem like the others
(more than MAX_CALLS calls, a delta with more entries, arguments cut), so the reply fails as
`tools:inconsistent_deltas` instead of being judged on calls or arguments cut short.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from probes.types import ToolCall
from wire.text import Scrubber, upstream_text

MAX_CALLS = 16
MAX_ARGUMENT_CHARS = 64_000
MAX_PROBLEMS = 8


@dataclass
class _Open:
    index: int
    id: str | None = None
    name: str | None = None
    pieces: list[str] = field(default_factory=list)
    size: int = 0


@dataclass
class ToolDeltas:
    """The calls of one reply under construction (see the module docstring)."""

    calls: dict[int, _Open] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    _last: int | None = None

    def _problem(self, text: str) -> None:
        if len(self.problems) < MAX_PROBLEMS and text not in self.problems:
            self.problems.append(text)

    def feed(self, entries: Any, *, streamed: bool) -> None:
        """One delta's `tool_calls` (streamed), or a whole message's (not streamed)."""
        if not isinstance(entries, list):
            self._problem("tool_calls is not a list")
            return
        if len(entries) > MAX_CALLS * 4:
            self._problem(f"a delta with more than {MAX_CALLS * 4} tool-call entries (cut)")
        for position, entry in enumerate(entries[: MAX_CALLS * 4]):
            if not isinstance(entry, dict):
                self._problem("a tool-call entry that is not an object")
                continue
            index = self._index(entry, position, streamed=streamed)
            if index is not None:
                self._piece(index, entry, streamed=streamed)

    def _index(self, entry: dict[str, Any], position: int, *, streamed: bool) -> int | None:
        index = entry.get("index")
        if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < 1000:
            return index
        if streamed or index is not None:
            self._problem(f"a delta without an integer index ({_short(index)})")
        if not streamed:
            return position  # a message's calls are a plain list
        return self._last if self._last is not None else 0

    def _piece(self, index: int, entry: dict[str, Any], *, streamed: bool) -> None:
        raw = entry.get("function")
        fn: dict[str, Any] = raw if isinstance(raw, dict) else {}
        call_id, name = entry.get("id"), fn.get("name")
        call = self.calls.get(index)
        if call is None:
            if len(self.calls) >= MAX_CALLS:
                self._problem(f"more than {MAX_CALLS} tool calls (the rest not read)")
                return
            if streamed and not call_id and not name:
                self._problem(f"arguments for index {index} before its call began (no id, no name)")
            call = self.calls[index] = _Open(index)
        self._last = index
        if isinstance(call_id, str) and call_id:
            if call.id is not None and call.id != call_id:
                self._problem(f"index {index} changed id mid-call")
            call.id = call.id or call_id
        if isinstance(name, str) and name:
            if call.name is not None and call.name != name:
                self._problem(f"index {index} changed name from {call.name!r} to {name!r}")
            call.name = call.name or name
        self._arguments(call, fn.get("arguments"))

    def _arguments(self, call: _Open, arguments: Any) -> None:
        if arguments is None:
            return
        if not isinstance(arguments, str):
            self._problem(f"arguments of index {call.index} sent as {type(arguments).__name__}")
            arguments = json.dumps(arguments, ensure_ascii=False, default=str)
        room = MAX_ARGUMENT_CHARS - call.size
        if len(arguments) > room:
            self._problem(
                f"arguments of index {call.index} over {MAX_ARGUMENT_CHARS} characters (cut)"
            )
        if room > 0:
            call.pieces.append(arguments[:room])
            call.size += min(len(arguments), room)

    def assembled(self, scrub: Scrubber) -> tuple[list[ToolCall], list[str]]:
        """The calls in index order and the problems found (indices checked here)."""
        indices = sorted(self.calls)
        if indices and indices != list(range(len(indices))):
            self._problem(f"indices {indices} do not run 0, 1, 2, ...")
        calls = [
            ToolCall(
                index=c.index,
                id=upstream_text(c.id, scrub, 120) if c.id else None,
                name=upstream_text(c.name, scrub, 120) if c.name else None,
                arguments=scrub("".join(c.pieces)),
            )
            for c in (self.calls[i] for i in indices)
        ]
        return calls, [upstream_text(p, scrub, 200) for p in self.problems]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 24 else text[:23] + "…"
