"""Response-start, repetition and encoding integrity (SPEC C9, and C7's encoding part).

Pure functions from a reply's text to an `Outcome` (contract START):

    check_response_start(text, locale)  reasoning in the content (`reasoning_leak`, C11), or
                                        stray punctuation / foreign token fragment / template leak /
                                        invisible bytes / broken emphasis before the text
    check_repetition(text)              repeated n-grams, runs and sentences (a loop)
    check_encoding(text, locale)        mojibake (ftfy), U+FFFD, control characters, mixed-script words
    check_decoding(text)                byte-level BPE markers (`bpe_markers`) and escape sequences
                                        written out (`literal_escapes`) where text belongs
    check_reply(text, locale)           the four above for one reply
    worst_of(outcomes)                  the failure that names a reply best (reasoning, decoding first)
    judge_start_share(outcomes)         endpoint verdict over a round: a share, never one reply

Every threshold is a module constant with the reason for its value; none is tuned per text.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path

from ftfy.badness import is_bad

from ground.settings import ProbeConfig
from probes.artefacts import Finding, bpe_markers, literal_escapes, reasoning_leak
from probes.locale_spec import LocaleSpec, locale_spec
from probes.start_fragments import (
    fragment_rules_settled,
    fragment_start,
    invisible_start,
    leak_start,
)
from probes.textutil import (
    MAX_ANALYSED_CHARS,
    REPLACEMENT,
    SURROGATE,
    excerpt,
    may_still_match,
    prefix_rx,
    prepare,
    script_counts,
    script_of,
    sentences,
)
from probes.types import Contract, Outcome, OutcomeStatus

# ---- response start -------------------------------------------------------------------------

# Characters that never open a clean reply: closers, separators, sentence ends (ASCII, CJK
# full-width, Arabic). Not here: quotes, `*`/`_`/`#`/`>`/`-` (Markdown), `¿¡`, `(`/`[`, `—`.
_STRAY_FIRST = set(",;:)]}.!?|\\/=+%^&@、。，；：）」』》】〕〉！？،؛؟·")
_ELLIPSIS = ("...", "…")
# `»` opens a quotation in German (»Hallo«); elsewhere it is a closer.
_STRAY_UNLESS = {"»": frozenset({"de"})}
# Special-token / markup fragments: <|im_end|>, </s>, <think>, [/INST].
_TOKEN_START = re.compile(r"<\|?/?[A-Za-z_|]|\[/?INST\]")
# A quote directly followed by a Markdown marker is stray unless the quoted emphasis closes
# with the quote right after it ("**Run!**" is fine; "*She smiles.* ... is not). Single quotes
# too ('*She…, ‘*She…, ’*She…): models and tokenizers leak them exactly like double ones.
_QUOTE_MARKER = re.compile(r"[\"'“«„‘’]\s*(?:[*_]|#)")
_QUOTED_EMPHASIS = re.compile(r"([\"'“«„‘’])(\*{1,3}|_{1,3})[^*_\n]+\2[\"'”»“‘’]")
# A hyphen glued to an emphasis marker (-*She…, -_She…): a Markdown list item needs a space
# after the `-` and a horizontal rule is `---`, so this is a stray mark. A dialogue dash
# followed by a space ("— Você voltou") or by text is not matched.
_DASH_MARKER = re.compile(r"-[*_]")
# A run of letters glued to an opening `*` or quote and then text: "ysics*She", "ics\"She".
_GLUED = re.compile(r"([^\W\d_]{1,24})([*\"“«„「『《])(?=\S)")
_FIRST_WORD = re.compile(r"[^\W\d_]+")


def _lstrip_invisible(text: str) -> str:
    i = 0
    while i < len(text) and (text[i].isspace() or unicodedata.category(text[i]) == "Cf"):
        i += 1
    return text[i:]


def _start_defect(s: str, spec: LocaleSpec) -> str | None:
    """The kind of stray start, or None when the opening is clean."""
    if s.startswith(_ELLIPSIS):
        return None
    first = s[0]
    if _TOKEN_START.match(s):
        return "token_fragment"
    if first in _STRAY_UNLESS and spec.code not in _STRAY_UNLESS[first]:
        return "stray_punctuation"
    if first in _STRAY_FIRST:
        return "stray_punctuation"
    if _QUOTE_MARKER.match(s) and not _QUOTED_EMPHASIS.match(s):
        return "quote_before_markdown"
    if _DASH_MARKER.match(s):
        return "dash_before_markdown"
    m = _GLUED.match(s)
    if m:
        fragment_scripts = {script_of(ch) for ch in m.group(1)}
        foreign = not fragment_scripts <= spec.scripts
        # In ja/zh/th (no spaces) and ko, text glued to a quote or `*` is ordinary writing
        # (她“嗯”了一声); only a fragment in another script is a token fragment there.
        if foreign or not (spec.spaceless or spec.code == "ko"):
            return "glued_fragment"
    return None


# Characters of the opening judged: enough for the first line's emphasis to close.
START_CHARS = 600


def opening(text: str) -> str:
    """The part of a reply the start rules read: its first START_CHARS characters, from the
    first one that is neither whitespace nor invisible."""
    return _lstrip_invisible(prepare(text)[:START_CHARS])


# `_start_defect`'s anchored rules as the `regex` module reads them: what a prefix may
# still become (a token, a quote before Markdown that may still be quoted emphasis, a hyphen
# glued to a marker).
_TOKEN_PREFIX = prefix_rx(_TOKEN_START)
_QUOTE_MARKER_PREFIX = prefix_rx(_QUOTE_MARKER)
_QUOTED_EMPHASIS_PREFIX = prefix_rx(_QUOTED_EMPHASIS)
_DASH_PREFIX = prefix_rx(_DASH_MARKER)
_GLUED_OPENERS = frozenset('*"“«„「『《')  # `_GLUED`'s second group


def start_rules_settled(s: str, spec: LocaleSpec) -> bool:
    """True when every rule of `check_response_start` but the emphasis balance
    (`start_fragments.emphasis_settled`) and the reasoning markers (`artefacts`) says of any
    text that begins with the opening `s` what it says of `s`: the decision the gateway may
    act on (probes/start_decision.py). An anchored rule that may still match is not settled
    (`may_still_match`: an ellipsis being written, `<|im_…`, `"**Run!…` that may close as
    quoted emphasis, `-` before its next character); the rules on the first word read it to
    its end and the character after it. `invisible_start` reads only up to the first
    visible character, which `s` has."""
    if s[0] == "." and len(s) < len(_ELLIPSIS[0]) and _ELLIPSIS[0].startswith(s):
        return False
    if any(may_still_match(rx, s) for rx in (_TOKEN_PREFIX, _QUOTE_MARKER_PREFIX, _DASH_PREFIX)):
        return False
    if _QUOTE_MARKER.match(s) and may_still_match(_QUOTED_EMPHASIS_PREFIX, s):
        return False
    word = _FIRST_WORD.match(s)
    if word is not None:  # `_GLUED`: the first word, an opening `*` or quote, then text
        if word.end() >= len(s):
            return False
        if s[word.end()] in _GLUED_OPENERS and word.end() + 1 >= len(s):
            return False
    return fragment_rules_settled(s, spec)


def check_response_start(text: str, locale: str) -> Outcome:
    """Fail `reasoning_leak` when reasoning is in the content (probes/artefacts.py: the
    first characters are the evidence), `stray_start` when the reply opens with stray
    punctuation, a token fragment, a template leak, invisible bytes or broken emphasis
    (probes/start_fragments.py)."""
    s, found = _start_finding(text, locale)
    if not s:
        return _out(OutcomeStatus.INCONCLUSIVE, "empty", locale, {})
    if isinstance(found, Finding):
        return _out(OutcomeStatus.FAIL, "reasoning_leak", locale, found.evidence())
    ev = {"start": excerpt(s, 40)}
    if found:
        return _out(OutcomeStatus.FAIL, "stray_start", locale, {**ev, "kind": found})
    return _out(OutcomeStatus.PASS, "ok", locale, ev)


def _start_finding(text: str, locale: str) -> tuple[str, Finding | str | None]:
    """The reply's opening and what is wrong with it: the reasoning found in the content,
    the kind of stray start, or None (clean, or an empty opening)."""
    s = opening(text)
    if not s:
        return s, None
    leak = reasoning_leak(text)
    if leak is not None:
        return s, leak
    spec = locale_spec(locale)
    kind = (
        invisible_start(text) or leak_start(s) or _start_defect(s, spec) or fragment_start(s, spec)
    )
    return s, kind or None


# ---- repetition ------------------------------------------------------------------------------

# Clean role-play replies of 25+ word 4-grams have >= 0.8 distinct 4-grams; a loop repeating a
# phrase or paragraph drives it towards 0. 0.5 = at least half of the text is repeats.
MIN_DISTINCT_NGRAM_RATIO = 0.5
MIN_NGRAMS = 24  # below this, a ratio is noise
# One n-gram said this many times is a loop even inside otherwise varied text.
MAX_NGRAM_REPEATS = 6
WORD_N = 4
CHAR_N = 8  # for text without spaces (ja/zh/th): ~2-4 words per 8 characters
# The same token/character back to back this many times ("no no no ..." or "ああああ...").
MAX_TOKEN_RUN = 10
MAX_CHAR_RUN = 16
# Any script: one letter 40 times in a row ("xxxx...") is a degenerate stream, not a scream.
_LETTER_RUN = re.compile(r"([^\W\d_])\1{39}")
# One sentence of >= 12 letters said 3 times, or any sentence 5 times, is a loop.
LONG_SENTENCE_LETTERS = 12
MAX_LONG_SENTENCE_REPEATS = 2
MAX_SENTENCE_REPEATS = 4

_TOKEN = re.compile(r"\w+")
_SPACELESS_CHAR = re.compile(r"[\u0e00-\u0e7f\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff]")


def _longest_run(items: Sequence[str]) -> int:
    best = run = 0
    prev: str | None = None
    for it in items:
        run = run + 1 if it == prev else 1
        prev = it
        best = max(best, run)
    return best


def check_repetition(text: str) -> Outcome:
    """Fail (`repetition_loop`) on a repeated-n-gram, repeated-token or repeated-sentence loop."""
    t = prepare(text)
    tokens = [w.lower() for w in _TOKEN.findall(t)]
    spaceless_chars = _SPACELESS_CHAR.findall(t)
    if len(spaceless_chars) > len(tokens):  # mostly ja/zh/th: judge on characters
        units, n, max_run = spaceless_chars, CHAR_N, MAX_CHAR_RUN
    else:
        units, n, max_run = tokens, WORD_N, MAX_TOKEN_RUN
    grams = [tuple(units[i : i + n]) for i in range(len(units) - n + 1)]
    gram_counts = Counter(grams)
    ratio = round(len(gram_counts) / len(grams), 6) if grams else 1.0
    top_gram = max(gram_counts.values(), default=0)
    run = _longest_run(units)
    norm = [" ".join(_TOKEN.findall(s.lower())) for s in sentences(t, spaceless_thai=False)]
    counts = Counter(s for s in norm if s)
    long_rep = max(
        (c for s, c in counts.items() if _letters(s) >= LONG_SENTENCE_LETTERS), default=0
    )
    any_rep = max(counts.values(), default=0)
    ev = {
        "units": len(units),
        "distinct_ngram_ratio": ratio,
        "max_ngram_repeats": top_gram,
        "longest_run": run,
        "max_sentence_repeats": any_rep,
    }
    looped = (
        (len(grams) >= MIN_NGRAMS and ratio < MIN_DISTINCT_NGRAM_RATIO)
        or top_gram >= MAX_NGRAM_REPEATS
        or run >= max_run
        or _LETTER_RUN.search(t) is not None
        or long_rep > MAX_LONG_SENTENCE_REPEATS
        or any_rep > MAX_SENTENCE_REPEATS
    )
    if looped:
        return _out(OutcomeStatus.FAIL, "repetition_loop", None, ev)
    if not units:
        return _out(OutcomeStatus.INCONCLUSIVE, "empty", None, ev)
    return _out(OutcomeStatus.PASS, "ok", None, ev)


def _letters(s: str) -> int:
    return sum(1 for ch in s if ch.isalpha())


# ---- encoding --------------------------------------------------------------------------------

# Any of these is corruption: a model never means U+FFFD, a C1 control or a lone surrogate.
# ftfy's is_bad flagged ~0.005% of clean sentences and 97-100% of cp1252/latin-1 mojibake.
# Mixed scripts inside one word (cp1251/GBK decoding of accented Latin) only for Latin targets:
# it misfires on clean Korean, Thai and Cyrillic.
# UTF-8 read as cp1251: a lead byte (В-Я, а-ф) followed by what cp1251 makes of a continuation
# byte 0x80-0xBF that is neither a common Cyrillic letter nor punctuation that may follow a
# word (… — – ’ ” » “ ‘): "рџЋ‰" for an emoji, "В«" for «.
# Not for Cyrillic targets, where such pairs can be ordinary spelling.
_CP1251_PAIR = re.compile(
    "[\u0412-\u042f\u0430-\u0444]"
    "[\u0402\u0403\u201a\u0453\u201e\u2020\u2021\u20ac\u2030\u0409\u2039"
    "\u040a\u040c\u040b\u040f\u0452\u2022"
    "\u2122\u0459\u203a\u045a\u045c\u045b\u045f\u00a0\u040e\u045e\u0408\u00a4"
    "\u00a6\u00a7\u00a9\u00ab\u00ac\u00ad\u00ae\u00b0\u00b1\u00b5\u00b6\u00b7"
    "\u2116\u0458\u0405\u0455]"
)
# UTF-8 read as GBK / Shift-JIS turns any text into rare Han characters: at least RARE_HAN_MIN
# of them and RARE_HAN_SHARE of all Han characters outside the ~4,600 common zh/ja ones
# (clean Japanese: <= 1 rare character per reply; such mojibake: 66-90% rare).
RARE_HAN_MIN = 5
RARE_HAN_SHARE = 0.2


@cache
def _common_han() -> frozenset[str]:
    path = Path(__file__).parent / "data" / "lang" / "han_common.txt"
    lines = path.read_text(encoding="utf-8").splitlines()
    return frozenset("".join(x for x in lines if not x.startswith("#")))


# UTF-8 read as Shift-JIS yields half-width katakana (U+FF61-FF9F), which modern text, even
# Japanese, practically never uses: HALFWIDTH_KANA_MIN of them is corruption.
HALFWIDTH_KANA_MIN = 3
_HALFWIDTH_KANA = re.compile("[\uff61-\uff9f]")


def _halfwidth_kana(t: str) -> int:
    n = len(_HALFWIDTH_KANA.findall(t))
    return n if n >= HALFWIDTH_KANA_MIN else 0


_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f]")


def _rare_han(t: str) -> int:
    han = _HAN.findall(t)
    if len(han) < RARE_HAN_MIN:
        return 0
    common = _common_han()
    rare = sum(1 for ch in han if ch not in common)
    return rare if rare >= RARE_HAN_MIN and rare >= RARE_HAN_SHARE * len(han) else 0


_C0 = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_C1 = re.compile("[\x80-\x9f]")
_NON_ASCII_WORD = re.compile(
    r"[^\W\d_]*[^\W\d_\x00-\x7f][^\W\d_]*"
)  # a word with a non-ASCII letter


def encoding_signals(text: str, spec: LocaleSpec) -> dict[str, int | bool]:
    """Counts of corruption signals in the analysed part of a reply."""
    raw = text[:MAX_ANALYSED_CHARS]
    surrogates = len(SURROGATE.findall(raw))
    t = prepare(raw)
    mixed = 0
    cp1251 = 0 if "cyrillic" in spec.scripts else len(_CP1251_PAIR.findall(t))
    if spec.latin and not t.isascii():
        scripts = script_counts(t)
        # Latin-only signal, applied when the text is mostly Latin; a reply mostly in another
        # script is a language switch (check_language), not mojibake of the target.
        if scripts["latin"] * 2 > sum(scripts.values()):
            for w in _NON_ASCII_WORD.findall(t):
                if len({script_of(ch) for ch in w}) > 1:
                    mixed += 1
    return {
        "replacement_chars": t.count(REPLACEMENT) - surrogates,
        "lone_surrogates": surrogates,
        "c0_controls": len(_C0.findall(t)),
        "c1_controls": len(_C1.findall(t)),
        "mixed_script_words": mixed,
        "cp1251_pairs": cp1251,
        "rare_han": _rare_han(t),
        "halfwidth_kana": _halfwidth_kana(t),
        "mojibake": bool(is_bad(t)),
    }


def check_encoding(text: str, locale: str) -> Outcome:
    """Fail (`encoding_corruption`) on mojibake, U+FFFD, control characters, mixed-script words."""
    spec = locale_spec(locale)
    if not prepare(text):
        return _out(OutcomeStatus.INCONCLUSIVE, "empty", locale, {})
    sig = encoding_signals(text, spec)
    if any(sig.values()):
        hit = next(k for k, v in sig.items() if v)
        return _out(
            OutcomeStatus.FAIL,
            "encoding_corruption",
            locale,
            {**sig, "signal": hit, "excerpt": excerpt(prepare(text))},
        )
    return _out(OutcomeStatus.PASS, "ok", locale, sig)


# ---- decoding artefacts -----------------------------------------------------------------------


def check_decoding(text: str, locale: str) -> Outcome:
    """Fail `literal_escapes` / `bpe_markers` when the text shows escape sequences written
    out or byte-level BPE markers where text and whitespace belong (probes/artefacts.py)."""
    if not prepare(text):
        return _out(OutcomeStatus.INCONCLUSIVE, "empty", locale, {})
    escapes = literal_escapes(text)
    if escapes is not None:
        return _out(OutcomeStatus.FAIL, "literal_escapes", locale, escapes.evidence("at"))
    markers = bpe_markers(text)
    if markers is not None:
        return _out(OutcomeStatus.FAIL, "bpe_markers", locale, markers.evidence("at"))
    return _out(OutcomeStatus.PASS, "ok", locale, {})


# ---- per reply and per endpoint --------------------------------------------------------------


def check_reply(text: str, locale: str) -> list[Outcome]:
    """Start, repetition, encoding and decoding outcomes of one reply (in that order)."""
    rep = check_repetition(text).model_copy(update={"locale": locale})
    return [
        check_response_start(text, locale),
        rep,
        check_encoding(text, locale),
        check_decoding(text, locale),
    ]


# A reply with reasoning in it or decoded wrongly also trips the rules that read its first
# characters (`"*She…` of a JSON-encoded reply is a quote before Markdown): these reasons
# name the defect, so they are the reply's reason when present.
_NAMES_THE_DEFECT = ("reasoning_leak", "literal_escapes", "bpe_markers")


def worst_of(outcomes: Sequence[Outcome]) -> Outcome:
    """The failing outcome that names a reply's defect best (`_NAMES_THE_DEFECT` first, then
    the first failing one), or the first outcome when none fails."""
    failing = [o for o in outcomes if o.status is OutcomeStatus.FAIL]
    for reason in _NAMES_THE_DEFECT:
        named = next((o for o in failing if o.reason == reason), None)
        if named is not None:
            return named
    return failing[0] if failing else outcomes[0]


# One odd reply never fails a host: at least `start_anomaly_min_replies` judged replies, at
# least MIN_ANOMALOUS anomalous ones (so a single odd reply in a 3-reply round cannot), and at
# least `start_anomaly_share` (`ground.settings.ProbeConfig`). At a 0.3% per-reply false-alarm
# rate, 3+ of 20 is ~3 in 100,000; the incident that motivated C9 was 19 of 20.
MIN_ANOMALOUS = 2


def judge_start_share(outcomes: Sequence[Outcome], config: ProbeConfig) -> Outcome:
    """Endpoint verdict over a round's reply outcomes: fail on a sustained anomalous share.

    Only pass/fail outcomes are judged (inconclusive/transport ones are counted as ignored);
    fewer than `config.start_anomaly_min_replies` judged -> inconclusive. The failing reason
    is the most frequent one.
    """
    min_replies, min_share = config.start_anomaly_min_replies, config.start_anomaly_share
    judged = [o for o in outcomes if o.status in (OutcomeStatus.PASS, OutcomeStatus.FAIL)]
    failed = [o for o in judged if o.status is OutcomeStatus.FAIL]
    share = round(len(failed) / len(judged), 6) if judged else 0.0
    reasons = Counter(o.reason for o in failed)
    ev = {
        "judged": len(judged),
        "anomalous": len(failed),
        "share": share,
        "ignored": len(outcomes) - len(judged),
        "reasons": dict(sorted(reasons.items())),
        "min_replies": min_replies,
        "min_share": min_share,
    }
    if len(judged) < min_replies:
        return _out(OutcomeStatus.INCONCLUSIVE, "too_few_replies", None, ev)
    if share >= min_share and len(failed) >= MIN_ANOMALOUS:
        top = max(reasons.items(), key=lambda kv: (kv[1], kv[0]))[0]
        return _out(OutcomeStatus.FAIL, top, None, ev)
    return _out(OutcomeStatus.PASS, "ok", None, ev)


def _out(
    status: OutcomeStatus, reason: str, locale: str | None, ev: Mapping[str, object]
) -> Outcome:
    return Outcome(
        contract=Contract.START, status=status, reason=reason, locale=locale, evidence=dict(ev)
    )


def stray_start_kind(text: str, locale: str) -> str | None:
    """The kind of stray start of one reply, or None when its start is clean (or empty):
    `check_response_start`'s verdict without its `Outcome` and evidence (the gateway's
    check, on every reply: building them was half its cost)."""
    _, found = _start_finding(text, locale)
    return "reasoning_leak" if isinstance(found, Finding) else found
