"""C7 language integrity: check_language on the clean corpus and on variants derived from it."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probes.language import MIN_LETTERS, check_language, detector
from probes.locale_spec import LOCALES
from probes.textutil import letter_count
from probes.types import Contract, OutcomeStatus
from tests.data.variants import (
    SEED,
    clean_locales,
    donor_sentences,
    load_clean,
    load_file,
    mix_sentences,
    mojibake,
    portunhol,
    sprinkle_replacement,
)

FAIL, PASS, INCONCLUSIVE = OutcomeStatus.FAIL, OutcomeStatus.PASS, OutcomeStatus.INCONCLUSIVE
ROOT = Path(__file__).resolve().parents[2]

# Whole-reply switches between close pairs (reply in B where the locale asks for A).
CLOSE_SWITCHES = [
    ("pt-BR", "es"), ("es", "pt-BR"), ("uk", "ru"), ("ru", "uk"), ("id", "en"), ("it", "es"),
    ("es", "it"), ("zh-Hans", "ja"), ("ja", "zh-Hans"), ("fr", "it"), ("pt-BR", "it"),
    ("de", "en"), ("pl", "ru"), ("vi", "id"), ("ko", "ja"), ("en", "id"),
]  # fmt: skip


def _rate(outcomes: list[OutcomeStatus], want: OutcomeStatus = FAIL) -> float:
    return sum(o is want for o in outcomes) / len(outcomes)


def _available(*locales: str) -> None:
    missing = [loc for loc in locales if loc not in clean_locales()]
    if missing:
        pytest.skip(f"clean corpus not written yet for {missing}")


def test_c7_corpus_covers_all_17_locales() -> None:
    """C7: the evaluation corpus has >= 30 clean replies for every supported locale."""
    assert clean_locales() == sorted(LOCALES)
    assert all(len(load_clean(loc)) >= 30 for loc in LOCALES)


@pytest.mark.parametrize("locale", sorted(LOCALES))
def test_c7_clean_corpus_has_no_false_failures(locale: str) -> None:
    """C7: no clean reply of the corpus fails the language check in its own locale."""
    _available(locale)
    failures = [
        (o.reason, o.evidence)
        for o in (check_language(t, locale) for t in load_clean(locale))
        if o.status is FAIL
    ]
    assert failures == []


@pytest.mark.parametrize(("locale", "source"), CLOSE_SWITCHES)
def test_c7_close_pair_switches_all_caught(locale: str, source: str) -> None:
    """C7: a whole reply in the close neighbour's language fails as a switch, 100%."""
    _available(locale, source)
    texts = [t for t in load_clean(source) if check_language(t, source).status is PASS]
    outcomes = [check_language(t, locale) for t in texts]
    missed = [(o.status, o.reason, o.evidence) for o in outcomes if o.status is not FAIL]
    assert missed == []
    assert {o.reason for o in outcomes} <= {"language_switch", "language_mixing"}


def test_c7_every_locale_pair_switch_caught() -> None:
    """C7: replies of every locale judged under every other locale all fail (4 per source)."""
    locs = clean_locales()
    missed = []
    for source in locs:
        texts = [t for t in load_clean(source) if check_language(t, source).status is PASS][:4]
        for locale in locs:
            if locale != source:
                missed += [
                    (source, locale, t[:40])
                    for t in texts
                    if check_language(t, locale).status is not FAIL
                ]
    assert missed == []


def _pt_mixed(fraction: float, per_text: int = 5) -> list[OutcomeStatus]:
    rng = random.Random(SEED)
    donor = donor_sentences(load_clean("es"))
    return [
        check_language(mix_sentences(t, donor, fraction, rng), "pt-BR").status
        for t in load_clean("pt-BR")
        for _ in range(per_text)
    ]


@pytest.mark.parametrize("fraction", [0.3, 0.5])
def test_c7_pt_with_spanish_sentences_caught(fraction: float) -> None:
    """C7: Portuguese with >= 30% of sentences in Spanish fails in >= 95% of replies."""
    _available("pt-BR", "es")
    rate = _rate(_pt_mixed(fraction))
    print(f"pt-BR + {fraction:.0%} es sentences: caught {rate:.3f}")
    assert rate >= 0.95


