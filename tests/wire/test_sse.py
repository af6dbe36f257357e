"""The SSE parser's event-at-a-time fast path (issue 26) against a line-by-line reading of
the WHATWG rules written here, on generated streams cut every way: the same comments, events,
pending state and counters."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from wire.sse import Comment, Event, SSEParser

_PIECES = [
    "data: {}",
    'data: {"a":1}',
    "data: [DONE]",
    "data:",
    "data:x",
    "data: ",
    "data: two\ndata: lines",
    ": keep-alive",
    ":",
    "id: 3",
    "event: m",
    "retry: 10",
    "garbage",
    "foo: bar",
    "data: é日\u2028",
    "",
]


def reference(raw: bytes) -> tuple[list[Comment | Event], int, bool]:
    """Line by line, as the rules read: (items, malformed lines, an event or line pending)."""
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    *lines, rest = raw.decode("utf-8").split("\n")
    items: list[Comment | Event] = []
    data: list[str] = []
    malformed = 0
    for line in lines:
        line = line.removesuffix("\r")
        if not line:
            if data:
                items.append(Event("\n".join(data)))
                data = []
        elif line.startswith(":"):
            items.append(Comment(line[1:].strip()))
        else:
            name, colon, value = line.partition(":")
            if not colon:
                malformed += 1
            elif name == "data":
                data.append(value.removeprefix(" "))
            elif name not in ("event", "id", "retry"):
                malformed += 1
    return items, malformed, bool(rest) or bool(data)


def fed_in_cuts(parser: SSEParser, raw: bytes, cuts: list[int]) -> list[Comment | Event]:
    """What `parser` makes of `raw` fed in pieces of the lengths `cuts`, then the rest."""
    got: list[Comment | Event] = []
    pos = 0
    for cut in cuts:
        got += parser.feed(raw[pos : pos + cut])
        pos += cut
    return got + parser.feed(raw[pos:])


@given(st.lists(st.integers(min_value=1, max_value=7), min_size=1, max_size=40))
def test_c3_sse_split_anywhere_same_events(cuts: list[int]) -> None:
    """C3: the parser yields the same events however the bytes are chunked (BOM included)."""
    raw = '\ufeff: ping\n\ndata: {"x":"é日"}\n\nid: 3\nevent: m\ndata: a\ndata: b\n\ndata: [DONE]\n\n'.encode()
    whole = SSEParser(max_line_bytes=1_000_000).feed(raw)
    got = fed_in_cuts(SSEParser(max_line_bytes=1_000_000), raw, cuts)
    assert got == whole == [Comment("ping"), Event('{"x":"é日"}'), Event("a\nb"), Event("[DONE]")]


_STREAMS = st.lists(
    st.tuples(
        st.sampled_from(_PIECES), st.sampled_from(["\n", "\r\n", "\n\n", "\r\n\r\n", "\n\n\n"])
    ),
    max_size=14,
).map(lambda parts: "".join(p + end for p, end in parts))


@settings(max_examples=400, deadline=None)
@given(_STREAMS, st.booleans(), st.booleans(), st.lists(st.integers(1, 40), max_size=12))
def test_issue26_the_fast_path_reads_as_the_lines_do(
    text: str, bom: bool, unfinished: bool, cuts: list[int]
) -> None:
    raw = (b"\xef\xbb\xbf" if bom else b"") + text.encode() + (b"data: half" if unfinished else b"")
    expected, malformed, pending = reference(raw)
    parser = SSEParser(max_line_bytes=1_000_000)
    got = fed_in_cuts(parser, raw, cuts)
    assert got == expected
    assert parser.malformed_lines == malformed
    assert parser.pending == pending


def test_issue26_the_common_read_is_one_event_per_data_line() -> None:
    """The shape every provider streams, in one read and cut inside its events."""
    raw = b"".join(b'data: {"i":%d}\n\n' % i for i in range(50)) + b"data: [DONE]\n\n"
    want = [Event(f'{{"i":{i}}}') for i in range(50)] + [Event("[DONE]")]
    assert SSEParser(max_line_bytes=1000).feed(raw) == want
    parser = SSEParser(max_line_bytes=1000)
    assert parser.feed(raw[:101]) + parser.feed(raw[101:]) == want and not parser.pending
