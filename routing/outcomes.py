"""Where an attempt's or a request's outcome goes (SPEC R9-R11, R13): the route's breaker and
health, its provider's, the metrics and the event ledger. A released stream is judged at its
END (`stream_finisher`): its final usage and cost replace the provisional attempt record
counted at release, and only then does the breaker / health hear the verdict.

Per (model, provider): when the reply names its provider, the verdict goes to that provider's
circuit and health (`routing.providers.provider_key`); a failure it answers for stays its own
while another provider every request of the route may use is not failing (its circuit not
open), the capacity floor's kept providers included, so the route's circuit opens only when
every allowed provider is failing (or without a listing, or on a route pinned to the one
provider). One bad provider never darkens the model while another can serve: each request
it fails goes on without it (routing/steer.py). A success counts for both. Each verdict is also production evidence on its
provider (SPEC O8, `routing/passive_watch.py`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from routing.accounting import RequestState, attempt_record, request_record
from routing.attempt import AttemptResult
from routing.breaker import BreakerBoard, CircuitStatus
from routing.classify import Classification, Rejection
from routing.errors import FailureClass
from routing.health import HealthBook
from routing.metrics import RouterMetrics
from routing.passive_watch import PassiveWatch
from routing.providers import provider_key
from routing.records import AttemptRecord, EventSink, RequestRecord
from routing.response import Completion
from routing.routes import Route


@dataclass(frozen=True, slots=True)
class StreamEnd:
    """How a released stream ended: accepted (`failure` None), failed with a class, or
    cancelled (the client went away: no verdict on the route). `continued`: the attempt
    failed and the request goes on, continued on another route (R15): no request record
    yet. `whole`: the whole reply of a continued stream (what the request's record hashes)."""

    failure: FailureClass | None = None
    reason: str = ""
    cancelled: bool = False
    client_params: tuple[str, ...] = ()  # see Classification.client_params
    continued: bool = False
    whole: Completion | None = None

    @classmethod
    def accepted(cls) -> StreamEnd:
        return cls()

    @classmethod
    def failed(
        cls, failure: FailureClass, reason: str, client_params: tuple[str, ...] = ()
    ) -> StreamEnd:
        return cls(failure, reason, client_params=client_params)

    @classmethod
    def client_gone(cls) -> StreamEnd:
        return cls(None, "client_disconnected", cancelled=True)


class Outcomes:
    def __init__(
        self,
        breakers: BreakerBoard,
        health: HealthBook,
        metrics: RouterMetrics,
        events: EventSink | None,
        clock: Callable[[], float],
        passive: PassiveWatch | None = None,
    ) -> None:
        self.breakers = breakers
        self.health = health
        self.metrics = metrics
        self.events = events
        self.clock = clock
        self.passive = passive

    def verdict(self, res: AttemptResult, scope: str, *, cancelled: bool = False) -> None:
        """Feed the attempt's outcome to the route's breaker (its circuits for `scope`, the
        workload) and health, and to its provider's (see the module docstring). A failure
        the client's own parameters may have caused (`Classification.client_params`,
        routing/attribution.py) is no verdict on the route. Every verdict is also production
        evidence on the provider that served it (routing/passive_watch.py)."""
        if self.passive is not None:
            self.passive.observe(res, cancelled=cancelled)
        route, c, now = res.route, res.classification, self.clock()
        served = res.served_by
        probes = [k for k in res.probes if not served or k != provider_key(route.id, served)]
        for key in probes:  # half-open provider circuits another provider answered for
            self.breakers.release(key, now, scope)
        if cancelled or (c is not None and c.client_params):
            self.breakers.release(route.id, now, scope)
            if served and provider_key(route.id, served) in res.probes:
                self.breakers.release(provider_key(route.id, served), now, scope)
            return
        cls = None if c is None else c.failure_class
        counts = c is None or (cls is not None and cls.counts_against_route)
        latency_s = res.ended - res.started
        if served:
            key = provider_key(route.id, served)
            self.breakers.record(key, cls, now, scope)
            if counts:
                self.health.update_key(key, route.latency_p50_ms, ok=c is None,
                                       latency_s=latency_s, now=now)  # fmt: skip
        if c is not None and served and self._others_serve(res, served, now, scope):
            self.breakers.release(route.id, now, scope)  # the provider answers, not the route
            return
        self.breakers.record(route.id, cls, now, scope)
        if counts:  # a client's error says nothing of the route
            self.health.update(route, ok=c is None, latency_s=latency_s, now=now)

    def _others_serve(self, res: AttemptResult, served: str, now: float, scope: str) -> bool:
        """Whether `served` is one of the providers every request of the route may use
        (`Allowance.providers`) and another of them is not failing: its circuit is not open."""
        name = served.strip().lower()
        names = [p for p in res.allowance.providers] if res.allowance is not None else []
        if name not in {p.lower() for p in names}:
            return False
        return any(
            p.lower() != name
            and self.breakers.status(provider_key(res.route.id, p), now, scope)
            is not CircuitStatus.OPEN
            for p in names
        )

    def attempt(self, req: RequestState, res: AttemptResult, **kw: Any) -> None:
        record = attempt_record(req, res, **kw)
        self._publish(record)

    def accepted(self, req: RequestState, res: AttemptResult, scope: str, **kw: Any) -> None:
        """An accepted answer's attempt: counted in the request now (its cost, the reply's
        `X-Attempts`), its verdict and event once the reply has left (`RequestState.later`):
        nothing the client is waiting for depends on them."""
        record = attempt_record(req, res, **kw)

        def publish() -> None:
            self.verdict(res, scope)  # sets `res.passive`: the record says it too
            self._publish(replace(record, passive=res.passive))

        req.later(publish)

    def _publish(self, record: AttemptRecord | RequestRecord) -> None:
        if isinstance(record, AttemptRecord):
            self.metrics.observe_attempt(record)
        else:
            self.metrics.observe_request(record)
        if self.events is not None:
            self.events.emit(record)

    def request(
        self,
        req: RequestState,
        outcome: str,
        reason: str | None,
        route: Route | None,
        comp: Completion | None,
    ) -> None:
        self._publish(request_record(req, outcome, reason, route, comp, now=self.clock()))

    def answered(self, req: RequestState, route: Route, comp: Completion) -> None:
        """`request` of an accepted answer, once its reply has left (`RequestState.later`);
        the request ends now, whenever its record is written."""
        now = self.clock()
        req.later(
            lambda: self._publish(request_record(req, "accepted", None, route, comp, now=now))
        )

    def stream_finisher(
        self, req: RequestState, res: AttemptResult, completion: Completion
    ) -> Callable[[StreamEnd], Awaitable[None]]:
        """`finish(end)` for the gateway to call once at the stream's end: the attempt's
        final usage and cost, its verdict for breaker and health, its event, then the
        request's (see `StreamEnd`)."""

        done = False

        async def finish(end: StreamEnd) -> None:
            nonlocal done
            if done:  # idempotent: the relay and the response's safety net may both call it
                return
            done = True
            provisional = req.attempts.pop()  # counted at release, replaced by the final record
            req.cost_usd -= provisional.cost_usd
            res.ended = self.clock()
            res.completion = completion
            if end.failure is not None:
                res.classification = Classification(
                    end.failure, end.reason, client_params=end.client_params
                )
                res.rejection = Rejection(end.reason)
            self.verdict(res, req.contract.workload, cancelled=end.cancelled)
            self.attempt(
                req, res, waited_s=provisional.waited_s, fallback_reason=provisional.fallback_reason,
                circuit=provisional.circuit_state, cancelled=end.cancelled,
            )  # fmt: skip
            if not end.continued:
                self._stream_request(req, res.route, completion, end)

        return finish

    def request_finisher(
        self, req: RequestState, route: Route, completion: Completion
    ) -> Callable[[StreamEnd], Awaitable[None]]:
        """`finish(end)` of a stream whose last attempt is recorded already (a continuation
        was sought, R15): only the request's record, once."""
        done = False

        async def finish(end: StreamEnd) -> None:
            nonlocal done
            if not done:
                done = True
                self._stream_request(req, route, completion, end)

        return finish

    def _stream_request(
        self, req: RequestState, route: Route, completion: Completion, end: StreamEnd
    ) -> None:
        outcome = "cancelled" if end.cancelled else (end.failure or "accepted")
        self.request(req, outcome, end.reason or None, route, end.whole or completion)
