"""Production traffic as evidence (SPEC O8): per (model, provider), a sliding window of the
gateway's own verdicts on real replies, and the rule that makes a provider *suspect*. Pure:
`now` is always passed in; no clock, no I/O.

    passive_verdict(classification, completion, client_shaped=..., cancelled=...)
        -> "ok" | a Reason's value | None
        what one attempt says of the provider that served it: a judged reply, accepted
        ("ok") or failing for a reason; None when it is no evidence about the provider
        (transport, capacity, an in-band error, a client's own error, a request whose client
        set output-shaping parameters (routing/attribution.py), a cancelled attempt)
    book = PassiveBook(settings.passive, settings.probe)
    book.observe(model, provider, verdict, ttft_ms=..., now=now) -> Suspicion | None
    book.figures(model, now)      {provider: Figures}: replies, failures by reason, first tokens
    book.suspects(model, now)     {provider: reasons} suspect now

Reasons: a stray or corrupted reply start (the canary's response-start check), a structured
reply that fails its schema, a broken tool call, a truncated reply (finish `length` not
caused by the client's own limit), an empty reply (no text, no tool call; counted even
where the contract takes one, as the canary's start contract counts it) and a stream with a
`data:` event that is not JSON (skipped in an accepted reply, or too many: a malformed stream).

Suspect: a provider's failure rate for one reason against the pooled rate of the model's
other providers in the same window, with the canary's own peer comparison
(`probes.peers.compare_rates`: one-sided Fisher exact test, Bonferroni-corrected for the
providers compared, and at least `peer_min_effect` above the peers), once the provider has
`min_requests` judged replies in the window and at least `peer_min_effect` of them fail for
that reason (the bar). Only the `outlier` decision makes a provider suspect: a defect most
providers share is the model's, and a test that cannot be significant decides nothing here.
A provider is suspect from that verdict until the evidence ages out of the window (`window_s`).

Cost: an accepted reply adds to two counters of the current bucket; the test runs only when a
failure puts its provider above the bar: first the provider's own Fisher test (the other
providers' tests cost more, and run only when it passes), and a provider found suspect is
judged again for that reason once a bucket later, not at each failure. Bounds: `BUCKETS` buckets per (model, provider), at
most `MAX_PROVIDERS` providers per model (a provider name comes from the upstream's reply),
`TTFT_KEEP` first-token times per bucket.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from ground.settings import PassiveConfig, ProbeConfig
from probes.exact import bonferroni, fisher_greater
from probes.peers import Observation, PeerDecision, Rate, compare_rates
from probes.types import Contract
from routing.classify import Classification
from routing.errors import FailureClass
from routing.response import Completion

BUCKETS = 10  # a window is kept in this many buckets
MAX_PROVIDERS = 64  # per model
TTFT_KEEP = 32  # first-token times kept per bucket
OK = "ok"


class Reason(StrEnum):
    START = "start"
    SCHEMA = "schema"
    TOOL_CALL = "tool_call"
    TRUNCATION = "truncation"
    EMPTY = "empty"
    MALFORMED = "malformed"

    @property
    def words(self) -> str:
        """How a reply failing for this reason is told: `14 of 120 replies <words>`."""
        return _WORDS[self]

    @property
    def contracts(self) -> list[str]:
        """The canary contract that confirms it (a triage's `contracts`); [] (every contract)
        when this version of the canary has none of that name."""
        name = _CONTRACTS[self]
        return [name] if name in {c.value for c in Contract} else []


_WORDS = {
    Reason.START: "rejected for a stray start",
    Reason.SCHEMA: "rejected by the schema",
    Reason.TOOL_CALL: "rejected for a broken tool call",
    Reason.TRUNCATION: "cut short (finish length)",
    Reason.EMPTY: "empty",
    Reason.MALFORMED: "with a stream event that is not JSON",
}
_CONTRACTS = {
    Reason.START: "start",
    Reason.SCHEMA: "structured",
    Reason.TOOL_CALL: "tools",
    Reason.TRUNCATION: "start",  # the start contract judges empty and truncated replies (C9)
    Reason.EMPTY: "start",
    Reason.MALFORMED: "stream",  # C12: the stream's own honesty
}
REASONS: tuple[Reason, ...] = tuple(Reason)
_INDEX = {r: i for i, r in enumerate(REASONS)}

# acceptance rejections (routing/acceptance.py, the streaming start check) -> their reason
REJECTIONS: dict[str, Reason] = {
    "stray_start": Reason.START,
    "malformed_json": Reason.SCHEMA,
    "schema_invalid": Reason.SCHEMA,
    "missing_field": Reason.SCHEMA,
    "tool_markup_leak": Reason.TOOL_CALL,
    "unknown_tool": Reason.TOOL_CALL,
    "tool_args_malformed": Reason.TOOL_CALL,
    "tool_args_invalid": Reason.TOOL_CALL,
    "no_tool_call": Reason.TOOL_CALL,
    "finish_length": Reason.TRUNCATION,
    "output_too_short": Reason.EMPTY,
    "malformed_stream": Reason.MALFORMED,  # more `data:` events not JSON than are skipped
}


def passive_verdict(
    c: Classification | None, completion: Completion, *, client_shaped: bool, cancelled: bool
) -> str | None:
    """What one attempt says of its provider (see the module docstring)."""
    if cancelled or client_shaped:
        return None
    if c is not None:
        if c.client_params or c.failure_class is not FailureClass.INVALID_RESPONSE:
            return None
        reason = REJECTIONS.get(c.reason)
        return reason.value if reason is not None else None
    if completion.finish_reason == "length":
        return Reason.TRUNCATION.value
    content = completion.content
    if not completion.tool_calls and (not content or content.isspace()):
        return Reason.EMPTY.value
    if completion.malformed_events:  # accepted, a `data:` event not JSON skipped (R15)
        return Reason.MALFORMED.value
    return OK


@dataclass(frozen=True, slots=True)
class Figures:
    """One provider over the window: judged replies, failures by reason, first tokens."""

    replies: int
    failures: Mapping[Reason, int]
    ttft_p50_ms: float | None = None

    def rate(self, reason: Reason) -> Rate:
        return Rate(k=self.failures.get(reason, 0), n=self.replies)


@dataclass(frozen=True, slots=True)
class Suspicion:
    """A provider found an outlier for `reason` against its peers at `at`."""

    model: str
    provider: str  # as the replies name it
    reason: Reason
    host: Rate
    peers: Rate
    p_adjusted: float
    effect: float
    at: float

    def words(self) -> str:
        """`14 of 120 replies rejected for a stray start, peers 0 of 900`."""
        return (
            f"{self.host.k} of {self.host.n} replies {self.reason.words},"
            f" peers {self.peers.k} of {self.peers.n}"
        )


@dataclass(slots=True)
class _Bucket:
    index: int
    replies: int = 0
    failures: list[int] = field(default_factory=lambda: [0] * len(REASONS))
    ttft_ms: list[float] = field(default_factory=list)


class _Window:
    """One provider's buckets, oldest first."""

    __slots__ = ("buckets", "name")

    def __init__(self, name: str) -> None:
        self.name = name  # as the first reply named it
        self.buckets: deque[_Bucket] = deque()

    def add(self, index: int, reason: Reason | None, ttft_ms: float | None) -> None:
        if not self.buckets or self.buckets[-1].index != index:
            self.buckets.append(_Bucket(index))
            self.prune(index)
        bucket = self.buckets[-1]
        bucket.replies += 1
        if reason is not None:
            bucket.failures[_INDEX[reason]] += 1
        if ttft_ms is not None and len(bucket.ttft_ms) < TTFT_KEEP:
            bucket.ttft_ms.append(ttft_ms)

    def prune(self, index: int) -> None:
        while self.buckets and self.buckets[0].index <= index - BUCKETS:
            self.buckets.popleft()

    def figures(self, index: int) -> Figures:
        self.prune(index)
        failures = [0] * len(REASONS)
        ttfts: list[float] = []
        replies = 0
        for b in self.buckets:
            replies += b.replies
            ttfts += b.ttft_ms
            for i, k in enumerate(b.failures):
                failures[i] += k
        p50 = statistics.median(ttfts) if ttfts else None
        return Figures(replies, dict(zip(REASONS, failures, strict=True)), p50)


class PassiveBook:
    """The windows of every (model, provider) and the suspects; `config`: settings.passive,
    `probe`: settings.probe (the peer comparison's alpha and minimum effect), both whole."""

    def __init__(self, config: PassiveConfig | None = None, probe: ProbeConfig | None = None):
        self.config = config or PassiveConfig()
        self.probe = probe or ProbeConfig()
        self.bucket_s = self.config.window_s / BUCKETS
        self._windows: dict[str, dict[str, _Window]] = {}
        self._suspects: dict[tuple[str, str, Reason], Suspicion] = {}

    def _index(self, now: float) -> int:
        return int(now // self.bucket_s)

    def observe(
        self, model: str, provider: str, verdict: str, *, ttft_ms: float | None, now: float
    ) -> Suspicion | None:
        """Count one judged reply (`verdict`: "ok" or a Reason's value) of `provider`; the
        suspicion when this failure makes it an outlier for its reason."""
        windows = self._windows.setdefault(model, {})
        key = provider.strip().lower()
        window = windows.get(key)
        if window is None:
            if len(windows) >= MAX_PROVIDERS:
                return None
            window = windows[key] = _Window(provider)
        reason = None if verdict == OK else Reason(verdict)
        window.add(self._index(now), reason, ttft_ms)
        if reason is None or not self._above_bar(window.figures(self._index(now)), reason):
            return None
        return self._judge(model, key, reason, now)

    def _above_bar(self, figures: Figures, reason: Reason) -> bool:
        rate = figures.rate(reason)
        return rate.n >= self.config.min_requests and rate.share >= self.probe.peer_min_effect

    def _judge(self, model: str, key: str, reason: Reason, now: float) -> Suspicion | None:
        """The provider `key` against the pooled others of `model` for `reason`: its own test
        first (one Fisher test, a necessary condition of `outlier`), then the canary's whole
        comparison decides. A provider found suspect is judged again for that reason once a
        bucket later, not at every failure while its suspicion stands."""
        last = self._suspects.get((model, key, reason))
        if last is not None and now - last.at < self.bucket_s:
            return None
        index = self._index(now)
        totals = {k: w.figures(index) for k, w in self._windows[model].items()}
        if not self._may_be_outlier(totals, key, reason):
            return None
        observations = {
            k: Observation(rate=f.rate(reason), above_bar=self._above_bar(f, reason))
            for k, f in totals.items()
            if f.replies
        }
        verdicts, _ = compare_rates(
            reason.value,
            observations,
            alpha=self.probe.peer_alpha,
            min_effect=self.probe.peer_min_effect,
        )
        v = verdicts[key]
        if v.decision is not PeerDecision.OUTLIER:
            return None
        name = self._windows[model][key].name
        suspicion = Suspicion(model, name, reason, v.host, v.peers, v.p_adjusted, v.effect, now)
        self._suspects[(model, key, reason)] = suspicion
        return suspicion

    def _may_be_outlier(self, totals: Mapping[str, Figures], key: str, reason: Reason) -> bool:
        """The host's own corrected p and effect against its pooled peers, as in
        `compare_rates` (the peers' own tests, costlier, run only when this passes)."""
        host = totals[key].rate(reason)
        peers = sum((f.rate(reason) for k, f in totals.items() if k != key), Rate())
        m = sum(1 for f in totals.values() if f.replies)
        p = bonferroni(fisher_greater(host.k, host.n, peers.k, peers.n), m)
        return p <= self.probe.peer_alpha and host.share - peers.share >= self.probe.peer_min_effect

    def figures(self, model: str, now: float) -> dict[str, Figures]:
        """Each provider of `model` over the window, by the name its replies give."""
        index = self._index(now)
        return {w.name: w.figures(index) for w in self._windows.get(model, {}).values()}

    def suspects(self, model: str, now: float) -> dict[str, list[Suspicion]]:
        """The providers of `model` suspect now, each with its suspicions (one per reason)."""
        out: dict[str, list[Suspicion]] = {}
        for (m, _, _), s in sorted(self._suspects.items()):
            if m == model and now < s.at + self.config.window_s:
                out.setdefault(s.provider, []).append(s)
        return out

    def models(self) -> Iterable[str]:
        return sorted(self._windows)
