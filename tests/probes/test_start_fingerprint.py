"""Distribution outliers without a rule (issue 14 item 2), and a round judged against the
peers end to end on hand-built transcripts (probes/peer_round.py). Pure."""

from __future__ import annotations

import random

import pytest

from fleet import bank
from ground.settings import ProbeConfig
from probes.integrity import judge_start_share
from probes.peer_round import EMPTY_OR_TRUNCATED, PEER_OUTLIER, PeerRound, judge_with_peers
from probes.probeset import ProbeSetResult, reply_outcome
from probes.start_fingerprint import FEATURES, fingerprint, fingerprint_outliers
from probes.types import Contract, Outcome, OutcomeStatus, Transcript

DEFAULTS = ProbeConfig()  # the probe settings at their defaults

S = OutcomeStatus


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("*She smiles.* Hi.", ("emphasis", "*", "latin:title", "balanced")),
        ("she smiles.* Hi.", ("lower", "", "latin:lower", "unbalanced")),
        ('"*She smiles.*', ("quote", '"*', "latin:title", "balanced")),
        ("🌙 *月光洒在河面上。*", ("symbol", "S*", "han", "balanced")),
        ("*彼女は微笑んだ。*", ("emphasis", "*", "han+kana", "balanced")),
        ("\ufeffHi there", ("invisible", "~", "latin:title", "none")),
        ("— Você voltou?", ("dash", "-", "latin:title", "none")),
        ("ysicsShe smiles", ("lower", "", "latin:mixed", "none")),
    ],
)
def test_fingerprint_features(text: str, expected: tuple[str, str, str, str]) -> None:
    """First character class, leading marks, first word's script and casing, emphasis balance."""
    fp = fingerprint(text)
    assert set(fp) == set(FEATURES)
    assert (fp["first"], fp["lead"], fp["word"], fp["md"]) == expected
    assert fingerprint("  ") == {}


def _healthy(locale: str, n: int, rng: random.Random) -> list[str]:
    return [bank.compose_reply(locale, rng) for _ in range(n)]


def _drop_first_word(text: str) -> str:
    """A defect no rule names: the first streamed token is lost."""
    return text.split(" ", 1)[1]


@pytest.mark.parametrize("locale", ["en", "ru", "ja", "ar", "ko"])
def test_unnamed_defect_on_one_host_is_a_fingerprint_outlier(locale: str) -> None:
    """One host of seven lost the first token of every reply: it alone is flagged, with the
    feature that differs; six healthy hosts of the same model are not."""
    rng = random.Random(7)
    samples = {f"h{i}/fp8": [(locale, fingerprint(t)) for t in _healthy(locale, 6, rng)] for i in range(6)}  # fmt: skip
    broken = [bank.chunk_text(t, locale)[1:] for t in _healthy(locale, 6, rng)]
    samples["drop/fp8"] = [(locale, fingerprint("".join(c))) for c in broken]
    out = fingerprint_outliers(samples, alpha=DEFAULTS.peer_alpha)
    assert set(out) == {"drop/fp8"}
    o = out["drop/fp8"]
    assert o.p_adjusted <= 0.05 and o.effect >= 0.4 and o.host.endswith("/6")
    assert o.evidence()["feature"] in FEATURES


def test_shared_style_and_small_or_lonely_groups_are_not_outliers() -> None:
    """Every host shares the odd start: nobody stands out; a host with fewer than 3 samples,
    or alone in its locale group, is not compared."""
    rng = random.Random(3)
    quoted = {f"h{i}": [("en", fingerprint('"' + t)) for t in _healthy("en", 6, rng)] for i in range(5)}  # fmt: skip
    assert fingerprint_outliers(quoted, alpha=DEFAULTS.peer_alpha) == {}
    drop = [("en", fingerprint(_drop_first_word(t))) for t in _healthy("en", 2, rng)]
    assert fingerprint_outliers({**quoted, "few": drop}, alpha=DEFAULTS.peer_alpha) == {}
    alone = [("de", fingerprint(_drop_first_word(t))) for t in _healthy("de", 6, rng)]
    assert fingerprint_outliers({**quoted, "alone": alone}, alpha=DEFAULTS.peer_alpha) == {}


# ---- a round against the peers, on hand-built transcripts ---------------------------------


