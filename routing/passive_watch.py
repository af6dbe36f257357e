"""The gateway's production evidence (SPEC O8): the thin shell around the pure window
(`routing/passive.py`) and the pure ejection ladder (`routing/ejection.py`).

    watch = PassiveWatch(settings.passive, settings.probe, floor=settings.policy.floor,
                         listings=..., sink=..., metrics=..., announce=..., clock=...)
    watch.observe(res, cancelled=False)   every attempt's final verdict (routing/outcomes.py)
    watch.ejections.ejected(model, now)   what the steering adds to a request's
                                          provider.ignore (routing/steer.py)
    watch.kept(model, allowance, now)     a request found an ejection the floor does not
                                          allow any more: it ends, recorded as kept

An ejection is decided over the quarantine's list the attempt that gave the evidence was
sent with (`Allowance.fixed`), by the same function that decides every request's
provider.ignore (`routing.providers.allowance`): an ejection the capacity floor prevents is
recorded as *suspect, kept for capacity* (action `kept_for_capacity`), in the ledger, the
event (the alert: an admin is needed, as the quarantine's `blocked_by_floor`) and /metrics;
never as ejected.

On a suspicion: the ejection decision; a `SuspectRecord` to the ledger the gateway already
writes (every ejection; a held or observed suspicion at most once per `event_every_s` per
provider), which `canary status` and the next round read; the metrics; and the announcement
(the Prefect event `canary.gateway.provider.suspect`, `routing/suspect_events.py`), at most
once per `event_every_s` per provider, and only for a provider the listing names by its
endpoint tag (a triage needs one; the record says `held_unlisted` otherwise). Each attempt's
own verdict goes on its record
(`passive`), so the ledger holds the same figures as the window.

/metrics, besides the router's counters (routing/metrics.py), per (model, provider):

    canary_router_passive_replies_total{model,provider}            replies judged as evidence
    canary_router_passive_failures_total{model,provider,reason}    ... failing, by reason
    canary_router_provider_ejections_total{model,provider,reason}  local ejections
    canary_router_provider_suspect{model,provider}                 1 while suspect
    canary_router_provider_ejected{model,provider}                 1 while ejected
    canary_router_provider_ejected_seconds{model,provider}         seconds the ejection has left
    canary_router_provider_kept_for_capacity{model,provider}       1 while suspect and kept
                                                                   allowed by the floor
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterator
from datetime import timedelta

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ground.settings import PassiveConfig, ProbeConfig
from routing.attempt import AttemptResult
from routing.ejection import Ejection, EjectionBook, Held
from routing.listing import ListingBook
from routing.metrics import RouterMetrics
from routing.passive import PassiveBook, Suspicion, passive_verdict
from routing.providers import Allowance
from routing.records import EventSink, SuspectRecord, utcnow

Announce = Callable[[SuspectRecord, list[str]], None]  # the record, the reasons suspect now


def gateway_id() -> str:
    """Which gateway process decided: an ejection is that process's alone."""
    return f"{socket.gethostname()}:{os.getpid()}"


