"""Prometheus metrics of the router (SPEC R11), on their own CollectorRegistry.

Counters (rates are ratios of counters, in PromQL or `snapshot()`):

    canary_router_requests_total{workload,outcome}          outcome: accepted | <failure class>
    canary_router_attempts_total{workload,route,result}     result: accepted | <failure class>
    canary_router_provider_attempts_total{workload,route,provider,result}
                                                            per (model, provider) where the
                                                            reply named it (R13); at most
                                                            MAX_PROVIDER_LABELS names per
                                                            route, the rest as "other"
    canary_router_fallbacks_total{workload}                 attempts on a route other than the first
    canary_router_http_success_total{workload,route}        attempts answered HTTP 200 ...
    canary_router_validation_rejections_total{workload,route,reason}   ... yet rejected by acceptance
    canary_router_ambiguous_total{workload}
    canary_router_deadline_exhausted_total{workload}
    canary_router_malformed_events_total{workload,route}   upstream `data:` events that were
                                                            not a JSON object, skipped (R15)
    canary_router_cost_usd_total{workload}                  all attempts
    canary_router_accepted_cost_usd_total{workload}         requests that were accepted
    canary_router_latency_seconds{workload,route}           histogram by final route
    canary_router_passive_replies_total{model,provider}     replies judged as production
                                                            evidence (O8), and those failing:
    canary_router_passive_failures_total{model,provider,reason}
    canary_router_provider_ejections_total{model,provider,reason}   local ejections (O8)

The suspect and ejected states per (model, provider) are gauges computed when scraped
(`routing.passive_watch.PassiveGauges`).

The provider.ignore lists the gateway routes with, per model, computed when scraped
(`IgnoreListGauges`, over `routing.exclusions.CachedIgnoreSource.status`; R14):

    canary_router_ignore_list_loaded{model}           1 once the model has a list (else its
                                                      requests are refused, 503)
    canary_router_ignore_list_age_seconds{model}      since the list in use was fetched (a
                                                      list kept from an earlier run included)
    canary_router_ignore_source_failing{model}        1 while the source's last answer for the
                                                      model was a failure (the last list is kept)
    canary_router_ignore_fetch_failures_total{model}  failed fetches

The warning pair of R11: `http_success` rising while `validation_rejections`
rises too means transport availability is masking contract failures;
`snapshot()` reports both rates side by side.

The R11 figures themselves, computed at each scrape (what `canary gateway report` prints,
here since this process started):

    canary_router_fallback_rate, canary_router_attempts_per_completed_request,
    canary_router_deadline_exhaustion_rate, canary_router_http_success_rate,
    canary_router_validation_rejection_rate, canary_router_cost_per_accepted_usd
    canary_router_window_http_success_rate{half}          the last `masking_window_s`,
    canary_router_window_validation_rejection_rate{half}  its earlier and later half
    canary_router_masking_warning                         1 while the warning holds
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ground.settings import RoutingConfig
from routing.ignore_lists import ListStatus
from routing.masking import MaskingWatch
from routing.records import AttemptRecord, RequestRecord

MAX_PROVIDER_LABELS = 64  # per route: a provider name comes from the upstream's reply


FIGURES = {
    "fallback_rate": "Share of requests that needed a fallback",
    "attempts_per_completed_request": "Attempts per accepted request",
    "deadline_exhaustion_rate": "Share of requests out of deadline",
    "http_success_rate": "Share of attempts answered HTTP 200",
    "validation_rejection_rate": "Share of HTTP-successful attempts rejected by acceptance",
    "cost_per_accepted_usd": "Cost of all attempts per accepted request",
}


class _Figures(Collector):
    """The R11 figures and the masking warning, computed when scraped."""

    def __init__(self, metrics: RouterMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        m = self.metrics
        snap = m.snapshot()
        for name, doc in FIGURES.items():
            yield GaugeMetricFamily(f"canary_router_{name}", doc, value=snap[name])
        now = m.clock()
        earlier, later = m.watch.halves(now)
        http = GaugeMetricFamily(
            "canary_router_window_http_success_rate",
            "HTTP success in each half of the window",
            labels=["half"],
        )
        rej = GaugeMetricFamily(
            "canary_router_window_validation_rejection_rate",
            "Validation rejection in each half of the window",
            labels=["half"],
        )
        for half, rates in (("earlier", earlier), ("later", later)):
            http.add_metric([half], rates.http_success)
            rej.add_metric([half], rates.rejection)
        yield http
        yield rej
        yield GaugeMetricFamily(
            "canary_router_masking_warning",
            "1 while HTTP success holds or rises and validation rejection rises (R11)",
            value=1.0 if m.watch.warning(now) is not None else 0.0,
        )


class IgnoreListGauges(Collector):
    """The provider.ignore lists' standing per model (see the module docstring); `status`
    gives the wall-clock now and each model's `ListStatus`."""

    def __init__(self, status: Callable[[], tuple[datetime, list[ListStatus]]]) -> None:
        self.status = status

    def collect(self) -> Iterator[Metric]:
        now, statuses = self.status()
        loaded = GaugeMetricFamily(
            "canary_router_ignore_list_loaded", "1 once the model has a provider.ignore list",
            labels=["model"],
        )  # fmt: skip
        age = GaugeMetricFamily(
            "canary_router_ignore_list_age_seconds",
            "Seconds since the provider.ignore list in use was fetched", labels=["model"],
        )  # fmt: skip
        failing = GaugeMetricFamily(
            "canary_router_ignore_source_failing",
            "1 while the ignore source's last answer for the model was a failure",
            labels=["model"],
        )  # fmt: skip
        failures = CounterMetricFamily(
            "canary_router_ignore_fetch_failures", "Failed provider.ignore fetches",
            labels=["model"],
        )  # fmt: skip
        for st in statuses:
            loaded.add_metric([st.model], 0.0 if st.known is None else 1.0)
            seconds = st.age_s(now)
            if seconds is not None:
                age.add_metric([st.model], seconds)
            failing.add_metric([st.model], 1.0 if st.failing else 0.0)
            failures.add_metric([st.model], float(st.failures))
        yield from (loaded, age, failing, failures)


