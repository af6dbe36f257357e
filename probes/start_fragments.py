"""Start defects of one reply that a first-character rule misses (SPEC C9, issue 14). Pure.

    invisible_start(raw)      a byte-order mark or zero-width character before the text
    leak_start(s)             a chat-template token or role label opening `s`
    fragment_start(s, spec)   the kind of defect of an opening `s` (already stripped), or None

Kinds (the `kind` of a `stray_start` outcome):

    invisible_prefix     U+FEFF, U+200B-U+200D, U+2060-U+2064, U+180E or a soft hyphen before
                         the text (bidi marks such as U+200F before Arabic are writing, not noise)
    template_token       a chat-template token of any common family: ChatML / Llama 3 / Phi /
                         Command R / harmony `<|...|>`, DeepSeek `<｜...｜>`, `<s>` `</s>` `<bos>`
                         `<eos>` `<think>`, Gemma `<start_of_turn>`, `<<SYS>>`, `[INST]`,
                         `[gMASK]`, Alpaca `### Response:`
    role_label           `assistant:` / `user:` / `human:` (any case, optionally bold), or
                         `assistant` / `model` alone on the first line
    glued_fragment       a lower-case run glued to a capitalised word (`ysicsShe`, `ностиОна`),
                         or a run in a script foreign to the locale glued to the first word
                         (`tion彼女は`, `ingقالت`, `的She`); a Latin run with a capital in it is a
                         name or a brand (`iPhoneを`), not a fragment
    fragment_before_start  a lower-case (or foreign-script) word-piece, a space, then the real
                         start: an emphasis marker, a quote, a capitalised word or the locale's
                         own caseless script (`ysics *She`, `ing 彼女は`), unless the word is one a
                         reply may open with (probes/data/start/lower_openers.json)
    word_piece           the text opens with a character that cannot begin a word: a combining
                         mark, a small kana or prolonged-sound mark, a Thai following vowel or
                         repetition mark, an Arabic tatweel
    doubled_emphasis     the opening run closes short right after a sentence end (`**She smiles.*`)
    unbalanced_emphasis  an opening marker never closed: a mixed opening whose inner marker
                         closes alone (`_*She smiles.*`), the first paragraph ends with it open,
                         or dialogue opens (a sentence end, a space, then a quote or a dash)
                         while it is open (Thai ends sentences with a space: rarely seen there)

Every rule looks only at what the text shows: on a prefix of a clean reply (the gateway's
streaming check decides on a prefix of at most ~24 characters, probes/start_decision.py) a
rule either has the evidence or stays silent, so a prefix is never flagged when the whole
reply is clean. `fragment_rules_settled` says when no text that follows can change them.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from probes.locale_spec import LocaleSpec
from probes.textutil import may_still_match, prefix_rx, script_of

# ---- invisible bytes -----------------------------------------------------------------------

_INVISIBLE = frozenset("\ufeff\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\u180e\u00ad")


def invisible_start(raw: str) -> str | None:
    """`invisible_prefix` when a BOM or zero-width character precedes the text."""
    for ch in raw[:64]:
        if ch in _INVISIBLE:
            return "invisible_prefix"
        if not ch.isspace():
            return None
    return None


# ---- chat-template leaks -------------------------------------------------------------------

_TEMPLATE = re.compile(
    r"<\|[^|<>\n]{1,40}\|>"
    r"|<｜[^｜<>\n]{1,40}｜>"
    r"|</?(?:s|bos|eos|pad|unk|think|sop|eop|start_of_turn|end_of_turn)>"
    r"|<</?SYS>>"
    r"|\[/?(?:INST|SYS|gMASK|sMASK)\]"
    r"|#{2,4}\s*(?:Response|Assistant|Instruction|Input|System|Human|User)\s*:",
    re.IGNORECASE,
)
_ROLE = re.compile(
    r"[*_]{0,2}(?:assistant|user|human)[*_]{0,2}\s*:|(?:assistant|model)[ \t]*\r?\n",
    re.IGNORECASE,
)

# ---- word pieces ---------------------------------------------------------------------------

# Characters that never begin a word: small kana, the prolonged-sound and iteration marks,
# Thai following vowels and the repetition mark, the Arabic tatweel (combining marks: below).
_NO_WORD_START = frozenset(
    "ぁぃぅぇぉっゃゅょゎゕゖァィゥェォッャュョヮヵヶーゝゞヽヾ々"
    "\u0e30\u0e32\u0e33\u0e45\u0e46"
    "\u0640"
)
_LETTERS = re.compile(r"[^\W\d_]+")
# letters glued to a number or to an opening ¡ ¿ (a reply never writes `ment14` or `ären¡`)
_PIECE_GLUED = re.compile(r"([^\W\d_]{2,24})(?=[0-9¡¿])")
_FRAGMENT_SPACE = re.compile(r"([^\W\d_]{1,24})[ \t]+(\S)")
# what a reply's real start may open with: markers, quotes, dashes, inverted marks, brackets
_OPENING = set("*_\"'“”„«»‹›「」『』《》‘’—–-¡¿([")
_OPENERS_FILE = Path(__file__).parent / "data" / "start" / "lower_openers.json"


@cache
def lower_openers(locale: str) -> frozenset[str]:
    """Words a clean reply in `locale` may open with in lower case (see the data file)."""
    data = json.loads(_OPENERS_FILE.read_text(encoding="utf-8"))
    words = set(data.get("_latin", [])) | set(data.get(locale, []))
    if locale in ("ru", "uk"):
        words |= set(data.get("_cyrillic", []))
    return frozenset(w.lower() for w in words)


def _cased(ch: str) -> bool:
    return ch.isupper() or ch.islower()


def _glued(run: str, spec: LocaleSpec, closed: bool) -> bool:
    """A word-piece glued to the first word: lower-case run + capitalised word, or a run in
    a foreign script glued to more letters. `closed`: the text goes on after the run."""
    for i in range(2, len(run)):
        if run[i].isupper() and run[:i].islower():
            # a capitalised word (She) or a one-letter one closed by the run's end (A feira)
            if i + 1 < len(run) and run[i + 1].islower():
                return True
            if i + 1 == len(run) and closed:
                return True
    first = script_of(run[0])
    for i in range(1, len(run)):
        if script_of(run[i]) != first:
            prefix = run[:i]
            if first in spec.scripts:
                return False
            # a foreign run with a capital is a name or brand (iPhoneを, Wi-Fiが); a caseless
            # foreign run (的She) or a lower-case one (tion彼女) is a fragment
            return not any(ch.isupper() for ch in prefix)
    return False


def _foreign(frag: str, spec: LocaleSpec) -> bool:
    return not {script_of(ch) for ch in frag} <= spec.scripts


def _may_precede_start(frag: str, spec: LocaleSpec) -> bool:
    """Whether a word followed by a space could be a word-piece before the real start (then
    the character after the space decides): not a name or capitalised word, not the locale's
    own caseless script, not a word a reply may open with."""
    if any(ch.isupper() for ch in frag):
        return False  # a name, a brand, a capitalised word: the real start
    if not _foreign(frag, spec) and not all(_cased(ch) for ch in frag):
        return False  # the locale's own caseless script: no way to tell a piece from a word
    return frag.lower() not in lower_openers(spec.code)


def _before_start(s: str, spec: LocaleSpec) -> bool:
    """A lower-case or foreign word-piece, a space, then the real start."""
    m = _FRAGMENT_SPACE.match(s)
    if not m:
        return False
    frag, nxt = m.group(1), m.group(2)
    if not _may_precede_start(frag, spec):
        return False
    if nxt in _OPENING or nxt.isupper() or nxt.isdigit() or unicodedata.category(nxt)[0] == "S":
        return True
    nxt_script = script_of(nxt)
    # the locale's own caseless letters after a foreign piece (ing 彼女は, tion قالت)
    return _foreign(frag, spec) and nxt.isalpha() and not _cased(nxt) and nxt_script in spec.scripts


def _word_piece(s: str) -> bool:
    ch = s[0]
    return ch in _NO_WORD_START or unicodedata.category(ch).startswith("M")


# ---- emphasis balance ----------------------------------------------------------------------

_LEAD = re.compile(r"[*_]+(?=\S)")
_RUN = re.compile(r"\*+|_+")
_SENTENCE_END = frozenset(".!?…。！？")
_DIALOGUE = re.compile(r"[.!?…。！？][\"'”’»」』)]*\s+[\"“«„「『—–]")
MAX_LINE_CHARS = 400
_PARAGRAPH = re.compile(r"\n[ \t]*\n")


@dataclass
class _Open:
    char: str
    n: int
    lead: bool  # one of the reply's opening markers


class _Pending:
    """What `_emphasis_scan` answers while the text that follows may still change its
    verdict (a prefix of a stream, probes/start_decision.py)."""

    def __repr__(self) -> str:
        return "PENDING"


PENDING = _Pending()


def _emphasis(s: str) -> str | None:
    """The emphasis balance of a whole opening `s` (a reply, or as much of it as is judged)."""
    found = _emphasis_scan(s, complete=True)
    assert not isinstance(found, _Pending)
    return found


def emphasis_settled(s: str) -> bool:
    """True when no text that follows `s` can change what `_emphasis` says of it: every
    opening marker closed, a defect shown, or the first line fixed (its paragraph ended, or
    its MAX_LINE_CHARS read) with visible text after it, so that a reply ending there and
    stripped reads the same line."""
    return not isinstance(_emphasis_scan(s, complete=False), _Pending)


def _emphasis_scan(s: str, *, complete: bool) -> str | _Pending | None:
    """`_emphasis`'s verdict; PENDING (only when not `complete`) while it depends on text
    that has not arrived: a run of markers at the end of the line read so far (it may go on,
    and what follows it decides), or an opening still open on a line not yet fixed."""
    lead = _LEAD.match(s)
    if not lead:
        return PENDING if not complete and not s.strip("*_") else None
    stack = [_Open(m.group(0)[0], len(m.group(0)), True) for m in _RUN.finditer(lead.group(0))]
    mixed = len(stack) > 1
    # emphasis may span a line break but not a paragraph (CommonMark)
    reach = lead.end() + MAX_LINE_CHARS
    parts = _PARAGRAPH.split(s[lead.end() : reach], maxsplit=1)
    line, newline = parts[0], len(parts) > 1
    fixed = complete or ((newline or len(s) >= reach) and bool(s[lead.end() + len(line) :].strip()))
    for m in _RUN.finditer(line):
        char, n, start, end = m.group(0)[0], len(m.group(0)), m.start(), m.end()
        if end == len(line) and not fixed:
            return PENDING
        prev = line[start - 1] if start else char
        nxt = line[end] if end < len(line) else " "
        inside_word = prev.isalnum() and nxt.isalnum()
        if inside_word and not (stack and stack[-1].char == char):
            continue  # snake_case, a*b: not emphasis (CJK glues a closer to the next word)
        if _DIALOGUE.search(line[:start]):
            return "unbalanced_emphasis"  # *She smiles. "Hi," she says. ... *
        if prev.isspace():
            if not nxt.isspace():
                stack.append(_Open(char, n, False))
            continue
        if end == len(line) and not newline:
            return None  # the text may be cut inside this run (`**Day 14.*|*`): undecidable
        found = _close(stack, char, n, prev, mixed, line[end:])
        if found is not _OPEN:
            return found
    if _DIALOGUE.search(line) or (newline and fixed):
        # dialogue opened, or the first paragraph ended, with the opening marker still open
        return "unbalanced_emphasis"
    return None if fixed else PENDING


_OPEN = _Pending()  # `_close`: the opening markers are not all closed yet (the scan goes on)


def _close(
    stack: list[_Open], char: str, n: int, prev: str, mixed: bool, after: str
) -> str | _Pending | None:
    """A closing run of `n` x `char` (after `prev`, before `after`) against the open markers:
    a defect it shows, None once every opening marker is closed, else `_OPEN`."""
    while n and stack:
        top = stack[-1]
        if top.char != char:
            return "unbalanced_emphasis" if top.lead else None
        if top.n > n:
            top.n -= n
            if top.lead and prev in _SENTENCE_END:
                return "doubled_emphasis"  # **She smiles.*
            n = 0
            continue
        stack.pop()
        n -= top.n
        outer = stack[-1] if stack else None
        if top.lead and mixed and outer and outer.lead and not after.startswith(outer.char):
            return "unbalanced_emphasis"  # _*She smiles.*
    if not any(o.lead for o in stack):
        return None  # every opening marker closed
    return _OPEN


# ---- all rules -----------------------------------------------------------------------------

# What `fragment_start` strips before it reads the first word: markers and opening quotes.
INNER_STRIP = "*_\"'“«„「『"
# The leak rules as the `regex` module reads them, for what a prefix may still become.
_TEMPLATE_PREFIX = prefix_rx(_TEMPLATE)
_ROLE_PREFIX = prefix_rx(_ROLE)


def fragment_rules_settled(s: str, spec: LocaleSpec) -> bool:
    """True when `fragment_start`'s rules, all but the emphasis balance (`emphasis_settled`),
    say of every text that begins with `s` what they say of `s` (probes/start_decision.py:
    the gateway's release). They read a template token or role label to its end (`s` may
    still become one: not settled), the first character; the first word after leading
    markers and quotes (`INNER_STRIP`) with the character after it (so the word has ended);
    a word-piece before a space the first character after the space."""
    if may_still_match(_TEMPLATE_PREFIX, s) or may_still_match(_ROLE_PREFIX, s):
        return False
    first = s[0]
    if first not in INNER_STRIP and not _LETTERS.match(first):
        return True  # no rule reads past a first character of any other kind
    lead = len(s) - len(s.lstrip(INNER_STRIP))
    if lead >= len(s):
        return False  # only markers and quotes so far
    word = _LETTERS.match(s, lead)
    if word is None:
        return True  # no word after them (`« D'accord`, `**14日目`): no rule reads one
    if word.end() >= len(s):
        return False  # the first word may go on
    if lead == 0 and s[word.end()] in " \t" and _may_precede_start(word.group(0), spec):
        blanks = len(s) - word.end() - len(s[word.end() :].lstrip(" \t"))
        return word.end() + blanks < len(s)  # the character after the space is here
    return True


def leak_start(s: str) -> str | None:
    """`template_token` / `role_label` when `s` opens with a chat-template leak."""
    if _TEMPLATE.match(s):
        return "template_token"
    if _ROLE.match(s):
        return "role_label"
    return None


def fragment_start(s: str, spec: LocaleSpec) -> str | None:
    """The kind of leak, fragment or emphasis defect at the start of `s`, or None."""
    leak = leak_start(s)
    if leak:
        return leak
    if _word_piece(s):
        return "word_piece"
    inner = s.lstrip(INNER_STRIP)
    for text in (s, inner) if inner and inner != s else (s,):
        m = _LETTERS.match(text)
        if m and _glued(m.group(0)[:40], spec, closed=m.end() < len(text) and m.end() <= 40):
            return "glued_fragment"
    m = _PIECE_GLUED.match(s)
    if m and (m.group(1).islower() or not {script_of(c) for c in m.group(1)} <= spec.scripts):
        return "glued_fragment"  # ären¡Feliz, ment14. Gün, tion14日目
    if _before_start(s, spec):
        return "fragment_before_start"
    return _emphasis(s)
