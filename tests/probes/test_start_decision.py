"""The streaming start check as a decision over the prefix seen so far (issue 26 item 1):
pass / fail / need-more, exactly the 24-character check's verdict on the bank of clean replies
in all 17 locales and every generated defect case, an early pass settled for any text that
follows but the two rules that read the whole window, and clean replies decided at their
first word."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probes.integrity import stray_start_kind
from probes.locale_spec import LOCALES, locale_spec
from probes.start_decision import (
    WINDOW_KINDS,
    StartDecision,
    StartVerdict,
    decide_start,
    window_complete,
)
from tests.data.start_variants import start_cases
from tests.data.variants import SEED, clean_locales, load_clean, stray_starts

WINDOW = 24  # routing/contracts.py: start_check_chars
PASS, FAIL, MORE = StartDecision.PASS, StartDecision.FAIL, StartDecision.NEED_MORE


def window_check(text: str, locale: str, window: int = WINDOW) -> str | None:
    """The full 24-character check: `stray_start_kind` of the shortest prefix that fills the
    window, or of the whole reply (stripped, as acceptance reads it) when it is shorter."""
    for cut in range(1, len(text) + 1):
        if window_complete(text[:cut], window):
            return stray_start_kind(text[:cut], locale)
    return stray_start_kind(text.strip(), locale)


def bank_and_defects() -> Iterator[tuple[str, str, str]]:
    """(locale, class, text): every clean reply of the bank and every defect case the start
    check's bench and tests generate from it (tests/data/start_variants.py, variants.py)."""
    rng = random.Random(SEED)
    for loc in clean_locales():
        for text in load_clean(loc):
            yield loc, "clean", text
            cases = start_cases(text, loc, rng)
            cases["stray_start"] = stray_starts(text, loc, rng)
            for cls, variants in cases.items():
                for variant in variants:
                    yield loc, cls, variant


def disagreements(text: str, locale: str, decide: object = decide_start) -> list[int]:
    """The prefix lengths at which `decide` answers something the full 24-character check
    does not: an early PASS of a reply the check fails, an early FAIL, a final verdict that
    is not the check's. Each prefix is where some cutting of the reply into pieces first
    asks, so checking every prefix checks every cutting."""
    assert callable(decide)
    expected = window_check(text, locale)
    wrong = []
    for cut in range(1, len(text) + 1):
        verdict: StartVerdict = decide(text[:cut], locale, WINDOW)
        if window_complete(text[:cut], WINDOW):
            if (verdict.decision, verdict.kind) != ((FAIL, expected) if expected else (PASS, None)):
                wrong.append(cut)
            break
        if verdict.decision is FAIL or (verdict.decision is PASS and expected is not None):
            wrong.append(cut)
    return wrong


@pytest.mark.slow
def test_issue26_every_prefix_of_the_bank_and_its_defects_decides_as_the_window() -> None:
    """Exhaustive over the bank (17 locales) and every generated defect case: no prefix is
    passed early when the 24-character check fails the reply, and at the window the
    decision is the check's verdict, kind included."""
    wrong, cases, caught = [], 0, 0
    for loc, cls, text in bank_and_defects():
        cases += 1
        caught += window_check(text, loc) is not None
        if bad := disagreements(text, loc):
            wrong.append((loc, cls, text[: bad[0] + 5], bad[0]))
    assert wrong == []
    assert cases > 20_000 and caught > 15_000  # the defects are there, and caught


def _released_at(text: str, locale: str) -> int | None:
    """The shortest prefix the decision passes before the window is complete."""
    for cut in range(1, len(text) + 1):
        if window_complete(text[:cut], WINDOW):
            return None
        if decide_start(text[:cut], locale, WINDOW).decision is PASS:
            return cut
    return None


def test_issue26_clean_replies_are_released_at_their_first_word() -> None:
    """In every locale but those whose window holds a sentence (Han, kana, Hangul), nearly
    every clean reply is passed once its first word and the character after it are here
    (an opening emoji at once); there, the replies that open with text (not emphasis) are.
    A reply opening with two emphasis marks (`**Jour 14.**`) waits for its window."""
    for loc in clean_locales():
        replies = load_clean(loc)
        early = []
        for text in replies:
            at = _released_at(text, loc)
            word = re.search(r"[^\W\d_]+", text)
            assert word is not None
            assert at is None or at <= word.end() + 1, (loc, text[:40], at)
            if at is not None:
                early.append(text)
        dense = bool(locale_spec(loc).scripts & {"han", "kana", "hangul"})
        doubled = ("**", "__", "*_", "_*")  # two opening marks wait for the window everywhere
        expected = [
            t
            for t in replies
            if not t.startswith(doubled) and not (dense and t.startswith(("*", "_")))
        ]
        assert len(early) >= 0.9 * len(expected) > 0, (loc, len(early), len(expected))