class RouterMetrics:
    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        config: RoutingConfig | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`config`: settings.routing (the masking warning's window and thresholds)."""
        self.registry = registry or CollectorRegistry()
        self.clock = clock
        self.watch = MaskingWatch(config)
        r = self.registry
        self.requests = Counter(
            "canary_router_requests",
            "Requests by final outcome",
            ["workload", "outcome"],
            registry=r,
        )
        self.attempts = Counter(
            "canary_router_attempts",
            "Attempts by result",
            ["workload", "route", "result"],
            registry=r,
        )
        self.fallbacks = Counter(
            "canary_router_fallbacks", "Attempts on a fallback route", ["workload"], registry=r
        )
        self.http_success = Counter(
            "canary_router_http_success",
            "Attempts answered HTTP 200",
            ["workload", "route"],
            registry=r,
        )
        self.rejections = Counter(
            "canary_router_validation_rejections", "HTTP-successful attempts rejected by acceptance",
            ["workload", "route", "reason"], registry=r,
        )  # fmt: skip
        self.ambiguous = Counter(
            "canary_router_ambiguous", "Ambiguous completions", ["workload"], registry=r
        )
        self.deadline = Counter(
            "canary_router_deadline_exhausted", "Requests out of deadline", ["workload"], registry=r
        )
        self.cost = Counter(
            "canary_router_cost_usd", "Estimated cost of all attempts", ["workload"], registry=r
        )
        self.accepted_cost = Counter(
            "canary_router_accepted_cost_usd", "Cost of accepted requests", ["workload"], registry=r
        )
        self.provider_attempts = Counter(
            "canary_router_provider_attempts", "Attempts by the provider that served them",
            ["workload", "route", "provider", "result"], registry=r,
        )  # fmt: skip
        self._provider_labels: dict[str, set[str]] = {}
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        self._passive_counters(r)
        self.latency = Histogram(
            "canary_router_latency_seconds", "Request latency by final route", ["workload", "route"],
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64), registry=r,
        )  # fmt: skip
        r.register(_Figures(self))

    def observe_attempt(self, ev: AttemptRecord) -> None:
        result = (
            "cancelled"
            if ev.cancelled
            else "accepted"
            if ev.failure_class is None
            else ev.failure_class
        )
        self._child(self.attempts, ev.workload, ev.route_id, result).inc()
        if ev.provider:
            provider = self.provider_label(ev.route_id, ev.provider)
            self._child(self.provider_attempts, ev.workload, ev.route_id, provider, result).inc()
        if ev.fallback_reason:
            self._child(self.fallbacks, ev.workload).inc()
        rejected = ev.validation not in (None, "accepted")
        if ev.http_success:
            self._child(self.http_success, ev.workload, ev.route_id).inc()
            if rejected:
                self._child(self.rejections, ev.workload, ev.route_id, str(ev.validation)).inc()
        if not ev.cancelled:
            self.watch.observe(http_ok=ev.http_success, rejected=rejected, now=self.clock())
        if ev.failure_class == "ambiguous_completion":
            self._child(self.ambiguous, ev.workload).inc()
        if ev.malformed_events:
            self._child(self.malformed, ev.workload, ev.route_id).inc(ev.malformed_events)
        self._child(self.cost, ev.workload).inc(max(0.0, ev.cost_usd))

    def _passive_counters(self, r: CollectorRegistry) -> None:
        """Production evidence per (model, provider) (O8, routing/passive_watch.py), and the
        upstream `data:` events that were not JSON, skipped (R15)."""
        self.malformed = Counter(
            "canary_router_malformed_events", "Upstream SSE data events not a JSON object, skipped",
            ["workload", "route"], registry=r,
        )  # fmt: skip
        self.passive_replies = Counter(
            "canary_router_passive_replies", "Replies judged as production evidence, by provider",
            ["model", "provider"], registry=r,
        )  # fmt: skip
        self.passive_failures = Counter(
            "canary_router_passive_failures", "Production replies failing acceptance, by reason",
            ["model", "provider", "reason"], registry=r,
        )  # fmt: skip
        self.ejections = Counter(
            "canary_router_provider_ejections", "Local ejections of a suspect provider (O8)",
            ["model", "provider", "reason"], registry=r,
        )  # fmt: skip

    def observe_passive(self, model: str, provider: str, verdict: str) -> None:
        """One reply judged as production evidence: "ok" or its failure reason."""
        label = self.provider_label(f"model:{model}", provider)
        self._child(self.passive_replies, model, label).inc()
        if verdict != "ok":
            self._child(self.passive_failures, model, label, verdict).inc()

    def observe_ejection(self, model: str, provider: str, reason: str) -> None:
        self._child(
            self.ejections, model, self.provider_label(f"model:{model}", provider), reason
        ).inc()

    def _child(self, metric: Any, *values: str) -> Any:
        """`metric.labels(*values)`, each child looked up once (prometheus_client's `labels`
        validates and locks on every call: several microseconds a request)."""
        key = (id(metric), values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def provider_label(self, scope: str, provider: str) -> str:
        """A provider name as a label value: at most MAX_PROVIDER_LABELS per `scope` (a
        route id, or `model:<id>`), the rest as "other"."""
        seen = self._provider_labels.setdefault(scope, set())
        if provider in seen or len(seen) < MAX_PROVIDER_LABELS:
            seen.add(provider)
            return provider
        return "other"

    def observe_request(self, ev: RequestRecord) -> None:
        self._child(self.requests, ev.workload, ev.outcome).inc()
        if ev.outcome == "deadline_exhausted":
            self._child(self.deadline, ev.workload).inc()
        if ev.outcome == "accepted":
            self._child(self.accepted_cost, ev.workload).inc(max(0.0, ev.cost_usd))
        self._child(self.latency, ev.workload, ev.final_route or "none").observe(
            ev.latency_ms / 1000.0
        )

    def _sum(self, counter: Counter, **match: str) -> float:
        """A counter's total over the label values matching `match`."""
        total = 0.0
        for metric in counter.collect():
            for sample in metric.samples:
                if not sample.name.endswith("_total"):
                    continue
                if all(sample.labels.get(k) == v for k, v in match.items()):
                    total += sample.value
        return total

    def snapshot(self) -> dict[str, float]:
        """The R11 rates from the counters (0 when there is no traffic yet)."""
        requests = self._sum(self.requests)
        accepted = self._sum(self.requests, outcome="accepted")
        attempts = self._sum(self.attempts)
        http_ok = self._sum(self.http_success)

        def ratio(a: float, b: float) -> float:
            return a / b if b else 0.0

        return {
            "requests": requests,
            "accepted": accepted,
            "fallback_rate": ratio(self._sum(self.fallbacks), requests),
            "attempts_per_completed_request": ratio(attempts, accepted),
            "deadline_exhaustion_rate": ratio(self._sum(self.deadline), requests),
            "http_success_rate": ratio(http_ok, attempts),
            "validation_rejection_rate": ratio(self._sum(self.rejections), http_ok),
            "ambiguous": self._sum(self.ambiguous),
            "cost_per_accepted_usd": ratio(self._sum(self.cost), accepted),
        }

    def render(self) -> bytes:
        return generate_latest(self.registry)
