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
_BLANK = [""]


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

    def __init__(self, *, max_line_bytes: int) -> None:
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
        buf = self._buffer
        buf.extend(chunk)
        if self._at_start and buf:
            if len(buf) < len(_BOM) and _BOM.startswith(buf):
                return out  # wait: could still be a BOM
            if buf.startswith(_BOM):
                del buf[: len(_BOM)]
            self._at_start = False
        end = buf.rfind(b"\n")
        if end >= 0:
            block = bytes(buf[:end])  # whole lines only: a line end is never inside a character
            del buf[: end + 1]
            if not self._skipping_overlong:
                self._block(block, out)
            else:  # the tail of an overlong line ends at its LF
                self._skipping_overlong = False
                start = block.find(b"\n") + 1
                if start:
                    self._block(block[start:], out)
        if len(buf) > self.max_line_bytes:
            buf.clear()
            self.malformed_lines += 1
            self.overlong_lines += 1
            self._skipping_overlong = True
        return out

    def _events(self, text: str, out: list[Comment | Event]) -> None:
        """`text` (whole lines, no CR, no data line pending) event by event: an event that
        is one `data: ` line, the common one, is dispatched without going line by line (what
        `_lines` would make of it: a test holds the two equal on any stream and cutting)."""
        *events, last = text.split("\n\n")
        for event in events:
            if event.startswith("data: ") and "\n" not in event:
                out.append(Event(event[6:]))
            else:
                self._lines(event.split("\n"), out)
                self._lines(_BLANK, out)  # the blank line after it
        if last.startswith("data: ") and last.find("\n") == len(last) - 1:
            out.append(Event(last[6:-1]))  # its line ended, then the blank line (the last LF)
        else:
            self._lines(last.split("\n"), out)

    def _lines(self, lines: list[str], out: list[Comment | Event]) -> None:
        data = self._data
        for line in lines:
            if line.endswith("\r"):
                line = line[:-1]
            if line.startswith("data: "):  # the common line, without field parsing
                data.append(line[6:])
            elif not line:
                if data:
                    out.append(Event("\n".join(data)))
                    data.clear()
            else:
                self._field(line, out)

    def _block(self, block: bytes, out: list[Comment | Event]) -> None:
        """Whole lines (the last LF removed): decoded in one go, the common case; line by
        line when one is not UTF-8."""
        try:
            text = block.decode("utf-8")
        except UnicodeDecodeError:
            self._lines([self._decode(raw) for raw in block.split(b"\n")], out)
            return
        if self._data or "\r" in text:
            self._lines(text.split("\n"), out)
        else:
            self._events(text, out)

    def _decode(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.non_utf8_lines += 1
            return raw.decode("utf-8", errors="replace")

    def _field(self, line: str, out: list[Comment | Event]) -> None:
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
