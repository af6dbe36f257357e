"""The router's attempt loop: one retry owner, one attempt budget, one deadline (SPEC R3-R6).

    arrival ─► Deadline(at) ─► filter + rank routes ─► ┌ attempt ─► accepted ─► done
                                                       │   │ failure: classify
                                                       │   ├ permanent ─────────────► explicit error
                                                       │   ├ incompatible ─► only a compatible route
                                                       │   ├ transient, early ─► same route once, after
                                                       │   │   full-jitter backoff
                                                       │   ├ capacity + Retry-After that fits ─► wait,
                                                       │   │   same route (once per route); does not
                                                       │   │   fit, or asked again ─► fallback
                                                       │   ├ the reply's provider answers for it and the
                                                       │   │   route may use another (listing, its pin) ─►
                                                       │   │   same route without that provider (once)
                                                       │   ├ capacity / transient / invalid / slow first
                                                       │   │   token ─► fallback
                                                       │   └ ambiguous ─► workload policy (replay =
                                                       │       fallback; fail / reconcile = explicit)
                                                       └ no attempt starts unless the deadline leaves
                                                         connect + generation + validation allowances

Default budget: `contract.max_attempts` (3 = primary + one fallback + one
same-route retry for an early connection failure). Nothing below retries. Each attempt's
timeouts are cut so one fallback still fits (R13, `routing/planner.py`, `routing/budget.py`):
a total and a first-token budget from the latency the gateway measured of the route's
providers (`routing/latency.py`), the listing's as the prior (`routing/listing.py`).
The router takes `settings.routing` (`RoutingConfig`: backoff, same-route retries, the
connect bound) and `settings.allowances` whole. `sleep`, `clock` and `rand` are injected:
tests pass a recording sleep so they never wait for backoff, while deadline tests keep the
real clock. Its records go to an `EventSink` (`routing/records.py`; the ledger's is
`routing.events.EventLog`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from ground.settings import Allowances, PassiveConfig, PolicyConfig, ProbeConfig, RoutingConfig
from routing.acceptance import Accepted
from routing.accounting import RequestState, attempt_record
from routing.attempt import (
    AttemptResult,
    refused_keys,
    run_attempt,
    run_continuation,
    upstream_body,
)
from routing.attribution import client_shaping
from routing.breaker import BreakerBoard, CircuitStatus
from routing.capability import Needs, contract_misfit, estimate_needs, select_routes
from routing.classify import Classification, provider_said
from routing.continuation import (
    continuation_reason,
    prefill_routes,
    prefilled,
    refused_prefill,
    why_not,
)
from routing.contracts import Contract
from routing.deadline import AttemptBudget, Deadline
from routing.errors import (
    ERROR_FOR_CLASS,
    CircuitOpenError,
    DeadlineExhaustedError,
    NoCompatibleRouteError,
    PermanentRequestError,
    RoutingError,
)
from routing.exclusions import CachedIgnoreSource, IgnoreSource
from routing.health import HealthBook
from routing.hedge import hedged
from routing.latency import LatencyBook
from routing.listing import ListingBook
from routing.metrics import IgnoreListGauges, RouterMetrics
from routing.moves import FallBack, LoopBudget, RetrySame, Stop, SwitchProvider, next_move
from routing.outcomes import Outcomes, StreamEnd
from routing.params import parameter_problem
from routing.passive_watch import Announce, PassiveWatch
from routing.planner import Planner
from routing.records import AttemptRecord, EventSink
from routing.response import Completion
from routing.routes import Catalog, Route
from routing.steer import Steering
from routing.upstream import Upstream, UpstreamCall

log = logging.getLogger(__name__)

__all__ = ["Router", "RouterResult", "new_operation_id", "new_request_id"]


@dataclass
class RouterResult:
    operation_id: str
    route: Route
    completion: Completion
    accepted: Accepted | None
    attempts: list[AttemptRecord]
    head: str = ""  # streaming: the start the check released (its first word, or its window)
    rest: AsyncIterator[str] | None = None  # streaming: the remaining content pieces
    finish: Callable[[StreamEnd], Awaitable[None]] | None = None  # streaming: record the end
    call: UpstreamCall | None = None  # streaming: the open upstream call
    attempt: AttemptResult | None = None  # streaming: the released attempt, judged at the end

    async def close(self) -> None:
        if self.call is not None:
            await self.call.aclose()

    async def close_rest(self) -> None:
        """Close the rest of the stream and its upstream call (a failed one's: whatever is
        left of it is not read)."""
        rest, self.rest = self.rest, None
        if rest is not None and hasattr(rest, "aclose"):
            with contextlib.suppress(Exception):
                await rest.aclose()
        with contextlib.suppress(Exception):
            await self.close()


@dataclass
class _Loop:
    """What the attempt loop carries from one attempt to the next."""

    pool: list[Route]  # the routes of the contract's groups
    needs: Needs  # what a route must offer (a context overflow raises min_context)
    budget: LoopBudget
    excluded: set[str] = field(default_factory=set)  # routes left behind
    last: tuple[Classification, AttemptResult] | None = None  # the last failure
    retry_route: Route | None = None  # a RetrySame: this route again, after wait_s
    wait_s: float = 0.0
    fallback_reason: str | None = None  # why the next attempt is not the first choice
    switching: bool = False  # the next attempt is the same route without a provider


def new_operation_id() -> str:
    return f"op-{secrets.token_hex(16)}"  # 128 random bits, as a uuid4's hex (a third the cost)


def new_request_id() -> str:
    """The gateway's id of one HTTP request (`X-Request-Id`), unlike the operation id never
    chosen by the client, so `canary served --request ID` finds exactly one request."""
    return f"req-{secrets.token_hex(16)}"


class Router:
    def __init__(
        self,
        catalog: Catalog,
        upstream: Upstream,
        *,
        ignore_source: IgnoreSource,
        breakers: BreakerBoard | None = None,
        events: EventSink | None = None,
        metrics: RouterMetrics | None = None,
        config: RoutingConfig | None = None,
        allowances: Allowances | None = None,
        listings: ListingBook | None = None,
        floor: int | None = None,
        passive: PassiveConfig | None = None,
        probe: ProbeConfig | None = None,
        announce: Announce | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        rand: Callable[[], float] = random.random,
    ) -> None:
        """`passive` (settings.passive) and `probe` (settings.probe: the peer comparison) set
        the production evidence (O8, routing/passive_watch.py); `announce` tells a suspect
        provider (the Prefect event, routing/suspect_events.py)."""
        self.catalog = catalog
        self.upstream = upstream
        self.ignore_source = ignore_source
        self.breakers = breakers or BreakerBoard()
        self.events = events
        self.config = config or RoutingConfig()
        # route id -> until when (this clock): its upstream refused a continuation's prefill
        self._prefill_refused: dict[str, float] = {}
        self.metrics = metrics or RouterMetrics(config=self.config, clock=clock)
        if isinstance(ignore_source, CachedIgnoreSource):  # the lists' standing (R14)
            self.metrics.registry.register(IgnoreListGauges(ignore_source.scrape))
        self.allowances = allowances or Allowances()
        self.clock = clock
        self.sleep = sleep
        self.rand = rand
        self.health = HealthBook()
        # `floor`: the quarantine's capacity floor (settings.policy.floor) for exclusions
        floor = PolicyConfig().floor if floor is None else floor
        self.listings = listings
        self.passive = PassiveWatch(
            passive or PassiveConfig(), probe or ProbeConfig(), floor=floor, listings=listings,
            sink=events, metrics=self.metrics, announce=announce, clock=clock,
        )  # fmt: skip
        self.outcomes = Outcomes(
            self.breakers, self.health, self.metrics, events, clock, self.passive
        )
        self.steering = Steering(self.breakers, listings, floor, self.passive.ejections)
        self.latency = LatencyBook(self.config)
        self.planner = Planner(
            self.breakers, self.health, self.steering, self.latency, self.config, self.allowances
        )

    # ---- public ---------------------------------------------------------------------------

    async def complete(
        self, body: dict[str, Any], *, workload: str = "chat", operation_id: str | None = None
    ) -> RouterResult:
        """Route a non-streaming request; return an accepted answer or raise a RoutingError."""
        return await self.run(self.admit(body, workload, operation_id, stream=False))

    async def stream(
        self, body: dict[str, Any], *, workload: str = "chat", operation_id: str | None = None
    ) -> RouterResult:
        """Route a streaming request; the result's `head` passed the start check, `rest` follows."""
        return await self.run(self.admit(body, workload, operation_id, stream=True))

    def admit(
        self,
        body: dict[str, Any],
        workload: str,
        operation_id: str | None,
        *,
        stream: bool,
        request_id: str | None = None,
        after_reply: bool = False,
    ) -> RequestState:
        """Resolve the request once: its contract, its absolute deadline (recorded now, on
        arrival) and its operation id; a request the contract cannot take is refused here.
        `stream` is honoured only for a streaming contract (otherwise the answer is complete
        and accepted before a client sees it, and a gateway relays it as one chunk).
        `after_reply`: an accepted answer's verdict, metrics and events wait in the request
        until the caller has sent the reply and calls `req.run_after_reply()` (a failure's
        are published before `run` raises)."""
        operation_id = operation_id or new_operation_id()
        now = self.clock()
        try:
            contract = self.catalog.contract(workload)
        except KeyError:
            raise PermanentRequestError(
                f"unknown workload {workload!r}; known: {sorted(self.catalog.contracts)}",
                operation_id=operation_id, reason="unknown_workload",
            ) from None  # fmt: skip
        problem = parameter_problem(body)  # types and ranges, at the door (routing/params.py)
        if problem is not None:
            raise PermanentRequestError(
                problem[1], operation_id=operation_id, reason="invalid_parameter", param=problem[0]
            )
        refused = refused_keys(body)
        if refused:
            raise PermanentRequestError(
                f"{', '.join(refused)} is set by the workload's contract ({workload!r}), not by"
                " the client; remove it from the request",
                operation_id=operation_id,
                reason="contract_owned_parameter",
            )
        deadline = Deadline.starting(now, contract.deadline_ms, self.allowances)
        return RequestState(
            operation_id, contract, body, now, deadline, stream and contract.streaming,
            request_id=request_id or new_request_id(), after_reply=[] if after_reply else None,
        )  # fmt: skip

    async def continue_stream(
        self, req: RequestState, result: RouterResult, sent: str, end: StreamEnd
    ) -> bool:
        """A released stream that failed with `end` after its client got `sent` (R15): when
        the workload and the failure allow a continuation (`routing.continuation.why_not`),
        its attempt is closed and recorded, and the routes that take a prefill are tried in
        turn (each refusal recorded, never shown): True with `result` now relaying the
        continuation (`route`, `head`, `rest`, `call`, `finish`); False when none took it
        (the caller ends the stream with `end`, the original cause, as its in-band error)."""
        if why_not(req.contract, end.failure, end.reason, sent, result.completion) is not None:
            return False
        await result.close_rest()
        if result.finish is not None:
            await result.finish(replace(end, continued=True))
        route, comp = result.route, result.completion
        result.rest, result.finish = None, self.outcomes.request_finisher(req, route, comp)
        needs = estimate_needs(req.contract, prefilled(req.body, sent))
        now = self.clock()
        refused = {r for r, until in self._prefill_refused.items() if until > now}
        pool = prefill_routes(self.catalog.routes.for_groups(req.contract.route_groups), refused)
        cause = continuation_reason(end.reason)
        while len(req.attempts) < req.contract.max_attempts:
            now = self.clock()
            tried = {a.route_id for a in req.attempts}
            if not req.deadline.may_start(now):
                return False
            try:
                route = self._choose(pool, tried, req.contract, needs, req, None, now)
            except RoutingError:
                return False
            res = await self._attempt(req, route, waited_s=0.0, fallback_reason=cause, prefill=sent)
            self._note_refusal(route, res.classification)
            if res.classification is None:
                result.route, result.completion, result.accepted = route, res.completion, None
                result.head, result.rest, result.call, result.attempt = (
                    res.head, res.rest, res.call, res,
                )  # fmt: skip
                result.finish = self.outcomes.stream_finisher(req, res, res.completion)
                return True
        return False

    def _note_refusal(self, route: Route, c: Classification | None) -> None:
        """A continuation attempt on `route` refused its prefill (`refused_prefill`): the
        route is not asked to continue a stream again for `prefill_refusal_s`, and the
        operator is told once per refusal (its routes.yaml says it takes a prefill)."""
        if c is None or not refused_prefill(c.failure_class):
            return
        self._prefill_refused[route.id] = self.clock() + self.config.prefill_refusal_s
        log.warning(
            "route %s refused a continuation's prefill (%s): not asked to continue a stream"
            " for %.0f s; check its `prefill: true` in routes.yaml",
            route.id, c.reason, self.config.prefill_refusal_s,
        )  # fmt: skip

    # ---- the loop -------------------------------------------------------------------------

    async def run(self, req: RequestState) -> RouterResult:
        """Route an admitted request (see `admit`)."""
        try:
            result = await self._loop(req)
        except RoutingError as exc:
            exc.operation_id = req.operation_id
            exc.attempts = len(req.attempts)
            exc.attempt_events = list(req.attempts)
            self.outcomes.request(
                req, exc.failure_class.value, exc.reason or exc.message[:120], None, None
            )
            raise
        if result.rest is None:
            self.outcomes.answered(req, result.route, result.completion)
        else:
            assert result.attempt is not None
            result.finish = self.outcomes.stream_finisher(req, result.attempt, result.completion)
        return result

    async def _loop(self, req: RequestState) -> RouterResult:
        """Perform moves: choose a route, attempt it, and let `next_move` decide what a
        failure means (stop, retry the same route after a wait, or fall back)."""
        loop = self._begin(req)
        while True:
            route, waited_s = await self._next_route(req, loop)
            res = await self._try_route(req, route, waited_s, loop)
            c = res.classification
            if c is None:
                return RouterResult(
                    req.operation_id,
                    res.route,  # with hedging, the route that answered
                    res.completion,
                    res.accepted,
                    req.attempts,
                    res.head,
                    res.rest,
                    call=res.call,
                    attempt=res,
                )
            loop.last = (c, res)
            self._perform(req, res, c, loop)

    def _begin(self, req: RequestState) -> _Loop:
        """The loop's state before the first attempt; a request no route of its contract
        could take (its estimated needs) is refused here."""
        contract = req.contract
        needs = estimate_needs(contract, req.body)
        misfit = contract_misfit(contract, needs)
        if misfit is not None:
            raise PermanentRequestError(misfit, reason=misfit.split(":", 1)[0])
        pool = self.catalog.routes.for_groups(contract.route_groups)
        return _Loop(pool=pool, needs=needs, budget=LoopBudget.start(self.config))

    async def _next_route(self, req: RequestState, loop: _Loop) -> tuple[Route, float]:
        """The route of the next attempt, admitted by its breaker, and the wait slept
        before it (a same-route retry's backoff or Retry-After): raises when the attempt
        budget is spent, no attempt fits the deadline, or no route is left."""
        contract, scope = req.contract, req.contract.workload  # circuits: (route, workload)
        if len(req.attempts) >= contract.max_attempts:
            raise self._exhausted(loop.last, f"attempt budget of {contract.max_attempts} spent")
        now = self.clock()
        # check the deadline before any breaker admission, so no probe slot is taken
        # for an attempt that cannot start
        self._check_deadline(req, now, 0.0, loop.last)
        route, wait_s = loop.retry_route, loop.wait_s
        loop.retry_route, loop.wait_s = None, 0.0
        if route is not None and not self.breakers.admit(route.id, now, scope):
            loop.excluded.add(route.id)  # its circuit opened meanwhile: no same-route retry
            route, wait_s = None, 0.0
        if route is None:
            route = self._choose(
                loop.pool, loop.excluded, contract, loop.needs, req, loop.last, now
            )
        # the route is admitted (maybe holding a half-open probe slot): every way out
        # before the attempt's own verdict gives the slot back
        try:
            self._check_deadline(req, now, wait_s, loop.last)
            if wait_s > 0:
                await self.sleep(wait_s)
        except BaseException:
            self.breakers.release(route.id, self.clock(), scope)
            raise
        return route, wait_s

    async def _try_route(
        self, req: RequestState, route: Route, waited_s: float, loop: _Loop
    ) -> AttemptResult:
        """One attempt on `route` (hedged when the workload asks for it)."""
        if self._hedging(req):
            res, tried = await self._hedged(req, route, loop.pool, loop.excluded, loop.needs)
            loop.excluded.update(tried)
            return res
        same_route = bool(req.attempts) and req.attempts[-1].route_id == route.id
        reason = None if same_route and not loop.switching else loop.fallback_reason
        loop.switching = False
        return await self._attempt(req, route, waited_s=waited_s, fallback_reason=reason, loop=loop)

    def _perform(
        self, req: RequestState, res: AttemptResult, c: Classification, loop: _Loop
    ) -> None:
        """Ask `next_move` what the failed attempt means and perform it: raise a `Stop`'s
        error, keep the route for a `RetrySame` or a `SwitchProvider` (the provider that
        served it excluded for the request's following attempts), leave it behind for a
        `FallBack`."""
        excluded = False
        if res.excludable and c.failure_class.counts_against_route and not c.client_params:
            req.excluded.setdefault(res.route.model, set()).update(res.excludable)
            excluded = True
        move, loop.budget = next_move(
            c,
            route=res.route,
            contract=req.contract,
            budget=loop.budget,
            deadline=req.deadline,
            now=self.clock(),
            jitter=self.rand(),
            config=self.config,
            status_code=res.status_code,
            provider_excluded=excluded,
        )
        match move:
            case Stop(error=error):
                raise error
            case RetrySame(wait_s=delay, reason=why):
                loop.retry_route, loop.wait_s, loop.fallback_reason = res.route, delay, why
            case SwitchProvider(reason=why):
                loop.retry_route, loop.wait_s, loop.fallback_reason = res.route, 0.0, why
                loop.switching = True
            case FallBack(reason=why, min_context=min_context):
                loop.fallback_reason = why
                if min_context is not None:
                    loop.needs = replace(
                        loop.needs, min_context=max(loop.needs.min_context, min_context)
                    )
                loop.excluded.add(res.route.id)

    def _check_deadline(
        self,
        req: RequestState,
        now: float,
        wait_s: float,
        last: tuple[Classification, AttemptResult] | None,
    ) -> None:
        if req.deadline.may_start(now, wait_s=wait_s):
            return
        raise DeadlineExhaustedError(
            f"{req.deadline.remaining(now) * 1000:.0f} ms left"
            + (f" (after a {wait_s:.2f} s wait)" if wait_s else "")
            + f"; an attempt needs {req.deadline.needed_s * 1000:.0f} ms"
            + (f"; last failure: {last[0].failure_class.value} ({last[0].reason})" if last else ""),
            reason="no_time_for_attempt",
        )

    def _hedging(self, req: RequestState) -> bool:
        c = req.contract
        return (
            c.hedge_after_ms is not None and c.latency_critical and c.side_effect_free
            and not req.stream and not req.attempts and c.max_attempts >= 2
        )  # fmt: skip

    async def _hedged(
        self, req: RequestState, primary: Route, pool: list[Route], excluded: set[str], needs: Needs
    ) -> tuple[AttemptResult, list[str]]:
        """The primary, plus the next compatible route if the primary is still running after
        `hedge_after_ms`; the first accepted answer wins (routing.hedge)."""
        assert req.contract.hedge_after_ms is not None
        tried = [primary.id]

        def backup() -> Coroutine[Any, Any, AttemptResult] | None:
            now = self.clock()
            if not req.deadline.may_start(now):
                return None
            try:
                route = self._choose(
                    pool, excluded | {primary.id}, req.contract, needs, req, None, now
                )
            except RoutingError:
                return None
            tried.append(route.id)
            return self._attempt(req, route, waited_s=0.0, fallback_reason="hedge", hedged=True)

        result, _ = await hedged(
            self._attempt(req, primary, waited_s=0.0, fallback_reason=None),
            after_s=req.contract.hedge_after_ms / 1000,
            backup=backup,
            won=lambda r: r.classification is None,
        )
        return result, tried if len(tried) > 1 else []

    def _choose(
        self, pool: list[Route], excluded: set[str], contract: Contract, needs: Needs, req: RequestState,
        last: tuple[Classification, AttemptResult] | None, now: float,
    ) -> Route:  # fmt: skip
        available = [r for r in pool if r.id not in excluded]
        scope = contract.workload
        open_ids = frozenset(
            r.id for r in available if self.breakers.status(r.id, now, scope) is CircuitStatus.OPEN
        )
        sel = select_routes(
            available, contract, needs, remaining_cost_usd=contract.max_cost_usd - req.cost_usd,
            suppressed=open_ids, health=self.health.at(now),
        )  # fmt: skip
        # a half-open circuit is probed by the next request that can use the route (bounded by
        # the breaker's probe slots); that request keeps its fallback if the probe fails
        probing = [
            r
            for r in sel.ranked
            if self.breakers.status(r.id, now, scope) is CircuitStatus.HALF_OPEN
        ]
        for route in probing + [r for r in sel.ranked if r not in probing]:
            if self.breakers.admit(route.id, now, scope):
                return route
        if last is not None:
            raise self._exhausted(last, "no further compatible route")
        if sel.ranked or (
            open_ids and all(why in ("circuit_open",) for why in sel.dropped.values())
        ):
            raise CircuitOpenError(
                f"every compatible route is suppressed by an open circuit: {sorted(open_ids)}",
                reason="all_circuits_open",
            )
        raise NoCompatibleRouteError(
            "no route satisfies the contract: "
            + ", ".join(f"{k}={v}" for k, v in sorted(sel.dropped.items())),
            reason="no_compatible_route",
        )

    def _exhausted(
        self, last: tuple[Classification, AttemptResult] | None, why: str
    ) -> RoutingError:
        if last is None:
            return NoCompatibleRouteError(why, reason="no_compatible_route")
        c, res = last
        cls = ERROR_FOR_CLASS[c.failure_class]
        return cls(
            f"{why}; last failure on {res.route.id}: {c.failure_class.value} ({c.reason})"
            + provider_said(c),
            status_code=res.status_code,
            reason=c.reason,
        )

    # ---- one attempt + its event ------------------------------------------------------------

    async def _attempt(
        self, req: RequestState, route: Route, *, waited_s: float, fallback_reason: str | None,
        hedged: bool = False, loop: _Loop | None = None, prefill: str | None = None,
    ) -> AttemptResult:  # fmt: skip
        """One attempt on `route` within its plan (`routing/planner.py`), then its verdict and
        event; `loop` (None for a hedged attempt) says which fallbacks are left to keep time for.
        `prefill`: a continuation of a released stream after this text (R15, `run_continuation`)."""
        scope = req.contract.workload  # the circuits this attempt answers to
        body, res, timeouts = await self._planned(req, route, loop)
        circuit = self.breakers.status(route.id, res.started, scope)
        try:
            if prefill is not None:
                await run_continuation(
                    self.upstream, prefilled(body, prefill), timeouts, prefill, result=res,
                    clock=self.clock,
                )  # fmt: skip
            else:
                await run_attempt(
                    self.upstream, body, route, req.contract, self.catalog.schemas, timeouts,
                    stream_release=req.stream, clock=self.clock, result=res,
                    client_params=client_shaping(req.body),
                )  # fmt: skip
        except BaseException as exc:  # no verdict on the route: give the admission back
            now = self.clock()
            self.breakers.release(route.id, now, scope)
            self.steering.release(res.probes, now, scope)
            if isinstance(exc, asyncio.CancelledError):  # a hedged loser: cost still counted
                self.outcomes.attempt(
                    req, res, waited_s=waited_s, fallback_reason=fallback_reason,
                    circuit=circuit.value, cancelled=True, hedged=hedged,
                )  # fmt: skip
            raise
        self.planner.observe(req, res)
        if res.rest is not None and res.classification is None:
            # a released stream: its verdict, cost and usage are known only at its end
            # (`Outcomes.stream_finisher`); the attempt is counted now, recorded then
            attempt_record(req, res, waited_s=waited_s, fallback_reason=fallback_reason,
                           circuit=circuit.value)  # fmt: skip
            return res
        if res.classification is None:  # the answer: its verdict may wait for the reply
            self.outcomes.accepted(
                req, res, scope, waited_s=waited_s, fallback_reason=fallback_reason,
                circuit=circuit.value, hedged=hedged,
            )  # fmt: skip
            return res
        self.outcomes.verdict(res, scope)  # before the next move: it may choose by it
        self.outcomes.attempt(
            req, res, waited_s=waited_s, fallback_reason=fallback_reason, circuit=circuit.value,
            hedged=hedged,
        )  # fmt: skip
        return res

    async def _planned(
        self, req: RequestState, route: Route, loop: _Loop | None
    ) -> tuple[dict[str, Any], AttemptResult, AttemptBudget]:
        """The attempt's upstream body, its result to fill and its timeouts, after the
        exclusions lookup; raises (giving the route's admission back) when it may not start."""
        scope = req.contract.workload
        probes: tuple[str, ...] = ()
        try:
            quarantine = await self.ignore_source(route.model, datetime.now(UTC))
            now = self.clock()  # the budget is what is left after the exclusions lookup
            alternatives = (
                None if loop is None else [r for r in loop.pool if r.id not in loop.excluded]
            )
            plan = self.planner.plan(
                req, route, quarantine, now, alternatives=alternatives,
                needs=None if loop is None else loop.needs,
            )  # fmt: skip
            probes = plan.probes
            body = upstream_body(req.body, route, req.contract, self.catalog.schemas, plan.ignore)
            if not req.deadline.may_start(now):
                raise DeadlineExhaustedError(
                    f"{req.deadline.remaining(now) * 1000:.0f} ms left after the exclusions"
                    f" lookup; an attempt needs {req.deadline.needed_s * 1000:.0f} ms",
                    reason="no_time_for_attempt",
                )
        except BaseException:  # no attempt was made: give the admission (probe slot) back
            self.breakers.release(route.id, self.clock(), scope)
            self.steering.release(probes, self.clock(), scope)
            raise
        res = AttemptResult(
            route=route, started=now, budget=plan.budget, ignore=tuple(plan.ignore),
            excluded_before=frozenset(req.excluded_for(route.model)), probes=probes,
            allowance=plan.allowance,
        )  # fmt: skip
        self.passive.kept(route.model, plan.allowance, now)
        return body, res, plan.timeouts
