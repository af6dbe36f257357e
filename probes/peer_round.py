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

Each endpoint's outcome of the contract is rewritten by its peer decision: an outlier (or an
underpowered comparison) keeps failing, a model-level or within-peers excess becomes
`inconclusive` (`model_level` / `within_peers`, the absolute reason kept in the evidence).
Every judged outcome carries `evidence["peer"]` (host k/n, peers k/n, p). Endpoints in
`exclude` (positive controls) are neither judged nor peers. A fingerprint outlier is an extra
START outcome `peer_outlier` (FAIL), which the round counts only when told to (observe first).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from pydantic import BaseModel, Field

from ground.settings import ProbeConfig
from probes.integrity import judge_start_share
from probes.peers import (
    ModelFinding,
    Observation,
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
_SINGLE = {"language": Contract.LANGUAGE, "refusal": Contract.REFUSAL, "structured": Contract.STRUCTURED}  # fmt: skip
_JUDGED = (OutcomeStatus.PASS, OutcomeStatus.FAIL)


class PeerRound(BaseModel):
    """The outcomes after the peer comparison, and what the comparison found."""

    outcomes: dict[str, list[Outcome]]
    verdicts: list[PeerVerdict] = Field(default_factory=list)
    findings: list[ModelFinding] = Field(default_factory=list)
    fingerprint_outliers: list[FingerprintOutlier] = Field(default_factory=list)


def _finished(t: Transcript) -> bool:
    return (
        t.contract is not Contract.STRUCTURED
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


def _observations(
    outcomes: Mapping[str, Sequence[Outcome]],
    results: Mapping[str, ProbeSetResult],
    completion: dict[str, Outcome],
    config: ProbeConfig,
) -> dict[str, dict[str, Observation]]:
    obs: dict[str, dict[str, Observation]] = {
        name: {} for name in ("start", "completion", *_SINGLE)
    }
    for tag, items in outcomes.items():
        result = results.get(tag)
        start = _single(items, Contract.START)
        if result is not None and start is not None:
            replies = [o for o in result.reply_outcomes if o.status in _JUDGED]
            k = sum(o.status is OutcomeStatus.FAIL for o in replies)
            obs["start"][tag] = Observation(
                rate=Rate(k=k, n=len(replies)),
                above_bar=start.status is OutcomeStatus.FAIL,
                reason=start.reason,
            )
        if result is not None:
            replies = completion_outcomes(result.transcripts)
            verdict = judge_start_share(replies, config)
            completion_rate = Rate(
                k=sum(o.status is OutcomeStatus.FAIL for o in replies), n=len(replies)
            )
            obs["completion"][tag] = Observation(
                rate=completion_rate,
                above_bar=verdict.status is OutcomeStatus.FAIL,
                reason=EMPTY_OR_TRUNCATED,
            )
            if verdict.status is OutcomeStatus.FAIL:
                completion[tag] = verdict.model_copy(
                    update={"tag": tag, "reason": EMPTY_OR_TRUNCATED, "locale": result.locale}
                )
        for name, contract in _SINGLE.items():
            o = _single(items, contract)
            if o is not None and o.status in _JUDGED:
                failed = o.status is OutcomeStatus.FAIL
                obs[name][tag] = Observation(
                    rate=Rate(k=int(failed), n=1), above_bar=failed, reason=o.reason
                )
    return obs


def _rewrite(o: Outcome, v: PeerVerdict) -> Outcome:
    evidence = {**o.evidence, "peer": v.evidence()}
    if o.status is not OutcomeStatus.FAIL or v.decision.fails:
        return o.model_copy(update={"evidence": evidence})
    evidence["absolute_reason"] = o.reason
    return o.model_copy(
        update={
            "status": OutcomeStatus.INCONCLUSIVE,
            "reason": v.decision.value,
            "evidence": evidence,
        }
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


def judge_with_peers(
    outcomes: Mapping[str, Sequence[Outcome]],
    results: Mapping[str, ProbeSetResult],
    config: ProbeConfig,
    *,
    exclude: Collection[str] = (),
) -> PeerRound:
    """The round's outcomes, each rate contract decided against the peers (module docstring),
    with the peer comparison's and the C9 share bar's knobs of `config`."""
    judged = {t: list(items) for t, items in outcomes.items() if t not in exclude}
    mine = {t: r for t, r in results.items() if t in judged}
    completion: dict[str, Outcome] = {}
    observations = _observations(judged, mine, completion, config)
    alpha, min_effect = config.peer_alpha, config.peer_min_effect
    verdicts: list[PeerVerdict] = []
    findings: list[ModelFinding] = []
    for name, obs in observations.items():
        by_tag, finding = compare_rates(name, obs, alpha=alpha, min_effect=min_effect)
        verdicts.extend(by_tag.values())
        if finding is not None:
            contract = "start" if name == "completion" else name
            findings.append(finding.model_copy(update={"contract": contract}))
        for tag, v in by_tag.items():
            if name == "completion":
                if tag in completion:
                    judged[tag].append(_rewrite(completion[tag], v))
                continue
            # "start" comes first: its only START outcome yet is the share verdict
            contract = Contract.START if name == "start" else _SINGLE[name]
            judged[tag] = [_rewrite(o, v) if o.contract is contract else o for o in judged[tag]]
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
    merged = {t: judged.get(t, list(items)) for t, items in outcomes.items()}
    return PeerRound(
        outcomes=merged,
        verdicts=verdicts,
        findings=findings,
        fingerprint_outliers=list(outliers.values()),
    )
