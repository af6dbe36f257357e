"""A round's outcomes judged against the peers (pure): the rate contracts through
`probes.peers`, the start fingerprints through `probes.start_fingerprint`.

    judge_with_peers(outcomes, results, exclude=controls) -> PeerRound

Rate contracts and what one trial is:

    start        one judged reply of the probe set (start / repetition / encoding), C9
    completion   one finished text reply; an event when it is empty or cut at max_tokens
                 (finish_reason `length`); judged like C9's share, reported as
                 `start:empty_or_truncated`
    language     the endpoint's voted language verdict (C8's 2-of-3 stays the unit)
    refusal      the refusal probe (C4)
    structured   the structured-output probe (C6)
    tools        one forced tool call (C10, probes/tool_verdicts.py `calls`)
    tools_none / tools_result   the `none` check / the tool-result check, one trial each (a
                 few requests whose share bar decides, as C6's one probe: absolute unless shared)
    trigger_missed / trigger_spurious   one `auto` reply against its prompt: judged against
                 the peers only (an outlier fails; underpowered, within the peers or shared
                 passes: models legitimately differ in when they call a tool)
    stream       one text reply sent at once after a long silence (C12, `buffered`)
    served_model one reply naming another model than the one asked for (C12)

Each endpoint's outcome of the contract is rewritten by its peer decision: an outlier (or an
underpowered comparison) keeps failing, a model-level or within-peers excess becomes
`inconclusive` (`model_level` / `within_peers`, the absolute reason kept in the evidence).
Every judged outcome carries `evidence["peer"]` (host k/n, peers k/n, p). Endpoints in
`exclude` (positive controls) are neither judged nor peers. A fingerprint outlier is an extra
START outcome `peer_outlier` (FAIL), which the round counts only when told to (observe first).
So is a host whose output speed is far below its peers' (`stream:slow_output`, `slow_outputs`).
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Mapping, Sequence

from pydantic import BaseModel, Field

from ground.settings import ProbeConfig
from probes.integrity import judge_start_share
from probes.peers import (
    SHARED_MIN_HOSTS,
    ModelFinding,
    Observation,
    PeerDecision,
    PeerVerdict,
    Rate,
    compare_rates,
)
from probes.probeset import ProbeSetResult
from probes.start_fingerprint import FingerprintOutlier, fingerprint, fingerprint_outliers
from probes.transport import classify_transport
from probes.types import Contract, Outcome, OutcomeStatus, Transcript

PEER_OUTLIER = "peer_outlier"
EMPTY_OR_TRUNCATED = "empty_or_truncated"
SLOW_OUTPUT = "slow_output"
_SINGLE = {"language": Contract.LANGUAGE, "refusal": Contract.REFUSAL, "structured": Contract.STRUCTURED}  # fmt: skip
# rate contracts judged as a share check of the probe set: name -> (contract, check); their
# peers are the endpoints within the bar (`compare_rates(pool_within_bar=True)`)
CHECKS: dict[str, tuple[Contract, str]] = {
    "tools": (Contract.TOOLS, "calls"),
    "tools_none": (Contract.TOOLS, "none"),
    "tools_result": (Contract.TOOLS, "result"),
    "trigger_missed": (Contract.TOOLS, "trigger_missed"),
    "trigger_spurious": (Contract.TOOLS, "trigger_spurious"),
    "stream": (Contract.STREAM, "buffered"),
    "served_model": (Contract.STREAM, "served_model"),
}
PEERS_ONLY = frozenset({"trigger_missed", "trigger_spurious"})
# checks of a few requests whose verdict is one trial against the peers (as C6's probe)
SINGLE_TRIALS = frozenset({"tools_none", "tools_result"})
# a model-level finding of these passes: every host naming the same other model is the
# aggregator's or the model's naming (an alias, a canonical id), nothing unknown of a host
SHARED_PASSES = frozenset({"served_model"})
_JUDGED = (OutcomeStatus.PASS, OutcomeStatus.FAIL)


class PeerRound(BaseModel):
    """The outcomes after the peer comparison, and what the comparison found."""

    outcomes: dict[str, list[Outcome]]
    verdicts: list[PeerVerdict] = Field(default_factory=list)
    findings: list[ModelFinding] = Field(default_factory=list)
    fingerprint_outliers: list[FingerprintOutlier] = Field(default_factory=list)


def _finished(t: Transcript) -> bool:
    """A finished text reply (a tool reply's empty content is a call, not an empty reply)."""
    return (
        t.contract not in (Contract.STRUCTURED, Contract.TOOLS)
        and classify_transport(t) is None
        and t.http_status == 200
        and t.done
        and t.error is None
        and not t.gave_up_waiting
    )


def completion_outcomes(transcripts: Sequence[Transcript]) -> list[Outcome]:
    """One START outcome per finished text reply: FAIL `empty_or_truncated` when it is empty
    or was cut at max_tokens, else PASS."""
    out = []
    for t in transcripts:
        if not _finished(t):
            continue
        bad = not t.text.strip() or (t.finish_reason or "").lower() == "length"
        out.append(
            Outcome(
                contract=Contract.START,
                status=OutcomeStatus.FAIL if bad else OutcomeStatus.PASS,
                reason=EMPTY_OR_TRUNCATED if bad else "ok",
                tag=t.tag,
                locale=t.locale,
            )
        )
    return out


def _single(outcomes: Sequence[Outcome], contract: Contract) -> Outcome | None:
    return next((o for o in outcomes if o.contract is contract), None)


def _is_check(o: Outcome, name: str) -> bool:
    contract, check = CHECKS[name]
    return o.contract is contract and o.evidence.get("check") == check


def _check_observation(o: Outcome, single: bool) -> Observation | None:
    """A share check's k/n; above the bar when it failed (or, a trigger rate, was above it).
    A `single` check is one trial (failed or not), as C6's structured probe is."""
    n, k = o.evidence.get("judged"), o.evidence.get("anomalous")
    if not isinstance(n, int) or not isinstance(k, int) or n <= 0:
        return None
    if o.status not in _JUDGED and not o.evidence.get("above_bar"):
        return None
    above = o.status is OutcomeStatus.FAIL or bool(o.evidence.get("above_bar"))
    rate = Rate(k=int(above), n=1) if single else Rate(k=k, n=n)
    return Observation(rate=rate, above_bar=above, reason=o.reason)


def _start_observations(
    tag: str,
    items: Sequence[Outcome],
    result: ProbeSetResult,
    completion: dict[str, Outcome],
    config: ProbeConfig,
    obs: dict[str, dict[str, Observation]],
) -> None:
    """C9's start share and the empty-or-truncated share of one endpoint (into `obs`)."""
    start = _single(items, Contract.START)
    if start is not None:
        replies = [o for o in result.reply_outcomes if o.status in _JUDGED]
        k = sum(o.status is OutcomeStatus.FAIL for o in replies)
        obs["start"][tag] = Observation(
            rate=Rate(k=k, n=len(replies)),
            above_bar=start.status is OutcomeStatus.FAIL,
            reason=start.reason,
        )
    replies = completion_outcomes(result.transcripts)
    verdict = judge_start_share(replies, config)
    obs["completion"][tag] = Observation(
        rate=Rate(k=sum(o.status is OutcomeStatus.FAIL for o in replies), n=len(replies)),
        above_bar=verdict.status is OutcomeStatus.FAIL,
        reason=EMPTY_OR_TRUNCATED,
    )
    if verdict.status is OutcomeStatus.FAIL:
        completion[tag] = verdict.model_copy(
            update={"tag": tag, "reason": EMPTY_OR_TRUNCATED, "locale": result.locale}
        )


def _observations(
    outcomes: Mapping[str, Sequence[Outcome]],
    results: Mapping[str, ProbeSetResult],
    completion: dict[str, Outcome],
    config: ProbeConfig,
) -> dict[str, dict[str, Observation]]:
    names = ("start", "completion", *_SINGLE, *CHECKS)
    obs: dict[str, dict[str, Observation]] = {name: {} for name in names}
    for tag, items in outcomes.items():
        result = results.get(tag)
        if result is not None:
            _start_observations(tag, items, result, completion, config, obs)
        for name, contract in _SINGLE.items():
            o = _single(items, contract)
            if o is not None and o.status in _JUDGED:
                failed = o.status is OutcomeStatus.FAIL
                obs[name][tag] = Observation(
                    rate=Rate(k=int(failed), n=1), above_bar=failed, reason=o.reason
                )
        for name in CHECKS:
            found = next((o for o in items if _is_check(o, name)), None)
            seen = _check_observation(found, name in SINGLE_TRIALS) if found is not None else None
            if seen is not None:
                obs[name][tag] = seen
    return obs


def _rewrite(o: Outcome, v: PeerVerdict, *, shared_passes: bool = False) -> Outcome:
    """The outcome after its peer decision: a failure that is not an outlier (nor
    underpowered) becomes INCONCLUSIVE with the decision as its reason, or, with
    `shared_passes`, a PASS when every host shares it (the model's naming, not a defect)."""
    evidence = {**o.evidence, "peer": v.evidence()}
    if o.status is not OutcomeStatus.FAIL or v.decision.fails:
        return o.model_copy(update={"evidence": evidence})
    evidence["absolute_reason"] = o.reason
    shared = shared_passes and v.decision is PeerDecision.MODEL_LEVEL
    return o.model_copy(
        update={
            "status": OutcomeStatus.PASS if shared else OutcomeStatus.INCONCLUSIVE,
            "reason": v.decision.value,
            "evidence": evidence,
        }
    )


def _rewrite_peers_only(o: Outcome, v: PeerVerdict) -> Outcome:
    """A rate only the peers judge: FAIL exactly when the host is an outlier; otherwise a
    PASS (its peers call tools as it does, or too few peers to tell: models differ there,
    which is no evidence against the host), the decision and the rate in the evidence."""
    evidence = {**o.evidence, "peer": v.evidence()}
    if v.decision is PeerDecision.OUTLIER:
        return o.model_copy(update={"status": OutcomeStatus.FAIL, "evidence": evidence})
    if o.status is OutcomeStatus.PASS:
        return o.model_copy(update={"evidence": evidence})
    evidence["absolute_reason"] = o.reason
    return o.model_copy(
        update={"status": OutcomeStatus.PASS, "reason": v.decision.value, "evidence": evidence}
    )


def _fingerprint_samples(
    results: Mapping[str, ProbeSetResult],
) -> dict[str, list[tuple[str, dict[str, str]]]]:
    samples: dict[str, list[tuple[str, dict[str, str]]]] = {}
    for tag, result in results.items():
        for t in result.transcripts:
            if t.contract is Contract.START and _finished(t) and t.text.strip():
                samples.setdefault(tag, []).append((t.locale or result.locale, fingerprint(t.text)))
    return samples


def _speed(result: ProbeSetResult, min_samples: int) -> float | None:
    stream = result.outcomes.get(Contract.STREAM)
    ev = stream.evidence if stream is not None else {}
    cps, samples = ev.get("output_cps"), ev.get("speed_samples")
    if not isinstance(cps, int | float) or not isinstance(samples, int) or samples < min_samples:
        return None
    return float(cps)


def slow_outputs(results: Mapping[str, ProbeSetResult], config: ProbeConfig) -> dict[str, Outcome]:
    """C12: each endpoint's median output speed (characters/s after the first token, over
    its start samples) against the median of its peers' (at least SHARED_MIN_HOSTS peers
    measured): below `slow_output_ratio` of it is STREAM `slow_output` (FAIL, counted only when
    `slow_output_enforce`), with the speeds and the listing's throughput as evidence."""
    speeds = {
        tag: v
        for tag, r in results.items()
        if (v := _speed(r, config.start_anomaly_min_replies)) is not None
    }
    out: dict[str, Outcome] = {}
    for tag, cps in speeds.items():
        peers = [v for t, v in speeds.items() if t != tag]
        if len(peers) < SHARED_MIN_HOSTS:
            continue
        median = statistics.median(peers)
        if cps >= config.slow_output_ratio * median:
            continue
        ev = results[tag].outcomes[Contract.STREAM].evidence
        out[tag] = Outcome(
            contract=Contract.STREAM,
            status=OutcomeStatus.FAIL,
            reason=SLOW_OUTPUT,
            tag=tag,
            locale=results[tag].outcomes[Contract.STREAM].locale,
            evidence={
                "check": "speed",
                "output_cps": cps,
                "peers_cps": round(median, 2),
                "peers": len(peers),
                "ratio": round(cps / median, 3) if median else None,
                "min_ratio": config.slow_output_ratio,
                "output_tps": ev.get("output_tps"),
                "listed_tps": ev.get("listed_tps"),
            },
        )
    return out


def _apply(
    judged: dict[str, list[Outcome]],
    name: str,
    by_tag: Mapping[str, PeerVerdict],
    completion: Mapping[str, Outcome],
) -> None:
    """Each endpoint's outcome of rate contract `name` rewritten by its peer verdict."""
    for tag, v in by_tag.items():
        if name == "completion":
            if tag in completion:
                judged[tag].append(_rewrite(completion[tag], v))
            continue
        if name in PEERS_ONLY:
            judged[tag] = [_rewrite_peers_only(o, v) if _is_check(o, name) else o for o in judged[tag]]  # fmt: skip
            continue
        if name in CHECKS:
            shared = name in SHARED_PASSES
            judged[tag] = [
                _rewrite(o, v, shared_passes=shared) if _is_check(o, name) else o
                for o in judged[tag]
            ]
            continue
        # "start" comes first: its only START outcome yet is the share verdict
        contract = Contract.START if name == "start" else _SINGLE[name]
        judged[tag] = [_rewrite(o, v) if o.contract is contract else o for o in judged[tag]]


def _finding_contract(name: str) -> str:
    if name in CHECKS:
        return CHECKS[name][0].value
    return "start" if name == "completion" else name


def judge_with_peers(
    outcomes: Mapping[str, Sequence[Outcome]],
    results: Mapping[str, ProbeSetResult],
    config: ProbeConfig,
    *,
    exclude: Collection[str] = (),
) -> PeerRound:
    """The round's outcomes, each rate contract decided against the peers (module docstring),
    with the peer comparison's and the shares' knobs of `config`."""
    judged = {t: list(items) for t, items in outcomes.items() if t not in exclude}
    mine = {t: r for t, r in results.items() if t in judged}
    completion: dict[str, Outcome] = {}
    observations = _observations(judged, mine, completion, config)
    alpha, min_effect = config.peer_alpha, config.peer_min_effect
    verdicts: list[PeerVerdict] = []
    findings: list[ModelFinding] = []
    for name, obs in observations.items():
        by_tag, finding = compare_rates(
            name, obs, alpha=alpha, min_effect=min_effect, pool_within_bar=name in CHECKS
        )
        verdicts.extend(by_tag.values())
        if finding is not None:
            findings.append(finding.model_copy(update={"contract": _finding_contract(name)}))
        _apply(judged, name, by_tag, completion)
    outliers = fingerprint_outliers(_fingerprint_samples(mine), alpha=alpha)
    for tag, fo in outliers.items():
        judged[tag].append(
            Outcome(
                contract=Contract.START,
                status=OutcomeStatus.FAIL,
                reason=PEER_OUTLIER,
                tag=tag,
                locale=fo.locale,
                evidence=fo.evidence(),
            )
        )
    for tag, slow in slow_outputs(mine, config).items():
        judged[tag].append(slow)
    merged = {t: judged.get(t, list(items)) for t, items in outcomes.items()}
    return PeerRound(
        outcomes=merged,
        verdicts=verdicts,
        findings=findings,
        fingerprint_outliers=list(outliers.values()),
    )
