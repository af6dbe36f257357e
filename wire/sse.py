"""Server-Sent Events framing: a small, strict, incremental parser (bytes in, events out)
and the encoder of `data:` events.

Follows the WHATWG event-stream rules the OpenRouter stream relies on:
- lines end with LF or CRLF (a lone CR is not treated as a line end);
- a line starting with `:` is a comment (keep-alive, e.g. `: OPENROUTER PROCESSING`);
- `data:` lines accumulate (joined by LF) and a blank line dispatches them as one event;
- `event:`, `id:` and `retry:` are accepted and ignored; one space after the colon is stripped;
- a UTF-8 BOM at the very start of the stream is dropped;
- an unfinished event at end of stream is discarded (`pending` tells whether one was).

Anything else is counted, never raised: a line that is not valid UTF-8 is decoded
with U+FFFD replacements and counted in `non_utf8_lines`; a line with an unknown
field name (or none) is counted in `malformed_lines` and ignored; a line longer than
`max_line_bytes` is cut there and counted as malformed (memory stays bounded).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

_BOM = b"\xef\xbb\xbf"
_KNOWN_IGNORED_FIELDS = frozenset({"event", "id", "retry"})


@dataclass(frozen=True, slots=True)
class Comment:
    """A `:` line: a keep-alive, never a token."""

    text: str


@dataclass(frozen=True, slots=True)
class Event:
    """A dispatched event: the joined `data:` lines."""

    data: str


class SSEParser:
    """Feed bytes with `feed()`; it returns the comments and events completed so far."""

    def __init__(self, *, max_line_bytes: int = 1_000_000) -> None:
        self.max_line_bytes = max_line_bytes
        self.malformed_lines = 0
        self.non_utf8_lines = 0
        self.overlong_lines = 0
        self._buffer = bytearray()
        self._data: list[str] = []
        self._at_start = True
        self._skipping_overlong = False

    @property
    def pending(self) -> bool:
        """True when bytes or data lines are waiting for a line end / blank line."""
        return bool(self._buffer) or bool(self._data)

    def feed(self, chunk: bytes) -> list[Comment | Event]:
        out: list[Comment | Event] = []
        if self._at_start and chunk:
            self._buffer.extend(chunk)
            if len(self._buffer) < len(_BOM) and _BOM.startswith(bytes(self._buffer)):
                return out  # wait: could still be a BOM
            if self._buffer.startswith(_BOM):
                del self._buffer[: len(_BOM)]
            self._at_start = False
        else:
            self._buffer.extend(chunk)
        start = 0
        while True:
            newline = self._buffer.find(b"\n", start)
            if newline < 0:
                break
            raw = bytes(self._buffer[start:newline])
            start = newline + 1
            if self._skipping_overlong:
                self._skipping_overlong = False  # the tail of an overlong line ends here
                continue
            self._line(raw.removesuffix(b"\r"), out)
        del self._buffer[:start]
        if len(self._buffer) > self.max_line_bytes:
            self._buffer.clear()
            self.malformed_lines += 1
            self.overlong_lines += 1
            self._skipping_overlong = True
        return out

    def _line(self, raw: bytes, out: list[Comment | Event]) -> None:
        if raw.startswith(b"data: "):  # the common line, without the general field parsing
            try:
                self._data.append(raw[6:].decode("utf-8"))
                return
            except UnicodeDecodeError:
                pass  # counted and replaced below
        elif not raw:
            if self._data:
                out.append(Event("\n".join(self._data)))
                self._data = []
            return
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            self.non_utf8_lines += 1
            line = raw.decode("utf-8", errors="replace")
        if not line:
            if self._data:
                out.append(Event("\n".join(self._data)))
                self._data = []
            return
        if line.startswith(":"):
            out.append(Comment(line[1:].strip()))
            return
        field, colon, value = line.partition(":")
        if not colon:
            self.malformed_lines += 1
            return
        value = value.removeprefix(" ")
        if field == "data":
            self._data.append(value)
        elif field not in _KNOWN_IGNORED_FIELDS:
            self.malformed_lines += 1


KEEPALIVE = b": OPENROUTER PROCESSING\n\n"
DONE = b"data: [DONE]\n\n"


def encode_event(payload: dict[str, Any]) -> bytes:
    """One `data:` event carrying `payload` as compact JSON."""
    return (
        b"data: "
        + json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        + b"\n\n"
    )