def test_c7_pt_light_mixing_reported() -> None:
    """C7: 10%/20% Spanish sentences are caught less often than 30% (rates are reported)."""
    _available("pt-BR", "es")
    light = {f: _rate(_pt_mixed(f)) for f in (0.1, 0.2, 0.3)}
    print("pt-BR + es sentences caught:", {f"{f:.0%}": round(r, 3) for f, r in light.items()})
    assert 0.5 <= light[0.1] <= light[0.3]


# Mixing in other pairs: half of the sentences swapped (floor, rates printed).
OTHER_MIXES = [
    ("uk", "ru"), ("ru", "uk"), ("it", "es"), ("es", "it"), ("en", "fr"), ("id", "en"),
    ("ja", "zh-Hans"), ("zh-Hans", "ja"), ("de", "en"), ("fr", "en"), ("vi", "en"),
    ("ar", "en"), ("th", "en"), ("ko", "en"), ("pl", "ru"),
]  # fmt: skip


def test_c7_other_pairs_half_mixed_mostly_caught() -> None:
    """C7: replies with 50% of sentences in another language fail in >= 85% for every pair."""
    _available(*{loc for pair in OTHER_MIXES for loc in pair})
    rng = random.Random(SEED)
    rates = {}
    for locale, source in OTHER_MIXES:
        donor = [d for d in donor_sentences(load_clean(source), min_words=1) if len(d) >= 15]
        out = [
            check_language(mix_sentences(t, donor, 0.5, rng, thai=locale == "th"), locale).status
            for t in load_clean(locale)
        ]
        rates[f"{locale}+{source}"] = round(_rate(out), 3)
    print("50% mixed, caught:", rates)
    assert min(rates.values()) >= 0.85


def test_c7_es_with_portuguese_sentences_caught() -> None:
    """C7: Spanish with 30% of sentences in Portuguese fails in >= 95% of replies."""
    _available("pt-BR", "es")
    rng = random.Random(SEED)
    donor = donor_sentences(load_clean("pt-BR"))
    out = [
        check_language(mix_sentences(t, donor, 0.3, rng), "es").status
        for t in load_clean("es")
        for _ in range(5)
    ]
    assert _rate(out) >= 0.95


def test_c7_portunhol_caught() -> None:
    """C7: Portuguese sentences with Spanish words inside (portunhol) fail in >= 90%."""
    texts = load_file("portunhol.json")
    if not texts:
        pytest.skip("portunhol.json not written yet")
    out = [check_language(t, "pt-BR") for t in texts]
    rate = _rate([o.status for o in out])
    print(f"portunhol: caught {rate:.3f} of {len(texts)}")
    assert all(o.status is not PASS or o.reason == "ok" for o in out)
    assert rate >= 0.9


def test_c7_light_portunhol_derived_caught() -> None:
    """C7: Portuguese with one Spanish twin word per sentence fails in >= 90% of replies."""
    _available("pt-BR")
    rng = random.Random(SEED)
    out = [check_language(portunhol(t, 1, rng), "pt-BR").status for t in load_clean("pt-BR")]
    rate = _rate(out)
    print(f"derived portunhol, 1 word per sentence: caught {rate:.3f}")
    assert rate >= 0.9


@pytest.mark.parametrize(
    ("text", "script"),
    [
        ("वह मुस्कुराई और दरवाज़ा खोलकर बारिश को अंदर आने दिया। तुम वापस आ गए, उसने कहा।", "devanagari"),
        ("היא חייכה ופתחה את הדלת כדי שהגשם ייכנס. חזרת, היא אמרה בשקט.", "hebrew"),
        ("Εκείνη χαμογέλασε και άνοιξε την πόρτα για να μπει η βροχή. Γύρισες, είπε.", "greek"),
    ],
)
def test_c7_reply_in_unwatched_script_is_a_switch(text: str, script: str) -> None:
    """C7: a reply in a language outside the 17 (another script) fails as a switch."""
    o = check_language(text, "en")
    assert (o.status, o.reason, o.evidence["detected_script"]) == (FAIL, "language_switch", script)


@pytest.mark.parametrize(("codec", "errors"), [("cp1252", "replace"), ("latin-1", "strict")])
def test_c7_western_mojibake_caught(codec: str, errors: str) -> None:
    """C7: UTF-8 read as cp1252 / latin-1 fails as encoding corruption in >= 97% of replies."""
    pairs = [
        (loc, t, mojibake(t, codec, errors)) for loc in clean_locales() for t in load_clean(loc)
    ]
    outcomes = [check_language(m, loc) for loc, t, m in pairs if m != t]
    assert _rate([o.status for o in outcomes]) >= 0.97
    assert {o.reason for o in outcomes if o.status is FAIL} == {"encoding_corruption"}


