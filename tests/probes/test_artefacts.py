"""C9/C11: reasoning leaks, byte-level BPE markers and literal escapes in a reply's text
(probes/artefacts.py), as START reasons of one reply (probes/integrity.py) and never on the
letters of the 17 locales."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probes.artefacts import bpe_markers, literal_escapes, reasoning_leak
from probes.integrity import check_reply, check_response_start, stray_start_kind, worst_of
from probes.locale_spec import LOCALES
from probes.types import OutcomeStatus
from tests.data.variants import SEED, clean_locales, load_clean

FAIL, PASS = OutcomeStatus.FAIL, OutcomeStatus.PASS
CLEAN = [(loc, t) for loc in clean_locales() for t in load_clean(loc)]


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("<think>The user wants a scene.</think>*She smiles.*", "think"),
        ("<thinking>Plan the reply.</thinking>*She smiles.*", "thinking"),
        ("<think>The user wants a scene and I", "unclosed"),
        ("The user wants a tavern scene.</think>*She smiles.*", "unopened"),
        ("<|channel|>analysis<|message|>We need to reply.<|end|>", "channel"),
        ("analysisThe user asks for a scene.assistantfinal*She smiles.*", "channel"),
        ("  \n<think>\nok</think> *She smiles.*", "think"),
        ("*She smiles.* <think>should I", "unclosed"),
        ("◁think▷hmm◁/think▷*She smiles.*", "think"),
    ],
)
def test_c11_reasoning_leak_forms(text: str, kind: str) -> None:
    """C11: think blocks, unclosed and unopened ones and harmony channels are found, with
    their kind and the first characters of the leak."""
    found = reasoning_leak(text)
    assert found is not None and found.kind == kind, found
    assert found.excerpt and text.strip()[:3] in text


def test_c11_reasoning_leak_fails_the_start_with_its_first_characters() -> None:
    """C11: a reply that begins with a think block fails START as `reasoning_leak`, the
    leak's first characters in the evidence; the gateway's check names it the same way."""
    o = check_response_start("<think>The user wants a scene.</think>*She smiles.*", "en")
    assert (o.status, o.reason) == (FAIL, "reasoning_leak")
    assert o.evidence["leak"].startswith("<think>The user") and o.evidence["kind"] == "think"
    assert stray_start_kind("<think>The user", "en") == "reasoning_leak"


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("*SheĠsmilesĠandĠwaves.*ĠĠHello!", "space"),
        ("ĠShe smiles at the stranger.", "space"),
        ('*She smiles.*ĊĊ"Hello," she says.ĊWelcome.', "newline"),
        ("*She▁smiles▁and▁waves.*", "sentencepiece"),
        ("*ОнаĠулыбается.*ĠПривет,ĠпутникĠ!", "space"),
        ("*彼女は微笑む。*Ġ「ようこそ」Ġ彼女はĠ言った", "space"),
    ],
)
def test_c9_bpe_markers_found(text: str, kind: str) -> None:
    """C9: byte-level BPE markers where spaces and newlines belong are `bpe_markers`."""
    found = bpe_markers(text)
    assert found is not None and found.kind == kind, found
    outs = check_reply(text, "en")
    assert worst_of(outs).reason == "bpe_markers"


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ('"*She smiles.*\\n\\"Hello,\\" she says."', "double_json"),
        ('"*She smiles.*\\n\\"Hello,\\" she', "double_json"),
        ("*She smiles.*\\n\\nHello, traveller.\\nSit down.", "newline"),
        ("*She smiles.*\\nHello, traveller.", "newline"),
        ("*Ela sorri.* Ol\\u00e1, viajante!", "unicode"),
        ("*\\u5f7c\\u5973\\u306f\\u5fae\\u7b11\\u3080*", "unicode"),
    ],
)
def test_c9_literal_escapes_found(text: str, kind: str) -> None:
    """C9: escape sequences written out and replies JSON-encoded twice are `literal_escapes`,
    which names the reply even where the start rule also trips (`"*She`)."""
    found = literal_escapes(text)
    assert found is not None and found.kind == kind, found
    assert worst_of(check_reply(text, "en")).reason == "literal_escapes"


def test_c9_c11_clean_corpus_never_flagged_in_any_locale() -> None:
    """C9/C11: no clean reply of the corpus (17 locales) shows a reasoning leak, BPE markers
    or literal escapes."""
    assert len(CLEAN) > 600
    flagged = [
        (loc, t[:30])
        for loc, t in CLEAN
        if reasoning_leak(t) or bpe_markers(t) or literal_escapes(t)
    ]
    assert flagged == []


def test_c9_fleet_replies_never_flagged_in_any_locale() -> None:
    """C9/C11: the fleet's healthy replies (its reply bank in every locale) are clean."""
    from fleet import bank

    rng = random.Random(SEED)
    for loc in LOCALES:
        for _ in range(40):
            text = bank.compose_reply(loc, rng)
            assert not (reasoning_leak(text) or bpe_markers(text) or literal_escapes(text)), text


# the letters of the 17 locales near the markers' code points, and Maltese's own Ġ/Ċ
_LETTERS = "ğĞıİşŞçÇöÖüÜąćęłńóśźżĄĆĘŁŃÓŚŹŻăâđêôơưĂÂĐÊÔƠƯàảãáạéèẻẽẹíìỉĩịĠġĊċħĦ"
_WORD = st.text(alphabet=_LETTERS + "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ", min_size=1, max_size=9)


@settings(max_examples=300, deadline=None)
@given(words=st.lists(_WORD, min_size=1, max_size=30), opener=st.sampled_from(["*", '"', "— ", ""]))
def test_c9_locale_letters_are_never_markers(words: list[str], opener: str) -> None:
    """C9: text of Turkish, Polish, Vietnamese (and Maltese) letters, words separated by real
    spaces, is never taken for BPE markers or escapes, whatever the words."""
    text = opener + " ".join(w.lower() for w in words) + "."
    assert bpe_markers(text) is None and literal_escapes(text) is None
    assert reasoning_leak(text) is None


def test_c9_tool_and_prompt_texts_clean() -> None:
    """C9: the canary's own prompts in 17 locales are clean by these rules too."""
    from probes.prompts import prompt_pack
    from probes.tools import tool_pack

    for loc in LOCALES:
        texts = [v for v in {**prompt_pack(loc), **tool_pack(loc)}.values() if isinstance(v, str)]
        assert not any(bpe_markers(t) or literal_escapes(t) or reasoning_leak(t) for t in texts)


def test_c9_a_reply_json_encoded_once_more_is_caught_in_every_locale() -> None:
    """C9: every clean reply, JSON-encoded a second time (ensure_ascii on and off), is
    `literal_escapes`; with its spaces turned into `Ġ` it is `bpe_markers` (space-separated
    locales)."""
    for loc, text in CLEAN:
        for ascii_only in (True, False):
            encoded = json.dumps(text, ensure_ascii=ascii_only)
            assert literal_escapes(encoded) is not None, (loc, encoded[:40])
        if loc not in ("ja", "zh-Hans", "th") and text.count(" ") >= 3:
            assert bpe_markers(text.replace(" ", "Ġ")) is not None, (loc, text[:40])
