"""Language integrity of one reply (SPEC C7): `check_language(text, locale) -> Outcome`.

Pure and deterministic: the same text gives the same outcome in every process (lingua labels
are deterministic; its confidences wobble in the last digits, so they are rounded to 6 decimals
before any comparison). Steps, all on the first MAX_ANALYSED_CHARS characters:

1. encoding corruption (integrity.check_encoding) -> fail `encoding_corruption`;
2. too few letters to judge -> inconclusive `too_short`;
3. letters outside the locale's scripts (a reply in Hindi for `en`) -> `language_switch`;
4. each sentence is labelled by lingua (restricted to the 17 locale languages) when it is long
   enough; the letter-weighted share of confidently foreign sentences gives a switch (most of
   the reply) or mixing (a sustained part of it);
5. close pairs (pt/es, es/pt, uk/ru, ru/uk): the share of words that are frequent in the
   neighbour and rare in the target (data/lang/markers_*.txt) plus neighbour-only letters
   (ы э ъ ё in uk, і ї є ґ in ru) catch mixing inside sentences ("portunhol");
6. quotations: a reply that fails steps 3-5 only because of quoted spans (“…”, "…", «…»,
   „…“, 「…」, 『…』, »…«: a toast, a song, a foreign phrase a character says) is judged again
   without them; when the unquoted rest is long enough and does not fail, it passes (the
   quoted share is in the evidence). Encoding checks always see the whole text.

For `ja`, a segment of Han characters only (a kanji compound, a four-character idiom) is not
judged: lingua calls any pure-Han text Chinese. It is judged (as Chinese) when it holds a
character that only Simplified Chinese uses (这 们 说 吗 …), so a Chinese sentence is still
caught.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from lingua import Language, LanguageDetector, LanguageDetectorBuilder

from probes.integrity import check_encoding
from probes.locale_spec import LOCALES, LocaleSpec, locale_spec
from probes.textutil import (
    excerpt,
    letter_count,
    prepare,
    script_counts,
    sentences,
    strip_noise,
    words,
)
from probes.types import Contract, Outcome, OutcomeStatus

_DATA = Path(__file__).parent / "data" / "lang"

# ---- thresholds (constants; never tuned per text) --------------------------------------------
# Fewer letters than this and a verdict is noise ("Sim." -> Italian): inconclusive.
MIN_LETTERS = 40
MIN_LETTERS_SPACELESS = 15  # ja/zh: a Han/kana character carries a word's worth
# A sentence is labelled only when long enough for lingua to be reliable.
MIN_SENTENCE_LETTERS = 20
MIN_SENTENCE_LETTERS_SPACELESS = 8
# A sentence counts as foreign when lingua's top language is not the target with at least this
# confidence (lingua's confidences over the 17 languages sum to 1).
FOREIGN_CONFIDENCE = 0.6
# ... or when lingua gives the target language at most this (sure it is not the target, even
# if it spreads the rest over several neighbours: "I see the problem," -> en 0.41, id 0.02).
FOREIGN_TARGET_MAX = 0.1
# Letter-weighted shares of judged sentences: >= SWITCH_SHARE foreign is a whole-reply switch,
# >= MIXING_SHARE (and at least MIN_FOREIGN_SENTENCES of them) is sustained mixing.
SWITCH_SHARE = 0.8
MIXING_SHARE = 0.2
MIN_FOREIGN_SENTENCES = 2
# One sentence is enough when lingua is near-certain about it and it holds a quarter of the
# reply (a quoted foreign phrase is short; a swapped-in sentence is not).
STRONG_FOREIGN_CONFIDENCE = 0.9
STRONG_FOREIGN_SHARE = 0.25
# Letters outside the locale's scripts: >= this share of all letters is a switch of script.
FOREIGN_SCRIPT_SHARE = 0.5
# Close-pair word signal: clean Portuguese scores <= ~0.016 on Spanish markers; portunhol
# sentences 0.23-0.36. At least MIN_MARKER_WORDS hits so one loan word or name cannot fail.
MARKER_SHARE = 0.05
MIN_MARKER_WORDS = 3
# Two independent, weaker signals together: one confidently foreign sentence holding >=
# CORROBORATED_SHARE of the letters AND neighbour marker words (>= 2, share >= 0.02).
CORROBORATED_SHARE = 0.1
CORROBORATING_MARKERS = 2
CORROBORATING_MARKER_SHARE = 0.02
# Quotations are discounted only when they hold at most this share of the reply's letters: a
# quoted toast or phrase inside narration, not a reply that is mostly (foreign) dialogue.
MAX_QUOTED_SHARE = 0.5
# Letters that exist in the neighbour only (a Ukrainian reply never needs ы, a Russian one і).
_NEIGHBOUR_LETTERS = {"uk": frozenset("ыэъё"), "ru": frozenset("іїєґ")}
CONFIDENCE_DECIMALS = 6

# The detector knows exactly the 17 locale languages. No extra "intrusion" languages: their
# close relatives (Malay for id, Catalan/Galician for es/pt, Belarusian for uk/ru) would split
# the vote of clean replies and raise false alarms; a reply in any other script is caught by
# step 3 (letters outside the locale's scripts) instead.
_LANGUAGES: tuple[Language, ...] = tuple(
    sorted({getattr(Language, s.language) for s in LOCALES.values()}, key=lambda lang: lang.name)
)
_detector: LanguageDetector | None = None
_lock = threading.Lock()


def detector() -> LanguageDetector:
    """The process-wide lingua detector (built once, lazily, thread-safe; ~60 MB preloaded)."""
    global _detector
    if _detector is None:
        with _lock:
            if _detector is None:
                _detector = (
                    LanguageDetectorBuilder.from_languages(*_LANGUAGES)
                    .with_preloaded_language_models()
                    .build()
                )
    return _detector


@cache
def _markers(file: str) -> frozenset[str]:
    lines = (_DATA / file).read_text(encoding="utf-8").splitlines()
    return frozenset(w.strip() for w in lines if w.strip() and not w.startswith("#"))


@dataclass(frozen=True, slots=True)
class _Label:
    language: str  # lingua name, e.g. "SPANISH"
    confidence: float  # rounded
    target_confidence: float  # rounded


# Letters of these scripts belong to exactly one of the 17 languages: lingua's own rules give
# the same label at confidence 1.0, so such segments skip the model (Han alone is Chinese for
# lingua too; any kana makes it Japanese).
_UNIQUE_SCRIPT = {
    frozenset({"thai"}): "THAI",
    frozenset({"arabic"}): "ARABIC",
    frozenset({"hangul"}): "KOREAN",
    frozenset({"hangul", "han"}): "KOREAN",
    frozenset({"kana"}): "JAPANESE",
    frozenset({"kana", "han"}): "JAPANESE",
    frozenset({"han"}): "CHINESE",
}


def _label(text: str, target: Language) -> _Label:
    by_script = _UNIQUE_SCRIPT.get(frozenset(script_counts(text)))
    if by_script is not None:
        return _Label(by_script, 1.0, 1.0 if by_script == target.name else 0.0)
    values = detector().compute_language_confidence_values(text)
    conf = {v.language: round(v.value, CONFIDENCE_DECIMALS) for v in values}
    # Ties (rare) are broken by name, so the label never depends on iteration order.
    top = max(conf.items(), key=lambda kv: (kv[1], kv[0].name)) if conf else (target, 0.0)
    return _Label(top[0].name, top[1], conf.get(target, 0.0))


def _merge_short(parts: list[str], min_letters: int) -> list[str]:
    """Join segments shorter than `min_letters` to the following one (Thai phrases, "Oi!")."""
    out: list[str] = []
    buf = ""
    for p in parts:
        buf = f"{buf} {p}" if buf else p
        if letter_count(buf) >= min_letters:
            out.append(buf)
            buf = ""
    if buf:
        out.append(buf)
    return out


def _marker_stats(text: str, spec: LocaleSpec) -> tuple[int, int]:
    """(marker words, words) for a close-pair locale; (0, 0) otherwise."""
    if spec.marker_file is None:
        return 0, 0
    ws = words(text)
    marks = _markers(spec.marker_file)
    extra = _NEIGHBOUR_LETTERS.get(spec.code, frozenset())
    hits = sum(1 for w in ws if w in marks or (extra and not extra.isdisjoint(w)))
    return hits, len(ws)


# Characters of Simplified Chinese that Japanese does not use (Japanese writes 這 們 説 … or
# 対 時 過 見 …): one of them marks a pure-Han segment as Chinese rather than a kanji compound.
_ZH_ONLY = frozenset("这们说吗呢么个对让给从觉见听还过时她它吧很")
# Quoted spans (bounded, on one line): double quotes of every locale, guillemets both ways,
# CJK corner brackets.
_QUOTED = re.compile(
    r"“[^“”\n]{1,400}”|\"[^\"\n]{1,400}\"|«[^«»\n]{1,400}»|»[^«»\n]{1,400}«"
    r"|„[^„“”\n]{1,400}[“”]|「[^「」\n]{1,400}」|『[^『』\n]{1,400}』"
)


def check_language(text: str, locale: str) -> Outcome:
    """Judge one reply's language against its locale: pass, fail (switch/mixing/encoding) or
    inconclusive (too short / ambiguous). ValueError on an unsupported locale."""
    spec = locale_spec(locale)
    enc = check_encoding(text, locale)
    if enc.status is OutcomeStatus.FAIL:
        return _out(OutcomeStatus.FAIL, "encoding_corruption", locale, dict(enc.evidence))
    t = strip_noise(prepare(text))
    verdict = _judge(t, spec)
    if verdict.status is not OutcomeStatus.FAIL or verdict.reason == "encoding_corruption":
        return verdict
    unquoted, n_quoted = _QUOTED.subn(" ", t)
    if not n_quoted:
        return verdict
    rest = _judge(unquoted, spec)
    quoted_letters = letter_count(t) - letter_count(unquoted)
    if (
        rest.status is not OutcomeStatus.PASS
        or rest.evidence.get("foreign_sentences", 0)
        or quoted_letters > MAX_QUOTED_SHARE * letter_count(t)
    ):
        # the narration is foreign or doubtful too, or the quotes are the bulk of the reply
        # (its dialogue): the verdict on the whole text stands
        return verdict
    return rest.model_copy(
        update={
            "evidence": {
                **rest.evidence,
                "quoted_spans": n_quoted,
                "quoted_letters": quoted_letters,
                "with_quotes": {
                    "reason": verdict.reason,
                    "foreign_share": verdict.evidence.get("foreign_share"),
                },
            }
        }
    )


def _judge(t: str, spec: LocaleSpec) -> Outcome:
    """Steps 2-5 on prepared, noise-stripped text."""
    locale = spec.code
    scripts = script_counts(t)
    letters = sum(scripts.values())
    min_letters = MIN_LETTERS_SPACELESS if spec.spaceless and spec.code != "th" else MIN_LETTERS
    ev: dict[str, object] = {"letters": letters, "excerpt": excerpt(t)}
    if letters < min_letters:
        return _out(OutcomeStatus.INCONCLUSIVE, "too_short", locale, ev)

    in_script = sum(n for s, n in scripts.items() if s in spec.scripts)
    foreign_script_share = round(1 - in_script / letters, CONFIDENCE_DECIMALS)
    ev["foreign_script_share"] = foreign_script_share
    if foreign_script_share >= FOREIGN_SCRIPT_SHARE:
        top_script = max(
            ((s, n) for s, n in scripts.items() if s not in spec.scripts),
            key=lambda kv: (kv[1], kv[0]),
        )[0]
        return _out(
            OutcomeStatus.FAIL, "language_switch", locale, {**ev, "detected_script": top_script}
        )
    target = getattr(Language, spec.language)
    tally = _tally_sentences(t, spec, target)
    hits, nwords = _marker_stats(t, spec)
    ev.update(tally.evidence(hits, nwords))
    if tally.judged == 0:
        return _out(OutcomeStatus.INCONCLUSIVE, "too_short", locale, ev)
    return _sentence_verdict(tally, hits, nwords, target, locale, ev)


@dataclass
class _Tally:
    """Letters of the judged sentences of a reply, by what lingua said of each."""

    judged: int = 0
    foreign: int = 0  # letters in sentences confidently not in the target language
    foreign_n: int = 0  # how many such sentences
    strong: int = 0  # letters of the longest very confidently foreign sentence
    unjudged_han: int = 0  # Japanese: pure-kanji sentences, not judged
    by_lang: Counter[str] = field(default_factory=Counter)

    @property
    def foreign_share(self) -> float:
        return round(self.foreign / self.judged, CONFIDENCE_DECIMALS) if self.judged else 0.0

    def evidence(self, hits: int, nwords: int) -> dict[str, object]:
        shares = {
            k: round(v / self.judged, CONFIDENCE_DECIMALS) for k, v in sorted(self.by_lang.items())
        }
        ev: dict[str, object] = {
            "language_shares": shares,
            "foreign_share": self.foreign_share,
            "foreign_sentences": self.foreign_n,
            "judged_sentences_letters": self.judged,
            "marker_words": hits,
            "marker_share": round(hits / nwords, CONFIDENCE_DECIMALS) if nwords else 0.0,
        }
        if self.unjudged_han:
            ev["unjudged_han_letters"] = self.unjudged_han
        return ev


def _tally_sentences(t: str, spec: LocaleSpec, target: Language) -> _Tally:
    """Step 3: each sentence long enough to judge, labelled by lingua."""
    sent_min = (
        MIN_SENTENCE_LETTERS_SPACELESS
        if spec.spaceless and spec.code != "th"
        else MIN_SENTENCE_LETTERS
    )
    tally = _Tally()
    for seg in _merge_short(sentences(t, spaceless_thai=spec.code == "th"), sent_min):
        n = letter_count(seg)
        if n < sent_min:
            continue
        if spec.code == "ja" and _pure_han(seg) and _ZH_ONLY.isdisjoint(seg):
            tally.unjudged_han += n  # a kanji compound or idiom: Japanese as much as Chinese
            continue
        lab = _label(seg, target)
        tally.judged += n
        tally.by_lang[lab.language] += n
        if lab.language != target.name and (
            lab.confidence >= FOREIGN_CONFIDENCE or lab.target_confidence <= FOREIGN_TARGET_MAX
        ):
            tally.foreign += n
            tally.foreign_n += 1
            if lab.confidence >= STRONG_FOREIGN_CONFIDENCE:
                tally.strong = max(tally.strong, n)
    return tally


def _sentence_verdict(
    tally: _Tally, hits: int, nwords: int, target: Language, locale: str, ev: dict[str, object]
) -> Outcome:
    """Steps 4-5: a switch, sustained mixing (by share, one strong sentence, marker words or
    both corroborating), an ambiguous share, or a pass."""
    foreign_share = tally.foreign_share
    marker_share = round(hits / nwords, CONFIDENCE_DECIMALS) if nwords else 0.0
    if foreign_share >= SWITCH_SHARE:
        top = max(
            ((k, v) for k, v in tally.by_lang.items() if k != target.name),
            key=lambda kv: (kv[1], kv[0]),
        )[0]
        return _out(OutcomeStatus.FAIL, "language_switch", locale, {**ev, "detected": top})
    if foreign_share >= MIXING_SHARE and tally.foreign_n >= MIN_FOREIGN_SENTENCES:
        return _out(OutcomeStatus.FAIL, "language_mixing", locale, ev)
    if round(tally.strong / tally.judged, CONFIDENCE_DECIMALS) >= STRONG_FOREIGN_SHARE:
        return _out(
            OutcomeStatus.FAIL, "language_mixing", locale, {**ev, "signal": "strong_sentence"}
        )
    if hits >= MIN_MARKER_WORDS and marker_share >= MARKER_SHARE:
        return _out(OutcomeStatus.FAIL, "language_mixing", locale, {**ev, "signal": "marker_words"})
    if (
        tally.foreign_n >= 1
        and foreign_share >= CORROBORATED_SHARE
        and hits >= CORROBORATING_MARKERS
        and marker_share >= CORROBORATING_MARKER_SHARE
    ):
        return _out(OutcomeStatus.FAIL, "language_mixing", locale, {**ev, "signal": "corroborated"})
    if foreign_share >= MIXING_SHARE:
        return _out(OutcomeStatus.INCONCLUSIVE, "ambiguous", locale, ev)
    return _out(OutcomeStatus.PASS, "ok", locale, ev)


def _pure_han(seg: str) -> bool:
    return set(script_counts(seg)) == {"han"}


def _out(status: OutcomeStatus, reason: str, locale: str, ev: Mapping[str, object]) -> Outcome:
    return Outcome(
        contract=Contract.LANGUAGE, status=status, reason=reason, locale=locale, evidence=dict(ev)
    )