def test_c7_replacement_characters_caught() -> None:
    """C7: a reply with U+FFFD where bytes were lost always fails as encoding corruption."""
    rng = random.Random(SEED)
    outcomes = [
        check_language(sprinkle_replacement(t, rng), loc)
        for loc in clean_locales()
        for t in load_clean(loc)
    ]
    assert {(o.status, o.reason) for o in outcomes} == {(FAIL, "encoding_corruption")}


SHORT_OWN = [
    "Sim.",
    "ok",
    "*Ela sorri.*",
    "Да.",
    "はい。",
    "好的",
    "ใช่",
    "نعم",
    "Oui !",
    "🙂",
    "...",
]


def test_c7_short_texts_inconclusive_never_fail() -> None:
    """C7: very short replies (ours and short.json) are inconclusive, never a failure."""
    texts = list(SHORT_OWN) + list(load_file("short.json"))
    for t in texts:
        for locale in LOCALES:
            o = check_language(t, locale)
            assert o.status is not FAIL, (t, locale, o.reason)
            if letter_count(t) < 15:
                assert (o.status, o.reason) == (INCONCLUSIVE, "too_short")


KANJI_ONLY_JA = [
    "*彼女は微笑んだ。*「おかえりなさい。」国際連合安全保障理事会常任理事国。今日はどうだった？",
    "*彼は古い本を開いた。*温故知新、臨機応変、一期一会。祖父がよく言っていた言葉だよ。",
    "*彼女は地図を広げた。*東京都庁舎展望室入口。ここで待ち合わせね。",
]


@pytest.mark.parametrize("text", KANJI_ONLY_JA)
def test_c7_japanese_kanji_only_sentence_is_not_chinese(text: str) -> None:
    """C7: a Japanese reply with one kanji-only sentence (>= 8 chars) passes, it is not Chinese."""
    o = check_language(text, "ja")
    assert (o.status, o.reason) == (PASS, "ok"), o.evidence
    assert o.evidence["unjudged_han_letters"] >= 8


def test_c7_japanese_with_chinese_sentences_still_fails() -> None:
    """C7: Simplified-Chinese sentences inside a Japanese reply are still judged Chinese."""
    text = (
        "*彼女は窓の外を見た。*我们今天晚上一起去吃饭吧。你说这个地方怎么样？"
        "雨が降りそうね。她觉得这里很安静。"
    )
    o = check_language(text, "ja")
    assert (o.status, o.reason) == (FAIL, "language_mixing"), o.evidence


QUOTED_TOASTS = [
    "*She lifts her glass and grins at you.* “¡Salud, dinero y amor, y tiempo para "
    "disfrutarlos!” That is what my grandmother always said.",
    "*She clinks her glass against yours.* “Salud, dinero y amor, y tiempo para disfrutarlos”, "
    "she says with a wink.",
]


@pytest.mark.parametrize("text", QUOTED_TOASTS)
def test_c7_quoted_foreign_toast_is_not_mixing(text: str) -> None:
    """C7: an English reply quoting one Spanish toast passes; the quotation is in the evidence."""
    o = check_language(text, "en")
    assert (o.status, o.reason) == (PASS, "ok"), o.evidence
    assert o.evidence["quoted_spans"] == 1
    assert o.evidence["with_quotes"]["reason"] == "language_mixing"


def test_c7_quotes_never_excuse_foreign_narration_or_encoding() -> None:
    """C7: quotes are discounted only for language: foreign narration, mostly-foreign dialogue
    and mojibake inside quotes still fail."""
    narration_es = (
        "*Ella levanta la copa y sonríe a todos los invitados.* “Cheers, everyone!” "
        "Mi abuela siempre decía lo mismo en cada boda de la familia."
    )
    assert check_language(narration_es, "en").status is FAIL
    dialogue_es = (
        "*She smiles.* “¡Salud, dinero y amor, y tiempo para disfrutarlos! Mi abuela siempre "
        "lo decía en cada boda, y nadie se atrevía a interrumpirla.”"
    )
    assert check_language(dialogue_es, "en").status is FAIL
    broken = mojibake("“¡Salud, señora, qué alegría!”", "cp1252")
    o = check_language(f"*She raises her glass and smiles at the table.* {broken} she says.", "en")
    assert (o.status, o.reason) == (FAIL, "encoding_corruption")


