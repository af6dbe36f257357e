"""The streaming start check as a decision over the prefix seen so far (issue 31 item 1):
pass / fail / need-more, final only once the whole reply's start verdict is settled, so on
the bank of clean replies in all 17 locales and every generated defect case the decision at
every prefix is the check of the *whole* reply (a 24-character window's is not: the
incident's `_*She wipes the counter and smiles.*`), a final verdict never changes as more
text arrives, and clean replies are released at their first word or when the emphasis they
open with closes."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probes.integrity import stray_start_kind
from probes.locale_spec import LOCALES
from probes.start_decision import (
    HOLD_CHARS,
    StartDecision,
    StartVerdict,
    decide_start,
    judged,
)
from tests.data.start_variants import start_cases
from tests.data.variants import SEED, clean_locales, load_clean, stray_starts

PASS, FAIL, MORE = StartDecision.PASS, StartDecision.FAIL, StartDecision.NEED_MORE
WINDOW = 24  # the window the gateway judged before issue 31 (start_check_chars)
INCIDENT = "_*She wipes the counter and smiles.* Welcome, traveller. What can I get you?"


def whole_check(text: str, locale: str) -> str | None:
    """The check of the whole reply, as the canary's `check_response_start` and the
    gateway's acceptance read it (stripped)."""
    return stray_start_kind(text.strip(), locale)


def window_decision(
    prefix: str, locale: str, *, complete: bool = False, window: int = WINDOW
) -> StartVerdict:
    """The decision before issue 31: final once 24 characters had arrived, whatever the
    emphasis they opened still had to show."""
    if complete or len(prefix.strip()) >= window:
        return judged(stray_start_kind(prefix.strip(), locale))
    return decide_start(prefix, locale)


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
    """The prefix lengths at which `decide` answers something the check of the whole reply
    does not: a PASS of a reply the check fails, a FAIL of one it passes, a kind that is not
    the check's, a verdict that is not final. Each prefix is where some cutting of the reply
    into pieces first asks, so checking every prefix checks every cutting."""
    assert callable(decide)
    expected = whole_check(text, locale)
    want = (FAIL, expected) if expected else (PASS, None)
    for cut in range(1, len(text) + 1):
        verdict: StartVerdict = decide(text[:cut], locale)
        if verdict.decision is not MORE:
            return [] if (verdict.decision, verdict.kind) == want and verdict.final else [cut]
    end = decide(text, locale, complete=True)
    return [] if (end.decision, end.kind) == want else [len(text)]


@pytest.mark.slow
def test_issue31_every_prefix_of_the_bank_and_its_defects_decides_as_the_whole_reply() -> None:
    """Exhaustive over the bank (17 locales) and every generated defect case: the first
    verdict any prefix gets is the check of the whole reply, kind included."""
    wrong, cases, caught = [], 0, 0
    for loc, cls, text in bank_and_defects():
        cases += 1
        caught += whole_check(text, loc) is not None
        if bad := disagreements(text, loc):
            wrong.append((loc, cls, text[: bad[0] + 5], bad[0]))
    assert wrong == []
    assert cases > 20_000 and caught > 15_000  # the defects are there, and caught


def test_issue31_the_window_decision_released_the_incidents_start() -> None:
    """Today's failure, kept as a failing case of the same property: at 24 characters the
    window said PASS, final, for the incident's form, which the whole reply fails
    (`unbalanced_emphasis`); the settled decision holds it until its emphasis closed."""
    assert whole_check(INCIDENT, "en") == "unbalanced_emphasis"
    assert window_decision(INCIDENT[:28], "en") == judged(None)
    assert disagreements(INCIDENT, "en", window_decision) == [WINDOW + 1]
    assert disagreements(INCIDENT, "en") == []
    closes = INCIDENT.index("* ") + 1
    assert all(decide_start(INCIDENT[:i], "en").decision is not PASS for i in range(1, 60))
    assert decide_start(INCIDENT[: closes + 2], "en") == judged("unbalanced_emphasis")


def _released_at(text: str, locale: str) -> int | None:
    """The shortest prefix the decision passes."""
    for cut in range(1, len(text) + 1):
        if decide_start(text[:cut], locale).decision is PASS:
            return cut
    return None


def test_issue31_clean_replies_are_released_at_their_first_word_or_their_closed_emphasis() -> None:
    """Every clean reply of the bank is released before it ends: one that opens with text
    once its first word has ended (the next visible character is here), one that opens with
    emphasis once that emphasis has closed (and its next character is here), and always
    within `HOLD_CHARS`."""
    for loc in clean_locales():
        for text in load_clean(loc):
            at = _released_at(text, loc)
            assert at is not None and at <= HOLD_CHARS, (loc, text[:40], at)
            if text.startswith(("*", "_")):
                closed = re.match(r"[*_]+[^*_]+[*_]+", text)
                assert closed is not None and at <= closed.end() + 2, (loc, text[:40], at)
            elif (word := re.match(r"[^\W\d_]+\W*\s*", text)) is not None:
                assert at <= word.end() + 1, (loc, text[:40], at)