@pytest.mark.parametrize(
    ("prefix", "locale", "decision"),
    [
        ("*She ", "en", PASS),  # the first word and the character after it
        ("*She", "en", MORE),  # the word may go on: `*SheysicsShe`
        ("She smiles", "en", PASS),
        ("ysics", "en", MORE),
        ("ysics ", "en", MORE),  # a word-piece before a space: the next character decides
        ("oh *", "en", PASS),  # a word a reply may open with
        ("ysicsS", "en", MORE),
        ("tion*", "en", MORE),  # glued to an opening `*`: the text after it decides
        ("user ", "en", MORE),  # a role label reads on to its colon
        ("assistant\n", "en", MORE),
        ("<", "en", MORE),
        ("<|im_start|>assistant", "en", MORE),
        ("[", "en", MORE),
        ("##", "en", MORE),
        (".", "en", MORE),  # an ellipsis or a stray mark
        ("-", "en", MORE),
        ('"', "en", MORE),
        ('"*She ', "en", MORE),  # a quote before Markdown, unless the quoted emphasis closes
        ('"*Run!*" ', "en", PASS),
        ("“Hello, ", "en", PASS),
        ("— Ты ", "ru", PASS),
        ("14 ", "en", PASS),
        ("*She nods. ", "en", MORE),  # a sentence end inside the open emphasis
        ("**She ", "en", MORE),  # two opening marks: `**She smiles.*` is closed short
        ("_*She ", "en", MORE),  # `_*She smiles.*`: the `_` is never closed
        ("**Note:** ", "en", MORE),  # bold waits for the window too
        ("*エレナは重い扉を押し開け、", "ja", MORE),  # the window holds a sentence there
        ("エレナは", "ja", MORE),
        ("エレナは重い扉を押し開け、", "ja", PASS),
        ("\u200b*She ", "en", MORE),  # invisible bytes fail at the window
        ("   ", "en", MORE),
    ],
)
def test_issue26_decision_table(prefix: str, locale: str, decision: StartDecision) -> None:
    """What the decision answers on typical prefixes (always before the window is complete)."""
    verdict = decide_start(prefix, locale, WINDOW)
    assert verdict.decision is decision and not verdict.final
    assert verdict.decision is not PASS or stray_start_kind(prefix, locale) is None


def test_issue26_at_the_window_and_at_the_end_the_verdict_is_the_check() -> None:
    """A complete window is judged by `stray_start_kind` (FAIL carries its kind); a reply
    that ended before it, stripped, as the acceptance pipeline reads a whole reply."""
    assert decide_start(",She smiles and waves at you.", "en", WINDOW) == StartVerdict(
        FAIL, "stray_punctuation", final=True
    )
    assert decide_start("*She smiles and waves at you", "en", WINDOW) == StartVerdict(
        PASS, final=True
    )
    assert decide_start("assistant: hi", "en", WINDOW, complete=True).kind == "role_label"
    assert decide_start("Hi!  \n", "en", WINDOW, complete=True) == StartVerdict(PASS, final=True)


# Pieces an adversary of the rules would use: markers, quotes, brackets, blanks, the
# characters each rule reads, role words, template and reasoning markers, cased and caseless
# words, case-folding oddities (ſ, the Kelvin sign), invisible and combining characters.
PIECES = [
    "*", "_", "**", '"', "'", "“", "«", "„", "「", "『", "‘", "’", "»", "<", "[", "#", ".", "-",
    "—", " ", "\t", "\n", "\n\n", ",", ":", "!", "?", "。", "、", "…", "(", "¡", "¿", "1",
    "\u200b", "\ufeff", "\u0301", "ょ", "ー", "ะ", "ـ", "She", "she", "ysics", "tion", "oh",
    "Oh", "a", "A", "assistant", "Assistant", "user", "USER", "model", "human", "iPhone",
    "彼女は", "的", "ности", "Она", "قالت", "ไป", "엘레나", "<think>", "</think>",
    "<|im_start|>", "[INST]", "### Response:", "analysis", "assistantfinal", "ſ", "\u212a",
    "x", "é", "ß", "İ", "<s>", "<|", "|>",
]  # fmt: skip
TEXTS = st.lists(
    st.sampled_from(PIECES) | st.characters(codec="utf-8") | st.text(max_size=3),
    min_size=1,
    max_size=14,
).map("".join)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(TEXTS, st.sampled_from(sorted(LOCALES)), st.integers(4, 30))
def test_issue26_an_early_pass_holds_for_any_text_that_follows(
    text: str, locale: str, window: int
) -> None:
    """Whatever follows an early PASS, the check finds nothing on any longer prefix (any
    window the gateway could judge) or on the whole reply but what the two rules reading
    the whole window find (`WINDOW_KINDS`), which the gateway still judges at the window."""
    for cut in range(1, len(text) + 1):
        if window_complete(text[:cut], window):
            return
        if decide_start(text[:cut], locale, window).decision is PASS:
            found = {stray_start_kind(text[:q], locale) for q in range(cut, len(text) + 1)}
            found.add(stray_start_kind(text.strip(), locale))
            assert found <= {None, *WINDOW_KINDS}, (text, cut, found)
            return


@pytest.mark.parametrize(
    "reply",
    ["_*She smiles.* Hello there, traveller.", "**She smiles.* Then she waves at you."],
)
def test_issue26_a_doubled_emphasis_opening_is_never_released_before_its_window(
    reply: str,
) -> None:
    """The broken emphasis forms the check names (never closed, closed short) are decided
    at the window, so not even their stray first marks go out; the window fails them."""
    assert all(
        decide_start(reply[:i], "en", WINDOW).decision is MORE
        for i in range(1, len(reply))
        if len(reply[:i].strip()) < WINDOW
    )
    verdict = decide_start(reply, "en", WINDOW)
    assert verdict.decision is StartDecision.FAIL and verdict.final
