"""C9 response start, repetition and encoding; the endpoint share verdict."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ground.settings import ProbeConfig
from probes.integrity import (
    check_encoding,
    check_repetition,
    check_reply,
    check_response_start,
    judge_start_share,
)
from probes.locale_spec import LOCALES
from probes.types import Contract, Outcome, OutcomeStatus
from tests.data.variants import (
    SEED,
    clean_locales,
    load_clean,
    mojibake,
    repetition_loops,
    stray_starts,
)

DEFAULTS = ProbeConfig()  # the probe settings at their defaults

FAIL, PASS, INCONCLUSIVE = OutcomeStatus.FAIL, OutcomeStatus.PASS, OutcomeStatus.INCONCLUSIVE


def _clean() -> list[tuple[str, str]]:
    return [(loc, t) for loc in clean_locales() for t in load_clean(loc)]


def test_c9_clean_starts_never_flagged() -> None:
    """C9: no clean corpus reply is flagged as a stray start."""
    flagged = [(loc, t[:30]) for loc, t in _clean() if check_response_start(t, loc).status is FAIL]
    assert flagged == []


def test_c9_stray_starts_all_caught() -> None:
    """C9: every derived stray start (punctuation, glued fragment, quote before *, token) fails."""
    rng = random.Random(SEED)
    variants = [(loc, v) for loc, t in _clean() for v in stray_starts(t, loc, rng)]
    missed = [
        (loc, v[:30]) for loc, v in variants if check_response_start(v, loc).status is not FAIL
    ]
    assert len(variants) > 500
    assert missed == []


def test_c9_fleet_stray_starts_all_caught() -> None:
    """C9: every stray start the fleet itself injects (incl. '*She and -*She) fails."""
    from fleet import bank, defects

    rng = random.Random(SEED)
    locales = sorted(LOCALES)
    replies = []
    for i in range(400):
        loc = locales[i % len(locales)]
        replies.append((loc, defects.stray_start(bank.compose_reply(loc, rng), rng)))
    missed = [
        (loc, r[:12]) for loc, r in replies if check_response_start(r, loc).status is not FAIL
    ]
    assert {r[:2] for _, r in replies} >= {"'*", "-*"}
    assert missed == []


@pytest.mark.parametrize(
    ("text", "locale", "status"),
    [
        (",*She smiles and sets the cup down.*", "en", FAIL),
        ("ysics*She smiles and sets the cup down.*", "en", FAIL),
        ('"*She smiles and sets the cup down.*', "en", FAIL),
        (".*She smiles.*", "en", FAIL),
        (";Then she left.", "en", FAIL),
        (") Then she left.", "en", FAIL),
        ("] Then she left.", "en", FAIL),
        ("<|im_end|>*She smiles.*", "en", FAIL),
        ("'*She smiles and sets the cup down.*", "en", FAIL),
        ("‘*She smiles and sets the cup down.*", "en", FAIL),
        ("’*She smiles and sets the cup down.*", "en", FAIL),
        ("-*She smiles and sets the cup down.*", "en", FAIL),
        ("-_She smiles._", "en", FAIL),
        ("-*Ела усміхається.*", "uk", FAIL),
        ("'*그녀가 웃는다.*", "ko", FAIL),
        ("'**Run!**' she yells.", "en", PASS),
        ("'Tis a fine night, she says.", "en", PASS),
        ("- *She smiles.* A list item.", "en", PASS),
        ("— *Sonríe.* Vale, vale.", "es", PASS),
        ("—¡Hola! *Sonríe.*", "es", PASS),
        ("„Na?“, fragt sie.", "de", PASS),
        ("« Bonsoir », dit-elle.", "fr", PASS),
        ("...She smiles.", "en", PASS),
        ("… and then she smiled.", "en", PASS),
        ('"**Run!**" she yells.', "en", PASS),
        ("*She smiles.*", "en", PASS),
        ("¿Qué haces aquí? *Ella sonríe.*", "es", PASS),
        ("— Você voltou, diz ela.", "pt-BR", PASS),
        ("»Du bist zurück«, sagt sie.", "de", PASS),
        ("»Du bist zurück«, sagt sie.", "fr", FAIL),
        ("「おかえり」と彼女は微笑んだ。", "ja", PASS),
        ("、彼女は微笑んだ。", "ja", FAIL),
        ("ysics*彼女は微笑んだ。", "ja", FAIL),
        ("她“嗯”了一声，笑了。", "zh-Hans", PASS),
        ("《红楼梦》是她最喜欢的书。", "zh-Hans", PASS),
        ("，她笑了。", "zh-Hans", FAIL),
        ("「안녕」 그녀가 웃었다.", "ko", PASS),
        ("«مرحبا» قالت وهي تبتسم.", "ar", PASS),
        ("،قالت وهي تبتسم.", "ar", FAIL),
        ("\u200fقالت وهي تبتسم.", "ar", PASS),
        ("\ufeff*She smiles.*", "en", FAIL),  # invisible bytes before the text (issue 14)
        ("   \n*She smiles.*", "en", PASS),
    ],
)
def test_c9_start_rule_table(text: str, locale: str, status: OutcomeStatus) -> None:
    """C9: locale-aware start rule on hand-picked openings (legit openers vs stray ones)."""
    o = check_response_start(text, locale)
    assert (o.contract, o.status) == (Contract.START, status)
    assert o.reason == ("stray_start" if status is FAIL else "ok")


def test_c9_empty_start_inconclusive_and_unknown_locale_rejected() -> None:
    """C9: an empty reply has no start to judge; an unknown locale is a ValueError."""
    assert check_response_start("  ", "en").status is INCONCLUSIVE
    with pytest.raises(ValueError, match="'xx'"):
        check_response_start("Hi", "xx")


def test_c9_repetition_loops_all_caught_and_clean_never() -> None:
    """C9: derived loops (sentence, clause, token, paragraph) fail; clean replies never do."""
    rng = random.Random(SEED)
    clean = _clean()
    assert [t[:30] for _, t in clean if check_repetition(t).status is FAIL] == []
    loops = [v for _, t in clean for v in repetition_loops(t, rng)]
    missed = [v[:40] for v in loops if check_repetition(v).status is not FAIL]
    assert missed == []
    assert {check_repetition(v).reason for v in loops[:20]} == {"repetition_loop"}


def test_c9_repetition_cjk_without_spaces() -> None:
    """C9: a loop in text without spaces is judged on characters."""
    loop = "彼女は静かに微笑んで、窓の外を見つめた。" + "ずっと待っていたの。" * 8
    assert check_repetition(loop).status is FAIL
    assert (
        check_repetition("彼女は静かに微笑んで、窓の外を見つめた。雨はまだ止まない。").status
        is PASS
    )


def test_c9_encoding_clean_corpus_never_flagged() -> None:
    """C9: no clean corpus reply shows encoding corruption."""
    assert [t[:30] for loc, t in _clean() if check_encoding(t, loc).status is FAIL] == []


@pytest.mark.parametrize(
    ("codec", "errors", "floor"),
    [
        ("cp1252", "replace", 0.97),
        ("latin-1", "strict", 0.97),
        ("cp1251", "replace", 0.97),
        ("gbk", "replace", 0.97),
        ("shift_jis", "replace", 0.97),
        ("gbk", "ignore", 0.95),
        ("shift_jis", "ignore", 0.95),
    ],
)
def test_c9_mojibake_caught(codec: str, errors: str, floor: float) -> None:
    """C9: UTF-8 decoded with the wrong codec fails as encoding corruption (rate >= floor)."""
    pairs = [(loc, mojibake(t, codec, errors), t) for loc, t in _clean()]
    outcomes = [check_encoding(m, loc) for loc, m, t in pairs if m != t]
    rate = sum(o.status is FAIL for o in outcomes) / len(outcomes)
    print(f"mojibake {codec}/{errors}: caught {rate:.3f} of {len(outcomes)}")
    assert rate >= floor


@pytest.mark.parametrize(
    ("text", "signal"),
    [
        ("Ela disse ol\ufffd e saiu.", "replacement_chars"),
        ("Ela disse \x85olá e saiu.", "c1_controls"),
        ("Ela disse \x07olá e saiu.", "c0_controls"),
        ("Ela disse \udcc3olá e saiu.", "lone_surrogates"),
        ("Ela disse olГЎ e saiu.", "mixed_script_words"),
        ("Ela disse olÃ¡ e saiu, nÃ£o?", "mojibake"),
    ],
)
def test_c9_encoding_signals(text: str, signal: str) -> None:
    """C9: each corruption signal alone fails the encoding check and is named in evidence."""
    o = check_encoding(text, "pt-BR")
    assert (o.status, o.reason, o.evidence["signal"]) == (FAIL, "encoding_corruption", signal)


def test_c9_mixed_script_only_for_latin_targets() -> None:
    """C9: Latin letters inside a Cyrillic word are not flagged for ru (only for Latin targets)."""
    assert check_encoding("Она открыла дверь в SPA-салон и улыбнулась.", "ru").status is PASS
    assert check_encoding("Она открыла дверьa и улыбнулась.", "ru").status is PASS


def test_c9_check_reply_bundles_four_outcomes() -> None:
    """C9: check_reply gives start, repetition, encoding and decoding outcomes, all with the
    locale."""
    outs = check_reply(",*She smiles.* Hi!", "en")
    assert [o.status for o in outs] == [FAIL, PASS, PASS, PASS]
    assert {o.locale for o in outs} == {"en"} and {o.contract for o in outs} == {Contract.START}


def _o(status: OutcomeStatus, reason: str = "ok") -> Outcome:
    return Outcome(contract=Contract.START, status=status, reason=reason)


def test_c9_share_verdict_examples() -> None:
    """C9: 19 of 20 anomalous fails a host; 1 of 20 passes; 2 replies are inconclusive."""
    bad, good = _o(FAIL, "stray_start"), _o(PASS)
    v = judge_start_share([bad] * 19 + [good], DEFAULTS)
    assert (v.status, v.reason, v.evidence["share"]) == (FAIL, "stray_start", 0.95)
    assert judge_start_share([bad] + [good] * 19, DEFAULTS).status is PASS
    assert judge_start_share([bad, bad], DEFAULTS).status is INCONCLUSIVE
    assert judge_start_share([bad, bad, _o(INCONCLUSIVE, "empty")], DEFAULTS).status is INCONCLUSIVE
    assert judge_start_share([bad] * 3 + [good] * 17, DEFAULTS).status is FAIL  # 15%


@given(n=st.integers(min_value=1, max_value=60), pos=st.integers(min_value=0, max_value=59))
def test_c9_one_odd_reply_never_fails_a_host(n: int, pos: int) -> None:
    """C9: exactly one anomalous reply never fails an endpoint, whatever the round size."""
    outs = [_o(PASS)] * n
    outs[pos % n] = _o(FAIL, "repetition_loop")
    assert judge_start_share(outs, DEFAULTS).status is not FAIL


@given(n=st.integers(min_value=3, max_value=60), k=st.integers(min_value=0, max_value=60))
def test_c9_share_threshold_property(n: int, k: int) -> None:
    """C9: with >= 3 judged replies, the verdict is fail exactly when >= 2 and >= 15% anomalous."""
    k = min(k, n)
    outs = [_o(FAIL, "stray_start")] * k + [_o(PASS)] * (n - k)
    expected = FAIL if (k >= 2 and k / n >= 0.15) else PASS
    assert judge_start_share(outs, DEFAULTS).status is expected


def test_c9_locales_cover_rtl_and_spaceless() -> None:
    """C9: the start rule accepts every locale's clean opening quote style."""
    openers = {"ja": "「", "zh-Hans": "“", "ko": "“", "ar": "«", "th": "“", "de": "„", "fr": "« "}
    for loc, q in openers.items():
        assert loc in LOCALES
        assert check_response_start(q + "…", loc).status is PASS


def test_c9_bad_input_typed_and_bounded() -> None:
    """C9: a 10 MB reply is checked on its capped prefix quickly; non-str input is a TypeError."""
    import time

    big = "*She smiles.* " + "x" * 10_000_000
    start = time.monotonic()
    outs = check_reply(big, "en")
    assert time.monotonic() - start < 10
    assert [o.status for o in outs] == [PASS, FAIL, PASS, PASS]  # a 10 MB run of "x" is a loop
    with pytest.raises(TypeError, match="bytes"):
        check_reply(b"*She smiles.*", "en")  # type: ignore[arg-type]
    assert check_encoding("\ufeff", "en").status is INCONCLUSIVE
