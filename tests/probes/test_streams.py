"""C12 honest streams on hand-made transcripts (probes/streams.py), and the new rate
contracts against the peers (probes/peer_round.py): tool calls, trigger rates (peers only),
buffered streams, the model served and slow output."""

from __future__ import annotations

from typing import Any

from ground.settings import ProbeConfig
from probes.evidence import evidence_text
from probes.peer_round import SLOW_OUTPUT, judge_with_peers
from probes.probeset import ProbeSetResult
from probes.shares import Bar, share_verdict
from probes.streams import buffered, judge_stream, normalised_model, output_speed, same_model
from probes.types import Contract, Endpoint, Outcome, OutcomeStatus, Transcript

S = OutcomeStatus
CONFIG = ProbeConfig()
TEXT = "*She smiles and pours two cups of tea.* Sit down, traveller, the night is long. " * 3
ENDPOINT = Endpoint(model_id="meta-llama/llama-3.3-70b-instruct", tag="h/fp8", provider_name="H")


def reply(ttft: float, last: float, *, chunks: int = 40, **kw: Any) -> Transcript:
    base: dict[str, Any] = {
        "request_id": kw.pop("request_id", "r"),
        "model_id": ENDPOINT.model_id,
        "tag": "h/fp8",
        "pinned_provider": "H",
        "served_by": "H",
        "served_model": ENDPOINT.model_id,
        "contract": Contract.START,
        "http_status": 200,
        "done": True,
        "text": TEXT,
        "ttft_s": ttft,
        "last_content_s": last,
        "content_chunks": chunks,
        "first_chunk_chars": 6,
        "usage": {"completion_tokens": 60},
    }
    base.update(kw)
    return Transcript(**base)


def test_c12_buffered_needs_silence_and_a_burst() -> None:
    """C12: the whole reply in one burst after >= the bound of silence is buffered; the same
    silence followed by honest streaming, or a short reply, or a fast burst, is not."""
    assert buffered(reply(3.0, 3.05, chunks=1), CONFIG)
    assert not buffered(reply(3.0, 5.5), CONFIG)  # streamed after a slow start
    assert not buffered(reply(0.4, 0.41, chunks=1), CONFIG)  # fast: nothing withheld
    assert not buffered(reply(3.0, 3.0, chunks=1, text="Yes."), CONFIG)  # fits one chunk


def test_c12_a_burst_of_chunks_is_buffered_only_when_the_client_was_listening() -> None:
    """C12: forty chunks flushed at once after 3 s are buffered when the client read the
    stream late in the silence (keep-alives only); when its last read was at the start (a
    stalled client reads an honest stream at once too) they are not the provider's doing."""
    assert buffered(reply(3.0, 3.001, idle_read_s=2.8), CONFIG)
    assert not buffered(reply(3.0, 3.001, idle_read_s=0.01), CONFIG)
    assert not buffered(reply(3.0, 3.001), CONFIG)
    # a busy host: its headers came late too (the request queued), the silence after is short
    assert not buffered(reply(3.0, 3.001, chunks=1, headers_s=2.9, idle_read_s=2.9), CONFIG)


def test_c12_output_speed_after_the_first_token() -> None:
    """C12: characters and tokens per second after the first chunk; none for a burst."""
    cps, tps = output_speed(reply(0.5, 2.5)) or (0, 0)
    assert round(cps, 1) == round((len(TEXT) - 6) / 2.0, 1)
    assert tps is not None and round(tps, 1) == round(60 * (len(TEXT) - 6) / len(TEXT) / 2.0, 1)
    assert output_speed(reply(3.0, 3.0, chunks=1)) is None


def test_c12_model_names_normalised() -> None:
    """C12: author, `:free` and date/version suffixes and serving decorations are ignored;
    another size or a -mini is another model."""
    asked = "meta-llama/llama-3.3-70b-instruct"
    assert normalised_model("meta-llama/Llama-3.3-70B-Instruct:free") == "llama-3.3-70b-instruct"
    assert normalised_model("openai/gpt-4o-2024-08-06") == "gpt-4o"
    assert same_model("Llama-3.3-70B-Instruct-Turbo", asked) and same_model(asked + ":nitro", asked)
    assert not same_model("meta-llama/llama-3.1-8b-instruct", asked)
    assert not same_model("openai/gpt-4o-mini", "openai/gpt-4o")