@pytest.mark.parametrize(
    ("prefix", "locale", "decision"),
    [
        ("She smiles", "en", PASS),  # the first word and the next visible character
        ("She ", "en", PASS),  # the first word has ended
        ("*She ", "en", MORE),  # an emphasis opened: it decides when it closes
        ("*She smiles.* H", "en", PASS),
        ('*She nods. "', "en", FAIL),  # dialogue opened inside the open emphasis
        ("*She nods. ", "en", MORE),
        ("**She smiles.* T", "en", FAIL),  # closed short
        ("_*She wipes the counter and smiles.", "en", MORE),  # the incident, 28+ characters
        ("_*She wipes the counter and smiles.* W", "en", FAIL),
        ("ysics", "en", MORE),
        ("ysics ", "en", MORE),  # a word-piece before a space: the next character decides
        ("oh *S", "en", PASS),  # a word a reply may open with
        ("ysicsS", "en", MORE),
        ("ysicsShe s", "en", FAIL),
        ("tion*", "en", MORE),  # glued to an opening `*`: the text after it decides
        ("user ", "en", MORE),  # a role label reads on to its colon
        ("user said", "en", PASS),
        ("assistant\n", "en", MORE),  # the reply may be "assistant" alone
        ("assistant\nHi", "en", FAIL),
        ("<", "en", MORE),
        ("<|im_start|>assistant", "en", FAIL),
        ("<thi", "en", MORE),  # a think tag may open the reply
        ("[", "en", MORE),
        ("##", "en", MORE),
        ("# Title", "en", PASS),
        (".", "en", MORE),  # an ellipsis or a stray mark
        ("..", "en", MORE),
        ("...S", "en", PASS),
        (".*", "en", FAIL),
        ("-", "en", MORE),
        ("-*", "en", FAIL),
        ('"', "en", MORE),
        ('"*She ', "en", MORE),  # a quote before Markdown, unless the quoted emphasis closes
        ('"*She smiles.* H', "en", FAIL),
        ('"*Run!*" s', "en", PASS),
        ("“Hello, t", "en", PASS),
        ("— Ты з", "ru", PASS),
        ("14 d", "en", PASS),
        ("« D'accord", "fr", PASS),
        ("エレナは", "ja", MORE),
        ("エレナは重い扉を押し開け、", "ja", PASS),
        ("\u200b*She ", "en", MORE),  # invisible bytes, and an emphasis still open
        ("\u200bShe s", "en", FAIL),
        ("   ", "en", MORE),
    ],
)
def test_issue31_decision_table(prefix: str, locale: str, decision: StartDecision) -> None:
    """What the decision answers on typical prefixes; a PASS or FAIL is final and is the
    check of the prefix."""
    verdict = decide_start(prefix, locale)
    assert verdict.decision is decision, (prefix, verdict)
    if decision is not MORE:
        assert verdict.final and verdict.kind == whole_check(prefix, locale), (prefix, verdict)


def test_issue31_at_the_end_the_verdict_is_the_whole_reply() -> None:
    """A reply that ended before its start settled is judged whole, stripped, as the
    acceptance pipeline reads it."""
    assert decide_start("assistant: hi", "en", complete=True).kind == "role_label"
    assert decide_start("Hi!  \n", "en", complete=True) == StartVerdict(PASS, final=True)
    assert decide_start("*She smiles", "en", complete=True) == StartVerdict(PASS, final=True)
    assert decide_start("x" * HOLD_CHARS, "en") == StartVerdict(PASS, final=True)


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
    "x", "é", "ß", "İ", "<s>", "<|", "|>", ' "', ". ", '*"', "smiles.", "*She", "_*", "**Run!**",
]  # fmt: skip
TEXTS = st.lists(
    st.sampled_from(PIECES) | st.characters(codec="utf-8") | st.text(max_size=3),
    min_size=1,
    max_size=16,
).map("".join)


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(TEXTS, st.sampled_from(sorted(LOCALES)))
def test_issue31_a_final_verdict_never_changes_as_more_text_arrives(text: str, locale: str) -> None:
    """Whatever follows the first final verdict, every longer prefix and the whole reply get
    the same verdict, kind included, but for a reasoning marker later in the reply (C11: the
    one rule no prefix settles, judged by acceptance when the reply ends)."""
    for cut in range(1, len(text) + 1):
        first = decide_start(text[:cut], locale)
        if first.decision is MORE:
            continue
        for q in range(cut + 1, len(text) + 1):
            later = decide_start(text[:q], locale)
            if later.kind == "reasoning_leak" and first.kind != "reasoning_leak":
                return
            assert later == first, (text, cut, q, first, later)
        end = decide_start(text, locale, complete=True)
        assert end == first or end.kind == "reasoning_leak", (text, cut, first, end)
        return


@pytest.mark.parametrize(
    "reply",
    [INCIDENT, "**She smiles.* Then she waves at you.", '*She nods. "Welcome back," she says.'],
)
def test_issue31_a_broken_emphasis_opening_is_never_passed(reply: str) -> None:
    """The broken emphasis forms the check names (never closed, closed short, dialogue
    opened inside it) are never passed at any prefix, not even their first marks; the first
    final verdict is the whole reply's failure."""
    verdicts = [decide_start(reply[:i], "en") for i in range(1, len(reply) + 1)]
    assert all(v.decision is not PASS for v in verdicts)
    assert next(v for v in verdicts if v.decision is FAIL).kind == whole_check(reply, "en")