def test_c7_unknown_locale_is_a_value_error() -> None:
    """C7: an unsupported locale raises ValueError naming it."""
    with pytest.raises(ValueError, match="'pt-PT'"):
        check_language("Olá, tudo bem?", "pt-PT")


def test_c7_outcome_shape() -> None:
    """C7: outcomes carry contract LANGUAGE, the locale, shares and a <= 120-char excerpt."""
    _available("en")
    o = check_language(load_clean("en")[0] * 20, "en")
    assert (o.contract, o.locale, o.status) == (Contract.LANGUAGE, "en", PASS)
    assert o.evidence["language_shares"] == {"ENGLISH": 1.0}
    assert len(o.evidence["excerpt"]) <= 120


_SUBPROCESS = """
import json, sys
from probes.language import check_language
pairs = json.loads(sys.stdin.read())
print(json.dumps([check_language(t, loc).model_dump(mode="json") for loc, t in pairs]))
"""


def test_c7_deterministic_across_processes() -> None:
    """C7: the same texts give identical outcomes (evidence included) in a fresh process."""
    rng = random.Random(SEED)
    pairs = [(loc, t) for loc in clean_locales() for t in load_clean(loc)[:3]]
    if "es" in clean_locales() and "pt-BR" in clean_locales():
        donor = donor_sentences(load_clean("es"))
        pairs += [("pt-BR", mix_sentences(t, donor, 0.2, rng)) for t in load_clean("pt-BR")[:6]]
    here = [check_language(t, loc).model_dump(mode="json") for loc, t in pairs]
    proc = subprocess.run(
        [sys.executable, "-c", _SUBPROCESS],
        input=json.dumps(pairs),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert json.loads(proc.stdout) == here


def test_c7_detector_built_once_across_threads() -> None:
    """C7: concurrent first use builds exactly one detector per process."""
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(id(detector()))) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(set(seen)) == 1


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "too_short"),
        ("Olá \ud800 tudo bem? " * 5, "encoding_corruption"),  # lone surrogate
        (
            "Ela abriu a porta\x00 e saiu para a chuva sem dizer nada a ninguém.",
            "encoding_corruption",
        ),
        ("Ela abriu a porta\x1b[31m e saiu para a chuva sem dizer nada.", "encoding_corruption"),
    ],
)
def test_c7_bad_input_gives_typed_outcome(text: str, reason: str) -> None:
    """C7: empty text, lone surrogates and control characters give typed outcomes, no crash."""
    o = check_language(text, "pt-BR")
    assert o.reason == reason
    assert o.status is (INCONCLUSIVE if reason == "too_short" else FAIL)


def test_c7_bom_prefixed_text_judged_like_plain() -> None:
    """C7: a leading BOM is dropped; the reply is judged like the same text without it."""
    _available("pt-BR")
    t = load_clean("pt-BR")[0]
    assert (
        check_language("\ufeff" + t, "pt-BR").model_dump()
        == check_language(t, "pt-BR").model_dump()
    )


def test_c7_ten_megabyte_reply_bounded_time() -> None:
    """C7: a 10 MB reply is judged on its capped prefix in bounded time (generous 10 s)."""
    _available("en")
    big = (load_clean("en")[1] + " ") * (10_000_000 // (len(load_clean("en")[1]) + 1))
    start = time.monotonic()
    o = check_language(big, "en")
    assert time.monotonic() - start < 10
    assert o.status is PASS
    assert o.evidence["letters"] <= 8_000


@settings(max_examples=150, deadline=None)
@given(text=st.text(max_size=300), locale=st.sampled_from(sorted(LOCALES)))
def test_c7_arbitrary_text_gives_a_typed_outcome(text: str, locale: str) -> None:
    """C7: any string (surrogates, controls, emoji) yields a LANGUAGE outcome, never a crash."""
    o = check_language(text, locale)
    assert o.contract is Contract.LANGUAGE
    assert o.status in (PASS, FAIL, INCONCLUSIVE)
    if letter_count(text) < 15 and o.status is FAIL:
        assert o.reason == "encoding_corruption"


def test_c7_min_letters_boundary() -> None:
    """C7: a reply just below the minimum letter count is inconclusive even if foreign."""
    text = "Hola amigo, qué tal estás hoy"  # < MIN_LETTERS letters, Spanish for a pt locale
    assert letter_count(text) < MIN_LETTERS
    assert check_language(text, "pt-BR").status is INCONCLUSIVE