def test_c12_set_verdicts_name_the_model_and_the_silence() -> None:
    """C12: a set whose replies name another model fails `served_model_mismatch` with both
    names; one whose replies are buffered fails `buffered` with the silence."""
    other = [reply(0.3, 1.5, request_id=f"r{i}", served_model="meta-llama/llama-3.1-8b-instruct") for i in range(8)]  # fmt: skip
    first, served = judge_stream(ENDPOINT, other, CONFIG)
    assert first.status is S.PASS and (served.status, served.reason) == (S.FAIL, "served_model_mismatch")  # fmt: skip
    assert "llama-3.1-8b-instruct" in evidence_text(served) and ENDPOINT.model_id in evidence_text(served)  # fmt: skip
    held = [reply(3.0, 3.01, chunks=1, request_id=f"r{i}") for i in range(8)]
    first, served = judge_stream(ENDPOINT, held, CONFIG)
    assert (first.status, first.reason, served.status) == (S.FAIL, "buffered", S.PASS)
    assert "first token after 3.0 s" in evidence_text(first)
    one = [reply(3.0, 3.01, chunks=1, request_id="r0"), *(reply(0.3, 1.5, request_id=f"r{i}") for i in range(1, 8))]  # fmt: skip
    assert judge_stream(ENDPOINT, one, CONFIG)[0].status is S.PASS  # one odd reply never fails


def _set(tag: str, outcomes: list[Outcome]) -> ProbeSetResult:
    first: dict[Contract, Outcome] = {}
    extra = []
    for o in outcomes:
        if o.contract in first:
            extra.append(o)
        else:
            first[o.contract] = o
    return ProbeSetResult(tag=tag, locale="en", outcomes=first, extra_outcomes=extra)


def _check(tag: str, reason: str, k: int, n: int, *, peer_only: bool = False) -> Outcome:
    """A TOOLS check of `tag` with k of n replies failing for `reason` (the trigger rates
    are `peer_only`: above their bar they wait for the peers)."""
    check = reason if peer_only else "calls"
    bar = Bar(3, 2, 0.5 if peer_only else 0.25)
    replies = [
        Outcome(contract=Contract.TOOLS, status=S.FAIL if i < k else S.PASS, reason=reason if i < k else "ok")
        for i in range(n)
    ]  # fmt: skip
    o = share_verdict(replies, Contract.TOOLS, bar, check=check, tag=tag)
    if peer_only and o.status is S.FAIL:
        o = o.model_copy(update={"status": S.INCONCLUSIVE, "evidence": {**o.evidence, "above_bar": True}})  # fmt: skip
    return o


def _round(sets: dict[str, list[Outcome]]) -> dict[str, list[Outcome]]:
    results = {t: _set(t, o) for t, o in sets.items()}
    peer = judge_with_peers({t: r.all_outcomes for t, r in results.items()}, results, CONFIG)
    return peer.outcomes


def test_c10_bad_calls_fail_only_as_an_outlier() -> None:
    """C10: 6/12 bad calls against 14 clean peers fail; the same host among peers that all
    show it is a model-level finding, not a failure."""
    outs = _round({"bad": [_check("bad", "bad_arguments", 6, 12)], **{f"h{i}": [_check(f"h{i}", "bad_arguments", 0, 12)] for i in range(14)}})  # fmt: skip
    [bad] = outs["bad"]
    assert (bad.status, bad.reason, bad.evidence["peer"]["decision"]) == (S.FAIL, "bad_arguments", "outlier")  # fmt: skip
    shared = _round({f"h{i}": [_check(f"h{i}", "bad_arguments", 6, 12)] for i in range(5)})
    assert all(o.status is S.INCONCLUSIVE and o.reason == "model_level" for items in shared.values() for o in items)  # fmt: skip


def test_c10_trigger_rates_are_judged_by_the_peers_only() -> None:
    """C10: a host that never calls on the auto prompt fails when its peers all call; with
    one peer (underpowered) it passes: the absolute rule never decides a trigger rate, and a
    rate the peers cannot judge is no evidence against the host."""
    many = _round({"odd": [_check("odd", "trigger_missed", 3, 3, peer_only=True)], **{f"h{i}": [_check(f"h{i}", "trigger_missed", 0, 3, peer_only=True)] for i in range(14)}})  # fmt: skip
    [odd] = many["odd"]
    assert (odd.status, odd.reason, odd.evidence["peer"]["decision"]) == (S.FAIL, "trigger_missed", "outlier")  # fmt: skip
    few = _round({"odd": [_check("odd", "trigger_missed", 3, 3, peer_only=True)], "h0": [_check("h0", "trigger_missed", 0, 3, peer_only=True)]})  # fmt: skip
    assert (few["odd"][0].status, few["odd"][0].reason) == (S.PASS, "underpowered")
    assert all(o.status is S.PASS for i in range(14) for o in many[f"h{i}"])


