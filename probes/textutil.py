"""Small text helpers shared by the language and integrity checks. Pure, no I/O.

prepare(text)        cap length, drop a leading BOM, make lone surrogates visible (U+FFFD)
script_of(ch)        coarse Unicode script of one character ("latin", "cyrillic", "han", ...)
script_counts(text)  letters per script
sentences(text)      sentence-ish segments; CJK/Thai aware (。！？, Thai spaces)
words(text)          lower-cased word tokens of space-separated scripts
prefix_rx(pattern)   a start rule's pattern for `may_still_match`
may_still_match(rx, s)  the rule, anchored, matches no text now but may once more comes
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache

import regex

# Replies are judged on their first MAX_ANALYSED_CHARS characters. A role-play reply is a
# few hundred to a few thousand characters; a 10 MB body must not cost seconds or memory,
# and the start of a reply is where a defect is visible anyway.
MAX_ANALYSED_CHARS = 8_000

BOM = "\ufeff"
REPLACEMENT = "\ufffd"

# Coarse script ranges (first code point, last code point, script). Ordered by start.
_RANGES: tuple[tuple[int, int, str], ...] = (
    (0x0041, 0x024F, "latin"),
    (0x0250, 0x02AF, "latin"),  # IPA
    (0x0370, 0x03FF, "greek"),
    (0x0400, 0x052F, "cyrillic"),
    (0x0530, 0x058F, "armenian"),
    (0x0590, 0x05FF, "hebrew"),
    (0x0600, 0x06FF, "arabic"),
    (0x0750, 0x077F, "arabic"),
    (0x0900, 0x097F, "devanagari"),
    (0x0E00, 0x0E7F, "thai"),
    (0x10A0, 0x10FF, "georgian"),
    (0x1100, 0x11FF, "hangul"),
    (0x1E00, 0x1EFF, "latin"),  # Latin Extended Additional (Vietnamese)
    (0x1F00, 0x1FFF, "greek"),
    (0x3040, 0x309F, "kana"),
    (0x30A0, 0x30FF, "kana"),
    (0x3130, 0x318F, "hangul"),
    (0x31F0, 0x31FF, "kana"),
    (0x3400, 0x4DBF, "han"),
    (0x4E00, 0x9FFF, "han"),
    (0xAC00, 0xD7AF, "hangul"),
    (0xF900, 0xFAFF, "han"),
    (0xFB50, 0xFDFF, "arabic"),
    (0xFE70, 0xFEFF, "arabic"),
    (0xFF21, 0xFF5A, "latin"),  # full-width Latin
    (0xFF66, 0xFF9F, "kana"),  # half-width katakana
    (0x20000, 0x2FA1F, "han"),
)
_STARTS = [r[0] for r in _RANGES]

_SENTENCE_END = re.compile(r"(?<=[.!?…؟])[\"'”’»」』)）\]*_]*\s+|(?<=[。！？])[」』）”’*_]*\s*|\n+")
_THAI_SPLIT = re.compile(r"\s+")
# Hyphens and apostrophes stay inside a word: Portuguese "encontrá-los" is not Spanish "los".
_WORD = re.compile(r"[^\W\d_]+(?:[-'’][^\W\d_]+)*")
_NOISE = re.compile(r"https?://\S+|www\.\S+|`[^`]*`|\S+@\S+\.\w+")


def prepare(text: str) -> str:
    """The analysed part of a reply: capped, leading BOM removed, lone surrogates -> U+FFFD.

    TypeError for anything but `str` (bytes must be decoded by the caller, who knows how)."""
    if not isinstance(text, str):
        raise TypeError(f"reply text must be str, got {type(text).__name__}")
    t = text[:MAX_ANALYSED_CHARS]
    if t.startswith(BOM):
        t = t[1:]
    # Lone surrogates cannot be encoded as UTF-8 (lingua's Rust side would raise): make them
    # a visible replacement character, which the encoding check then counts as corruption.
    return SURROGATE.sub(REPLACEMENT, t) if _has_surrogate(t) else t


SURROGATE = re.compile("[\ud800-\udfff]")


def _has_surrogate(t: str) -> bool:
    try:
        t.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


@lru_cache(maxsize=4096)
def script_of(ch: str) -> str:
    """Coarse script of a letter, "other" for non-letters and unlisted scripts."""
    if not ch.isalpha():
        return "other"
    cp = ord(ch)
    lo, hi = 0, len(_STARTS)
    while lo < hi:  # bisect right
        mid = (lo + hi) // 2
        if _STARTS[mid] <= cp:
            lo = mid + 1
        else:
            hi = mid
    if lo:
        start, end, name = _RANGES[lo - 1]
        if start <= cp <= end:
            return name
    return "other_letter"


_LETTER = re.compile(r"[^\W\d_]")


def script_counts(text: str) -> Counter[str]:
    """How many letters of each script the text holds (non-letters are not counted)."""
    return Counter(map(script_of, _LETTER.findall(text)))


def strip_noise(text: str) -> str:
    """Drop URLs, inline code and e-mail addresses (not language evidence)."""
    return _NOISE.sub(" ", text)


def sentences(text: str, *, spaceless_thai: bool = False) -> list[str]:
    """Sentence-ish segments, stripped, non-empty. Thai marks sentences with spaces."""
    parts = _SENTENCE_END.split(text)
    if spaceless_thai:
        parts = [p for part in parts for p in _THAI_SPLIT.split(part)]
    return [p.strip() for p in parts if p and p.strip()]


def words(text: str) -> list[str]:
    """Lower-cased letter words (apostrophes inside kept), for space-separated scripts."""
    return [w.lower() for w in _WORD.findall(text)]


def letter_count(text: str) -> int:
    return len(_LETTER.findall(text))


def excerpt(text: str, limit: int = 120) -> str:
    """A short single-line excerpt for evidence (never more than `limit` characters)."""
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def prefix_rx(pattern: re.Pattern[str]) -> regex.Pattern[str]:
    """`pattern` (a start rule's, written for `re`) compiled by the `regex` module, whose
    partial matching tells what a streamed prefix may still become (`may_still_match`)."""
    flags = regex.IGNORECASE if pattern.flags & re.IGNORECASE else 0
    return regex.compile(pattern.pattern, flags | regex.VERSION0)


def may_still_match(rx: regex.Pattern[str], s: str) -> bool:
    """True when `rx`, anchored at the start, does not match `s` but may match a text that
    begins with `s` (a partial match runs to its end): the rule is not settled yet. A full
    match, or none that any text could complete, is settled."""
    m = rx.match(s, partial=True)
    return m is not None and m.partial
