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
            data = self._data
            for line in self._lines(block):
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
        if len(buf) > self.max_line_bytes:
            buf.clear()
            self.malformed_lines += 1
            self.overlong_lines += 1
            self._skipping_overlong = True
        return out

    def _lines(self, block: bytes) -> list[str]:
        """The lines of `block` (whole lines, their LF removed), decoded."""
        if self._skipping_overlong:
            self._skipping_overlong = False  # the tail of an overlong line ends here
            start = block.find(b"\n") + 1
            if not start:
                return []
            block = block[start:]
        try:  # the common case: one decode for every line of this read
            return block.decode("utf-8").split("\n")
        except UnicodeDecodeError:
            return [self._decode(raw) for raw in block.split(b"\n")]

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