def _stream_set(tag: str, cps: float) -> Outcome:
    return Outcome(
        contract=Contract.STREAM, status=S.PASS, reason="ok", tag=tag,
        evidence={"check": "buffered", "judged": 8, "anomalous": 0, "output_cps": cps, "speed_samples": 6, "output_tps": cps / 4, "listed_tps": 45.0},
    )  # fmt: skip


def test_c12_slow_output_against_the_peers_median() -> None:
    """C12: a host at a twentieth of its peers' median output speed gets `slow_output` with
    both speeds and the listing's throughput; hosts within the ratio do not."""
    outs = _round({"slow": [_stream_set("slow", 20.0)], **{f"h{i}": [_stream_set(f"h{i}", 400.0 + i) for _ in range(1)] for i in range(6)}})  # fmt: skip
    slow = [o for o in outs["slow"] if o.reason == SLOW_OUTPUT]
    assert len(slow) == 1 and slow[0].status is S.FAIL
    assert slow[0].evidence["peers_cps"] == 402.5 and slow[0].evidence["listed_tps"] == 45.0
    assert "of the peers' median" in evidence_text(slow[0])
    assert not any(o.reason == SLOW_OUTPUT for i in range(6) for o in outs[f"h{i}"])


def test_c10_none_check_is_one_trial_the_absolute_rule_decides() -> None:
    """C10: a host whose `none` check failed fails among clean peers (one trial: as C6's
    probe, underpowered, so the bar decides); when most hosts fail it, it is the model's."""

    def none(tag: str, k: int) -> Outcome:
        replies = [Outcome(contract=Contract.TOOLS, status=S.FAIL if i < k else S.PASS, reason="choice_none_violated" if i < k else "text") for i in range(4)]  # fmt: skip
        return share_verdict(replies, Contract.TOOLS, Bar(2, 2, 0.5), check="none", tag=tag)

    outs = _round({"bad": [none("bad", 4)], **{f"h{i}": [none(f"h{i}", 0)] for i in range(6)}})
    [bad] = outs["bad"]
    assert (bad.status, bad.reason, bad.evidence["peer"]["decision"]) == (S.FAIL, "choice_none_violated", "underpowered")  # fmt: skip
    shared = _round({f"h{i}": [none(f"h{i}", 3)] for i in range(4)})
    assert all(o.reason == "model_level" for items in shared.values() for o in items)


def test_c10_a_shared_broken_parser_does_not_hide_another_host() -> None:
    """C10: with nine hosts whose calls almost all fail, a host failing half its calls is
    still an outlier: its peers are the hosts within the bar (pool_within_bar)."""
    sets = {f"broken{i}": [_check(f"broken{i}", "as_text", 11, 12)] for i in range(9)}
    sets |= {f"h{i}": [_check(f"h{i}", "bad_arguments", 0, 12)] for i in range(14)}
    sets["half"] = [_check("half", "bad_arguments", 6, 12)]
    [half] = _round(sets)["half"]
    assert (half.status, half.evidence["peer"]["peers"], half.evidence["peer"]["decision"]) == (S.FAIL, "0/168", "outlier")  # fmt: skip


def test_c12_every_host_naming_the_same_other_model_is_the_naming_not_a_defect() -> None:
    """C12: when most hosts name another model than the listing's (an alias, a canonical
    id), the model-level finding passes them (no host is left unjudged for ever); one host
    naming another model among hosts that name the one asked for fails."""

    def named(tag: str, k: int) -> Outcome:
        replies = [Outcome(contract=Contract.STREAM, status=S.FAIL if i < k else S.PASS, reason="served_model_mismatch" if i < k else "ok") for i in range(8)]  # fmt: skip
        return share_verdict(
            replies, Contract.STREAM, Bar(3, 2, 0.15), check="served_model", tag=tag
        )

    shared = _round({f"h{i}": [named(f"h{i}", 8)] for i in range(5)})
    assert all((o.status, o.reason) == (S.PASS, "model_level") for items in shared.values() for o in items)  # fmt: skip
    one = _round({"swap": [named("swap", 8)], **{f"h{i}": [named(f"h{i}", 0)] for i in range(5)}})
    assert (one["swap"][0].status, one["swap"][0].reason) == (S.FAIL, "served_model_mismatch")
