"""C9 per-reply start check, stronger (issue 14 item 3): glued fragments, fragment + space,
word pieces, broken emphasis, template leaks and invisible bytes, in all 17 locales; no
false positive on clean replies, their prefixes (the gateway's streaming check) or the table."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from probes.integrity import check_response_start
from probes.locale_spec import LOCALES
from probes.types import OutcomeStatus
from tests.data.start_variants import CLASSES, start_cases
from tests.data.variants import SEED, clean_locales, load_clean

FAIL, PASS = OutcomeStatus.FAIL, OutcomeStatus.PASS
CASELESS = ("ja", "zh-Hans", "th", "ar", "ko")


def _rates() -> tuple[Counter[tuple[str, str]], Counter[tuple[str, str]]]:
    rng = random.Random(SEED)
    total: Counter[tuple[str, str]] = Counter()
    caught: Counter[tuple[str, str]] = Counter()
    for loc in clean_locales():
        for text in load_clean(loc):
            for cls, variants in start_cases(text, loc, rng).items():
                for v in variants:
                    total[cls, loc] += 1
                    caught[cls, loc] += check_response_start(v, loc).status is FAIL
    return total, caught


def test_c9_generated_defects_caught_per_class_and_locale() -> None:
    """Every class is caught in every locale (caseless scripts included); unbalanced emphasis
    everywhere but Thai, which ends sentences with a space (there: at least half)."""
    total, caught = _rates()
    assert set(clean_locales()) == set(LOCALES)
    for cls in CLASSES:
        for loc in clean_locales():
            n, k = total[cls, loc], caught[cls, loc]
            assert n > 0 or cls == "doubled_emphasis", (cls, loc)
            floor = 0.5 if (cls, loc) == ("unbalanced_emphasis", "th") else 1.0
            assert k >= floor * n, (cls, loc, k, n)
    assert sum(total.values()) > 10_000


def test_c9_clean_replies_and_every_prefix_pass() -> None:
    """No clean corpus reply, and no prefix of one (what a streaming check sees), is flagged."""
    flagged = []
    for loc in clean_locales():
        for text in load_clean(loc):
            for cut in [*range(1, 121), len(text)]:
                if check_response_start(text[:cut], loc).status is FAIL:
                    flagged.append((loc, cut, text[:cut]))
                    break
    assert flagged == []


def test_c9_fleet_replies_and_their_streamed_heads_pass() -> None:
    """Healthy fleet replies in every locale, whole and chunk by chunk, are never flagged."""
    from fleet import bank

    rng = random.Random(SEED)
    flagged = []
    for i in range(1700):
        loc = sorted(LOCALES)[i % len(LOCALES)]
        reply = bank.compose_reply(loc, rng)
        head = ""
        for chunk in [*bank.chunk_text(reply, loc)[:10], reply]:
            head = chunk if chunk is reply else head + chunk
            if check_response_start(head, loc).status is FAIL:
                flagged.append((loc, head))
                break
    assert flagged == []


@pytest.mark.parametrize(
    ("text", "locale", "kind"),
    [
        ("ysicsShe smiles and sets the cup down.", "en", "glued_fragment"),
        ("tionA feira já estava lotada.", "pt-BR", "glued_fragment"),
        ("ностиОна улыбается.", "ru", "glued_fragment"),
        ("ysicsОна улыбается.", "uk", "glued_fragment"),
        ("tion彼女は微笑んだ。", "ja", "glued_fragment"),
        ("ing그녀가 웃었다.", "ko", "glued_fragment"),
        ("mentเธอยิ้ม", "th", "glued_fragment"),
        ("ingقالت وهي تبتسم.", "ar", "glued_fragment"),
        ("的She smiles.", "en", "glued_fragment"),
        ("ären¡Feliz cumpleaños!", "es", "glued_fragment"),
        ("ysics *She smiles and sets the cup down.*", "en", "fragment_before_start"),
        ("ysics She smiles.", "en", "fragment_before_start"),
        ("ности «Bonsoir», dit-elle.", "fr", "fragment_before_start"),
        ("tion 「おかえり」と彼女は微笑んだ。", "ja", "fragment_before_start"),
        ("ing 她笑了。", "zh-Hans", "fragment_before_start"),
        ("ょう彼女は微笑んだ。", "ja", "word_piece"),
        ("ะเธอยิ้ม", "th", "word_piece"),
        ("\u064eقالت وهي تبتسم.", "ar", "word_piece"),
        ('**She smiles.* "Hi," she says.', "en", "doubled_emphasis"),
        ('_*She smiles.* "Hi," she says.', "en", "unbalanced_emphasis"),
        ('*She smiles. "Hi," she says.', "en", "unbalanced_emphasis"),
        ("*Ela sorri. — Oi, tudo bem?", "pt-BR", "unbalanced_emphasis"),
        ("*She smiles.\n\nThen she leaves.", "en", "unbalanced_emphasis"),
        ("assistant: *She smiles.*", "en", "role_label"),
        ("**Assistant:** *She smiles.*", "en", "role_label"),
        ("assistant\n*She smiles.*", "en", "role_label"),
        ("<|im_start|>assistant\n*She smiles.*", "en", "template_token"),
        ("<｜Assistant｜>*She smiles.*", "en", "template_token"),
        ("<start_of_turn>model\n*She smiles.*", "en", "template_token"),
        ("<<SYS>>\n*She smiles.*", "en", "template_token"),
        ("### Response:\n*She smiles.*", "en", "template_token"),
        ("[gMASK]<sop>她笑了。", "zh-Hans", "template_token"),
        ("\ufeff*She smiles.*", "en", "invisible_prefix"),
        ("\u200b*Ela sorri.*", "pt-BR", "invisible_prefix"),
        ("  \u2060「おかえり」", "ja", "invisible_prefix"),
    ],
)
def test_c9_stronger_start_rule_flags(text: str, locale: str, kind: str) -> None:
    """Each defect form of issue 14 fails the start check with its kind in the evidence."""
    o = check_response_start(text, locale)
    assert (o.status, o.reason, o.evidence.get("kind")) == (FAIL, "stray_start", kind)


@pytest.mark.parametrize(
    ("text", "locale"),
    [
        ("— Você voltou? — pergunta ela.", "pt-BR"),
        ("—¿Y ahora qué? *Sonríe.*", "es"),
        ("« Bonsoir », dit-elle.", "fr"),
        ("‹Hallo›, sagt sie.", "de"),
        ("„Wi-Fi“ gibt es hier nicht.", "de"),
        ('"Okay," she says. *She smiles.*', "en"),
        ("「おかえり」と彼女は微笑んだ。", "ja"),
        ("iPhoneの画面が割れた。", "ja"),
        ("Wi-Fiが繋がらない。", "ja"),
        ("KTX를 타고 왔어.", "ko"),
        ("TGV 列车很快。", "zh-Hans"),
        ("«مرحبا» قالت وهي تبتسم.", "ar"),
        ("\u200fقالت وهي تبتسم.", "ar"),
        ("“ไปกันเถอะ” เธอพูด", "th"),
        ("iPhone *she says* is broken.", "en"),
        ("eBay sold it.", "en"),
        ("macOS crashed again.", "en"),
        ("McDonald's was closed.", "en"),
        ("O'Brien nods.", "en"),
        ("d'Artagnan sourit.", "fr"),
        ("dell'Europa parlava.", "it"),
        ("von Trapp sings.", "en"),
        ("de Gaulle disse não.", "pt-BR"),
        ("al-Farabi wrote it.", "en"),
        ("Amsterdam'a gittik.", "tr"),
        ("1987 was the year.", "en"),
        ("3:15 already? *She yawns.*", "en"),
        ("17.30’da buluşalım.", "tr"),
        ("oh *She smiles.*", "en"),
        ("hmm *He thinks it over.*", "en"),
        ("and Marco left.", "en"),
        ("ok *Она кивает.*", "ru"),
        ("ну *Она кивает.*", "ru"),
        ("w Krakowie było zimno.", "pl"),
        ("んー、そうだね。", "ja"),
        ("ㅋㅋㅋ 진짜?", "ko"),
        ("**Bold** then *italic*.", "en"),
        ("*She says **no** and leaves.*", "en"),
        ("***She** smiles*", "en"),
        ("_*She smiles.*_ Hi.", "en"),
        ("**_Warning:_** run.", "en"),
        ('*She whispers "run" and leaves.*', "en"),
        ("*She smiles.\nThen she leaves.*", "en"),
        ("*彼女は*微笑んだ。", "ja"),
        ("**Day 14.*", "en"),  # a streamed head cut inside the closing `**`
        ("*Elena pushes the heavy d", "en"),  # a head before the action closes
        ("Narrator: The night falls.", "en"),
        ("System: level up!", "en"),
        ("<3 *She hugs you.*", "en"),
    ],
)
def test_c9_stronger_start_rule_keeps_legit_openings(text: str, locale: str) -> None:
    """Dialogue dashes, guillemets and other quotes, names, brands, numbers, quoted foreign
    words, lower-case interjections and nested emphasis are not stray starts."""
    o = check_response_start(text, locale)
    assert o.status is PASS, o.evidence