class PassiveWatch:
    def __init__(
        self,
        config: PassiveConfig,
        probe: ProbeConfig,
        *,
        floor: int,
        listings: ListingBook | None,
        sink: EventSink | None,
        metrics: RouterMetrics,
        announce: Announce | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`config`: settings.passive, `probe`: settings.probe, taken whole; `floor`:
        settings.policy.floor."""
        self.config = config
        self.book = PassiveBook(config, probe)
        self.ejections = EjectionBook(config, floor=floor)
        self.listings = listings
        self.sink = sink
        self.metrics = metrics
        self.announce = announce
        self.clock = clock
        self.gateway = gateway_id()
        self._told: dict[tuple[str, str, str], float] = {}  # (model, provider, what) -> when
        metrics.registry.register(PassiveGauges(self))

    def observe(self, res: AttemptResult, *, cancelled: bool) -> None:
        """The attempt's verdict as evidence on the provider that served it (set on `res`)."""
        served = res.served_by
        verdict = passive_verdict(
            res.classification,
            res.completion,
            client_shaped=bool(res.client_params),
            cancelled=cancelled,
        )
        res.passive = verdict if served else None
        if verdict is None or not served:
            return
        model, now = res.route.model, self.clock()
        self.metrics.observe_passive(model, served, verdict)
        ttft_ms = None if res.ttft_s is None else res.ttft_s * 1000
        suspicion = self.book.observe(model, served, verdict, ttft_ms=ttft_ms, now=now)
        if suspicion is not None:
            fixed = res.allowance.fixed if res.allowance is not None else ()
            self._suspected(suspicion, now, fixed)

    def kept(self, model: str, allowance: Allowance, now: float) -> None:
        """A request's allowance kept an ejected provider (the floor, over a quarantine list
        that grew since the ejection): the ejection ends, recorded as kept for capacity."""
        for layer, provider in allowance.kept:
            if layer != "ejected" or self.ejections.lift(model, provider, now) is None:
                continue
            suspicions = self.book.suspects(model, now).get(provider)
            if suspicions:
                self._tell(suspicions[0], Held.FLOOR, now)

    def _suspected(self, s: Suspicion, now: float, fixed: tuple[str, ...]) -> None:
        endpoints = self.listings.endpoints(s.model) if self.listings is not None else ()
        decision = self.ejections.decide(
            s.model, s.provider, s.reason.value, endpoints, now, fixed=fixed
        )
        if decision is Held.ALREADY:
            return
        self._tell(s, decision, now)

    def _tell(self, s: Suspicion, decision: Ejection | Held, now: float) -> None:
        """The decision's record to the ledger, its metrics and its announcement."""
        endpoints = self.listings.endpoints(s.model) if self.listings is not None else ()
        tags = sorted(
            e.tag for e in endpoints if e.provider_name.strip().lower() == s.provider.lower()
        )
        record = self._record(s, decision, tags, now)
        if isinstance(decision, Ejection):
            self.metrics.observe_ejection(s.model, s.provider, s.reason.value)
        if self.sink is not None and (
            isinstance(decision, Ejection) or self._due(s, decision.value, now)
        ):
            self.sink.emit(record)
        alert = "kept_alert" if decision is Held.FLOOR else "announced"  # its own alert
        if self.announce is not None and tags and self._due(s, alert, now):
            reasons = [x.reason.value for x in self.book.suspects(s.model, now).get(s.provider, [])]
            self.announce(record, reasons)

    def _due(self, s: Suspicion, what: str, now: float) -> bool:
        """At most once per `event_every_s` per (model, provider) for `what`."""
        key = (s.model, s.provider.lower(), what)
        last = self._told.get(key)
        if last is not None and now - last < self.config.event_every_s:
            return False
        self._told[key] = now
        return True

    def _record(
        self, s: Suspicion, decision: Ejection | Held, tags: list[str], now: float
    ) -> SuspectRecord:
        at = utcnow()
        times, until = None, None
        if isinstance(decision, Ejection):
            times, until = decision.times, at + timedelta(seconds=decision.until - now)
        return SuspectRecord(
            model=s.model, provider=s.provider, reason=s.reason.value,
            action="ejected" if until is not None else str(decision), host_k=s.host.k,
            host_n=s.host.n, peers_k=s.peers.k, peers_n=s.peers.n, p_adjusted=s.p_adjusted,
            provider_tag=",".join(tags) or None, times=times, until=until,
            evidence=s.words(), gateway=self.gateway, at=at,
        )  # fmt: skip


class PassiveGauges(Collector):
    """The suspect and ejected states per (model, provider), computed when scraped."""

    def __init__(self, watch: PassiveWatch) -> None:
        self.watch = watch

    def collect(self) -> Iterator[Metric]:
        w = self.watch
        now = w.clock()
        suspect = GaugeMetricFamily(
            "canary_router_provider_suspect",
            "1 while production traffic makes the provider an outlier against its peers (O8)",
            labels=["model", "provider"],
        )
        ejected = GaugeMetricFamily(
            "canary_router_provider_ejected",
            "1 while the gateway ejects the provider locally (O8)",
            labels=["model", "provider"],
        )
        left = GaugeMetricFamily(
            "canary_router_provider_ejected_seconds",
            "Seconds the provider's local ejection has left (0: not ejected)",
            labels=["model", "provider"],
        )
        kept = GaugeMetricFamily(
            "canary_router_provider_kept_for_capacity",
            "1 while the provider is suspect and the capacity floor keeps it allowed (O8, Q4)",
            labels=["model", "provider"],
        )
        for model in w.book.models():
            suspects = w.book.suspects(model, now)
            active = {e.provider.lower(): e for e in w.ejections.ejected(model, now)}
            floor_kept = w.ejections.kept(model)
            for name in sorted(w.book.figures(model, now)):
                labels = [model, w.metrics.provider_label(f"model:{model}", name)]
                e = active.get(name.lower())
                suspect.add_metric(labels, 1.0 if name in suspects else 0.0)
                ejected.add_metric(labels, 1.0 if e is not None else 0.0)
                left.add_metric(labels, max(0.0, e.until - now) if e is not None else 0.0)
                held = name in suspects and e is None and name.lower() in floor_kept
                kept.add_metric(labels, 1.0 if held else 0.0)
        yield suspect
        yield ejected
        yield left
        yield kept