def _result(
    tag: str, texts: list[str], *, locale: str = "en", finish: str = "stop"
) -> ProbeSetResult:
    contracts = [Contract.LANGUAGE, Contract.REFUSAL] + [Contract.START] * (len(texts) - 2)
    transcripts = [
        Transcript(
            request_id=f"{tag}-{i}", model_id="m/x", tag=tag, pinned_provider=tag, contract=c,
            locale=locale, served_by=tag, http_status=200, ttft_s=0.1, text=text,
            finish_reason=finish, done=True,
        )
        for i, (c, text) in enumerate(zip(contracts, texts, strict=True))
    ]  # fmt: skip
    replies = [o for o in (reply_outcome(t, locale) for t in transcripts) if o is not None]
    start = judge_start_share(replies, DEFAULTS).model_copy(update={"tag": tag, "locale": locale})
    ok = {c: Outcome(contract=c, status=S.PASS, reason="ok", tag=tag) for c in Contract}
    return ProbeSetResult(
        tag=tag,
        locale=locale,
        transcripts=transcripts,
        outcomes={**ok, Contract.START: start},
        reply_outcomes=replies,
    )


def _round(results: dict[str, ProbeSetResult], controls: tuple[str, ...] = ()) -> PeerRound:
    outcomes = {t: list(r.outcomes.values()) for t, r in results.items()}
    return judge_with_peers(outcomes, results, DEFAULTS, exclude=controls)


def _start(outcomes: list[Outcome]) -> list[tuple[S, str]]:
    return sorted((o.status, o.reason) for o in outcomes if o.contract is Contract.START)


def test_round_outlier_fails_with_peer_evidence_and_control_is_left_alone() -> None:
    """A stray-start host fails START as an outlier (k/n and p in the evidence; its starts are
    also unlike its peers'); the control is neither judged nor a peer; healthy hosts pass."""
    rng = random.Random(1)
    results = {f"h{i}": _result(f"h{i}", _healthy("en", 8, rng)) for i in range(5)}
    results["bad"] = _result("bad", [",*" + t.lstrip("*") for t in _healthy("en", 8, rng)])
    results["ctl"] = _result("ctl", [",*" + t.lstrip("*") for t in _healthy("en", 8, rng)])
    peer = _round(results, controls=("ctl",))
    [bad] = [
        o for o in peer.outcomes["bad"] if o.contract is Contract.START and o.reason != PEER_OUTLIER
    ]
    assert (S.FAIL, PEER_OUTLIER) in _start(peer.outcomes["bad"])
    assert (bad.status, bad.reason) == (S.FAIL, "stray_start")
    assert bad.evidence["peer"]["host"] == "8/8" and bad.evidence["peer"]["peers"] == "0/40"
    assert bad.evidence["peer"]["decision"] == "outlier"
    assert peer.outcomes["ctl"] == list(results["ctl"].outcomes.values())
    assert all(_start(peer.outcomes[f"h{i}"]) == [(S.PASS, "ok")] for i in range(5))
    assert peer.findings == []


def test_round_shared_style_is_one_model_level_finding() -> None:
    """Every host wraps its reply in a quote: START becomes inconclusive `model_level` (the
    absolute reason kept) and the round has exactly one finding."""
    rng = random.Random(2)
    results = {f"h{i}": _result(f"h{i}", ['"' + t for t in _healthy("en", 8, rng)]) for i in range(5)}  # fmt: skip
    peer = _round(results)
    for i in range(5):
        [o] = [o for o in peer.outcomes[f"h{i}"] if o.contract is Contract.START]
        assert (o.status, o.reason) == (S.INCONCLUSIVE, "model_level")
        assert o.evidence["absolute_reason"] == "stray_start"
    assert [(f.contract, f.reason, len(f.hosts_above)) for f in peer.findings] == [
        ("start", "stray_start", 5)
    ]


def test_round_truncating_host_and_unnamed_start_defect() -> None:
    """A host cut at max_tokens fails `start:empty_or_truncated`; a host that lost its first
    token gets an observe-only `start:peer_outlier` outcome."""
    rng = random.Random(4)
    results = {f"h{i}": _result(f"h{i}", _healthy("en", 8, rng)) for i in range(5)}
    results["cut"] = _result("cut", _healthy("en", 8, rng), finish="length")
    results["drop"] = _result("drop", [_drop_first_word(t) for t in _healthy("en", 8, rng)])
    peer = _round(results)
    assert (S.FAIL, EMPTY_OR_TRUNCATED) in _start(peer.outcomes["cut"])
    assert (S.FAIL, PEER_OUTLIER) in _start(peer.outcomes["drop"])
    assert (S.PASS, "ok") in _start(peer.outcomes["drop"])  # no rule names this defect
    assert {o.tag for o in peer.fingerprint_outliers} == {"drop"}
