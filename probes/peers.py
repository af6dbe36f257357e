"""Verdicts by comparison with the peers: one endpoint's failure rate on a contract against
the pooled rate of the other endpoints of the same model in the same round. Pure.

    Rate                 k events in n trials
    PeerVerdict          one endpoint x one rate contract: host k/n, peers k/n, p, decision
    ModelFinding         a defect most endpoints share: the model's, not a host's
    compare_rates(obs)   per-endpoint verdicts and the model-level finding of one contract

The absolute rule of each contract (e.g. C9's share: >= 3 replies, >= 15% and >= 2 anomalous)
still says whether a host is *above the bar*. A host above the bar then gets one decision:

    outlier       significant against its peers: one-sided Fisher exact test of host k/n vs
                  the other endpoints' pooled k/n, Bonferroni-corrected for the m endpoints
                  compared (p * m <= alpha), and at least `min_effect` above the peers' rate
                  -> the contract FAILS.
    model_level   not an outlier, and the defect is shared: at least 2 endpoints and more than
                  half of those judged are above the bar -> not a host failure; the round
                  reports one model-level finding for the contract instead.
    underpowered  not an outlier, not shared, and no outcome of this host could have been
                  significant (the corrected p of "every trial failed" is above alpha: one
                  sample per round, or one or two peers) -> the absolute rule decides alone
                  and the contract FAILS, as it did before peers were compared.
    within_peers  not an outlier although the test could have seen one: the host's excess is
                  within what its peers show -> not a failure (inconclusive).

A host below the bar passes; its verdict is still recorded (k/n, p) as evidence.

`pool_within_bar` (the contracts issue 22 added: tools, streams): the peers pooled for a host
are only the other endpoints *below* the bar, so a defect several hosts share (a tool parser
bundled by a few providers) does not raise the peers' rate and hide another broken host; with
healthy peers nothing changes (a healthy peer is above a bar rarely). Whether a defect is the
model's still counts every endpoint judged.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from probes.exact import bonferroni, fisher_greater

# The family-wise error rate per contract per round (`alpha`, over the endpoints compared)
# and how far a host must exceed its peers' rate (`min_effect`: a smaller excess is the
# model's variance; it equals the C9 share bar, so a host at the bar with clean peers is still
# an outlier) are settings: `ground.settings.ProbeConfig.peer_alpha` / `peer_min_effect`.
# A defect is the model's when at least this many endpoints, and more than half of those
# judged, are above the bar.
SHARED_MIN_HOSTS = 2


class PeerDecision(StrEnum):
    BELOW_BAR = "below_bar"
    OUTLIER = "outlier"
    MODEL_LEVEL = "model_level"
    UNDERPOWERED = "underpowered"
    WITHIN_PEERS = "within_peers"

    @property
    def fails(self) -> bool:
        return self in (PeerDecision.OUTLIER, PeerDecision.UNDERPOWERED)


class Rate(BaseModel):
    """k events in n trials."""

    model_config = ConfigDict(frozen=True)

    k: int = 0
    n: int = 0

    @property
    def share(self) -> float:
        return self.k / self.n if self.n else 0.0

    def __add__(self, other: Rate) -> Rate:
        return Rate(k=self.k + other.k, n=self.n + other.n)

    def __str__(self) -> str:
        return f"{self.k}/{self.n}"


class Observation(BaseModel):
    """What one endpoint showed on one contract this round."""

    model_config = ConfigDict(frozen=True)

    rate: Rate
    above_bar: bool  # the contract's absolute rule failed the host
    reason: str | None = None  # the absolute rule's failing reason


class PeerVerdict(BaseModel):
    model_config = ConfigDict(frozen=True)

    contract: str
    tag: str
    host: Rate
    peers: Rate
    p_value: float
    p_adjusted: float
    p_floor: float  # corrected p had every trial of the host failed (the test's reach)
    effect: float  # host share - peers' share
    above_bar: bool
    decision: PeerDecision

    def evidence(self) -> dict[str, object]:
        """Compact, JSON-friendly evidence for an outcome."""
        return {
            "host": str(self.host),
            "peers": str(self.peers),
            "p": round(self.p_value, 8),
            "p_adjusted": round(self.p_adjusted, 8),
            "effect": round(self.effect, 4),
            "decision": self.decision.value,
        }


class ModelFinding(BaseModel):
    """A defect most endpoints of the model show: reported once, never as hosts' failures."""

    model_config = ConfigDict(frozen=True)

    contract: str
    reason: str
    hosts_above: tuple[str, ...]
    hosts: int  # endpoints judged on the contract
    pooled: Rate

    def line(self) -> str:
        return (
            f"model-level: {self.contract}:{self.reason} on {len(self.hosts_above)} of "
            f"{self.hosts} endpoints ({self.pooled} pooled); counted against none of them"
        )


def compare_rates(
    contract: str,
    observations: Mapping[str, Observation],
    *,
    alpha: float,
    min_effect: float,
    pool_within_bar: bool = False,
) -> tuple[dict[str, PeerVerdict], ModelFinding | None]:
    """Each endpoint against the pooled others (see the module docstring).

    Endpoints without a judged trial (n == 0) are neither compared nor peers."""
    judged = {t: o for t, o in observations.items() if o.rate.n > 0}
    pooled = {t: o for t, o in judged.items() if not (pool_within_bar and o.above_bar)}
    total = sum((o.rate for o in pooled.values()), Rate())
    m = len(judged)
    above = sorted(t for t, o in judged.items() if o.above_bar)
    shared = len(above) >= SHARED_MIN_HOSTS and 2 * len(above) > m
    verdicts: dict[str, PeerVerdict] = {}
    for tag, obs in sorted(judged.items()):
        host = obs.rate
        peers = total if tag not in pooled else Rate(k=total.k - host.k, n=total.n - host.n)
        p = fisher_greater(host.k, host.n, peers.k, peers.n)
        p_adj = bonferroni(p, m)
        p_floor = bonferroni(fisher_greater(host.n, host.n, peers.k, peers.n), m)
        effect = host.share - peers.share
        if not obs.above_bar:
            decision = PeerDecision.BELOW_BAR
        elif p_adj <= alpha and effect >= min_effect:
            decision = PeerDecision.OUTLIER
        elif shared:
            decision = PeerDecision.MODEL_LEVEL
        elif p_floor > alpha:
            decision = PeerDecision.UNDERPOWERED
        else:
            decision = PeerDecision.WITHIN_PEERS
        verdicts[tag] = PeerVerdict(
            contract=contract,
            tag=tag,
            host=host,
            peers=peers,
            p_value=p,
            p_adjusted=p_adj,
            p_floor=p_floor,
            effect=effect,
            above_bar=obs.above_bar,
            decision=decision,
        )
    finding = None
    if shared:
        reasons = Counter(judged[t].reason or "failed" for t in above)
        top = max(reasons.items(), key=lambda kv: (kv[1], kv[0]))[0]
        everyone = sum((o.rate for o in judged.values()), Rate())
        finding = ModelFinding(
            contract=contract, reason=top, hosts_above=tuple(above), hosts=m, pooled=everyone
        )
    return verdicts, finding
