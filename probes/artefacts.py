"""Serving artefacts a reply's text proves by itself (pure detectors, no verdicts):

    reasoning_leak(text)   reasoning in the content (SPEC C11): a think block, a harmony
                           analysis channel, an opening never closed or a closing never opened
    reasoning_may_open(text)  the reply's first characters may still become a tag or channel
                           that opens it (a streamed prefix: probes/start_decision.py)
    bpe_markers(text)      byte-level BPE markers where spaces and newlines belong (C9)
    literal_escapes(text)  escape sequences written out where text belongs, or a reply
                           JSON-encoded twice (C9)

Each returns a `Finding` (the kind, the marker found and the first characters around it) or
None. probes/integrity.py turns a finding into a START outcome of one reply; the gateway
may call these directly. Each looks only at what the text shows, and never at the letters
of the 17 locales: the BPE markers are U+0120 `Ġ` (space), U+010A `Ċ` (newline) and U+2581
`▁` (SentencePiece's space), code points no locale writes as a letter where a space belongs
(Turkish `ğ`/`Ğ` are U+011F/U+011E, Polish `ć` is U+0107, Maltese's `Ġ`/`Ċ` begin words after a
space); a marker counts only when it stands where whitespace belongs (glued to the text
before it, or opening the reply before a capital).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from probes.textutil import may_still_match, prefix_rx

SCAN_CHARS = 20_000  # characters of a reply the detectors read
EXCERPT_CHARS = 60


@dataclass(frozen=True)
class Finding:
    kind: str
    marker: str
    excerpt: str  # the first characters of the leak, or the text around the artefact
    count: int = 1

    def evidence(self, excerpt_key: str = "leak") -> dict[str, object]:
        """`leak` holds the first characters of a reasoning leak; `at` (decoding artefacts)
        the text around the first artefact."""
        return {
            "kind": self.kind,
            "marker": self.marker,
            excerpt_key: self.excerpt,
            "count": self.count,
        }


# ---- reasoning in the content (C11) --------------------------------------------------------

# (family, opening, closing): think blocks of the common reasoning templates
_BLOCKS: tuple[tuple[str, str, str], ...] = (
    ("think", "<think>", "</think>"),
    ("thinking", "<thinking>", "</thinking>"),
    ("think", "<seed:think>", "</seed:think>"),
    ("think", "◁think▷", "◁/think▷"),
    ("think", "[THINK]", "[/THINK]"),
    ("think", "<|begin_of_thought|>", "<|end_of_thought|>"),
    ("reasoning", "<reasoning>", "</reasoning>"),
    ("thinking", "<|thinking|>", "<|/thinking|>"),
)
_BLOCKS_LOWER = tuple((opening.lower(), closing.lower()) for _, opening, closing in _BLOCKS)
# harmony (gpt-oss): an analysis channel in the content, with its special tokens or with
# them stripped ("analysisThe user wants...assistantfinal...")
_CHANNEL = re.compile(r"<\|channel\|>\s*(?:analysis|commentary)|<\|start\|>assistant<\|channel\|>")
_STRIPPED_CHANNEL = re.compile(r"^analysis(?=[A-Z])|assistantfinal(?=\S)")
_LEADING = re.compile(r"^[\s\ufeff\u200b]*")
# the first character of every tag above and of `_CHANNEL`'s: a text without any holds none
_TAG_STARTS = frozenset(t[0] for pair in _BLOCKS_LOWER for t in pair) | {"<"}


def _excerpt_from(text: str, at: int) -> str:
    return " ".join(text[at : at + EXCERPT_CHARS].split())


def reasoning_leak(text: str) -> Finding | None:
    """Reasoning in the content: a think block opening the reply (`think`, `thinking`, ...;
    `unclosed` when it never closes), a closing tag with no opening (`unopened`: the
    template swallowed the opening), or a harmony analysis channel (`channel`)."""
    s = text[:SCAN_CHARS]
    lead = _LEADING.match(s)
    body = s[lead.end() if lead else 0 :]
    lower = body.lower()
    if not any(c in lower for c in _TAG_STARTS):  # no tag can be there (the common reply)
        m = _STRIPPED_CHANNEL.search(body)
        return Finding("channel", m.group(0), _excerpt_from(body, m.start())) if m else None
    for (family, opening, closing), (low_open, low_close) in zip(
        _BLOCKS, _BLOCKS_LOWER, strict=True
    ):
        at = lower.find(low_open)
        closed = lower.find(low_close)
        if at == 0 or (at > 0 and closed < 0):
            kind = "unclosed" if closed < 0 else family
            return Finding(kind, opening, _excerpt_from(body, at))
        if closed >= 0 and (at < 0 or at > closed):
            return Finding("unopened", closing, _excerpt_from(body, 0))
        if at > 0:
            return Finding(family, opening, _excerpt_from(body, at))
    m = _CHANNEL.search(body) or _STRIPPED_CHANNEL.search(body)
    if m:
        return Finding("channel", m.group(0), _excerpt_from(body, m.start()))
    return None


# What a reply's first characters may still become: any tag above (lower-cased, as they
# are compared), a harmony channel, or the stripped channel's opening word.
_TAG_AT_START = prefix_rx(
    re.compile("|".join(re.escape(t) for pair in _BLOCKS_LOWER for t in pair))
)
_CHANNEL_AT_START = prefix_rx(_CHANNEL)
_STRIPPED_AT_START = prefix_rx(_STRIPPED_CHANNEL)


def reasoning_may_open(text: str) -> bool:
    """True when the reply's first characters (blanks apart) are the beginning of a think
    tag, a harmony channel or `analysis…` that `reasoning_leak` would find opening the reply
    once more text came. A tag later in a reply can be known only when it comes."""
    body = _LEADING.sub("", text[:SCAN_CHARS], count=1)
    return (
        may_still_match(_TAG_AT_START, body.lower())
        or may_still_match(_CHANNEL_AT_START, body)
        or may_still_match(_STRIPPED_AT_START, body)
    )


# ---- byte-level BPE markers (C9) -----------------------------------------------------------

_MARKERS = "\u0120\u010a\u2581"  # Ġ Ċ ▁
_BLOCK_ELEMENTS = re.compile("[\u2580-\u259f]")  # ▁ beside ▂▃▅ is a sparkline, not a space
# a marker glued to the non-space character before it, unless it opens a capitalised word after
# an opening bracket, quote or dash ("(Ġużeppi": a Maltese name, not a space)
_GLUED_MARKER = re.compile(
    f"(?<=\\S)(?<![(\\[{{\"'“‘«„—–-])[{_MARKERS}]|(?<=\\S)[{_MARKERS}](?![^\\W\\d_])"
)
# a marker opening the reply before a capital, a marker, an emphasis mark or a quote
_OPENING_MARKER = re.compile(f'^[{_MARKERS}](?=[A-Z{_MARKERS}*_"“«„])')
# a glued marker that no letter follows (whitespace, punctuation, the end): no word begins
# there, so it stands for whitespace by itself (`。*Ċ\n「`, `」Ġ*`)
_LONE_MARKER = re.compile(f"(?<=\\S)[{_MARKERS}](?=\\s|$|[^\\w])")
# one odd character could be a name; a paragraph break in a spaceless locale is two (`。ĊĊ`)
BPE_MIN_MARKERS = 2


def bpe_markers(text: str) -> Finding | None:
    """Byte-level BPE markers where whitespace belongs: at least BPE_MIN_MARKERS glued
    markers, one opening the reply before a capital (`ĠShe`), or one glued marker that no
    letter follows. Kind `space`, `newline` or `sentencepiece` after the most frequent
    marker."""
    s = _LEADING.sub("", text[:SCAN_CHARS])
    glued = [
        m
        for m in _GLUED_MARKER.finditer(s)
        if not _BLOCK_ELEMENTS.match(s[m.start() - 1 : m.start()])
        and not _BLOCK_ELEMENTS.match(s[m.end() : m.end() + 1])
    ]
    opening = _OPENING_MARKER.match(s) or next(
        (m for m in glued if _LONE_MARKER.match(s, m.start())), None
    )
    count = len(glued) + (1 if opening and opening.start() == 0 else 0)
    if not opening and len(glued) < BPE_MIN_MARKERS:
        return None
    first = opening.start() if opening else glued[0].start()
    chars = [m.group(0) for m in glued] + (
        [opening.group(0)] if opening and opening.start() == 0 else []
    )
    top = max(set(chars), key=lambda c: (chars.count(c), c))
    kind = {"\u0120": "space", "\u010a": "newline", "\u2581": "sentencepiece"}[top]
    return Finding(kind, top, s[max(0, first - 20) : first + 40], count)


# ---- literal escape sequences (C9) ---------------------------------------------------------

_UNICODE_ESCAPE = re.compile(r"\\u[0-9a-fA-F]{4}")
# \n \r \t \" written out, not followed by a lower-case letter (a path: C:\new)
_TEXT_ESCAPE = re.compile(r'\\(?:[nrt](?![a-z])|")')
# one written-out newline between a sentence end (or an emphasis mark) and the next text
_GLUED_NEWLINE = re.compile(r'[.!?…。！？»”"*_)]\\n(?=\S)')
ESCAPES_MIN = 2


def _double_json(s: str) -> bool:
    """The whole reply is a JSON string literal (or the start of one cut short)."""
    if not s.startswith('"'):
        return False
    try:
        return isinstance(json.loads(s), str)
    except ValueError:
        return "\\n" in s or '\\"' in s


def literal_escapes(text: str) -> Finding | None:
    """Escape sequences written out where text belongs: a reply that is itself a JSON string
    (`double_json`), any `\\uXXXX` (`unicode`), or written-out newlines and quotes
    (`newline`: at least ESCAPES_MIN, or one glued between a sentence end and the text)."""
    s = text[:SCAN_CHARS].strip()
    unicode = list(_UNICODE_ESCAPE.finditer(s))
    escapes = list(_TEXT_ESCAPE.finditer(s))
    if _double_json(s):
        return Finding("double_json", '"', s[:EXCERPT_CHARS], len(unicode) + len(escapes))
    if unicode:
        at = unicode[0].start()
        return Finding("unicode", unicode[0].group(0), s[max(0, at - 20) : at + 40], len(unicode))
    glued = _GLUED_NEWLINE.search(s)
    if len(escapes) >= ESCAPES_MIN or glued:
        at = escapes[0].start() if escapes else glued.start() if glued else 0
        marker = escapes[0].group(0) if escapes else "\\n"
        return Finding("newline", marker, s[max(0, at - 20) : at + 40], max(len(escapes), 1))
    return None
