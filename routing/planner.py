"""Before and right after one attempt (SPEC R4, R6, R13): its `provider.ignore`, its budgets,
and what the gateway learns from it.

    plan = planner.plan(req, route, quarantine_ignore, now, alternatives=..., needs=...)
        plan.ignore     the quarantine's list, the providers the gateway ejected or whose
                        circuit is open (above the capacity floor), and the providers this
                        request excluded (`routing.providers.allowance`, `routing/steer.py`)
        plan.allowance  the whole decision: also the providers every request of the route
                        may use, and those the floor kept
        plan.budget     the split (`routing/budget.py`): the attempt's total and first-token
                        budgets, and what is kept for one fallback, from the needs measured
                        (`routing/latency.py`) or listed (`routing/listing.py`)
        plan.timeouts   the same as the upstream client's timeouts, plus the stall timeout
    planner.observe(req, res)
                        who served it (its listing tag), whether it could be excluded (the
                        capacity floor), and its latency sample

A fallback is kept when the attempt budget allows one more attempt and either another
compatible route is admitted by its circuit, or the same route has another provider to
steer to (the provider that served a failure is then excluded for the request).
"""

from __future__ import annotations

from dataclasses import dataclass

from ground.settings import Allowances, RoutingConfig
from routing.accounting import RequestState
from routing.attempt import AttemptResult
from routing.breaker import BreakerBoard, CircuitStatus
from routing.budget import Budget, Need, need_of, split
from routing.capability import Needs, select_routes
from routing.deadline import AttemptBudget
from routing.health import HealthBook
from routing.latency import LatencyBook, kind_of
from routing.providers import Allowance, allowed, listed_ttft_ms
from routing.routes import Route
from routing.steer import Steering


@dataclass(frozen=True, slots=True)
class Plan:
    ignore: list[str]
    allowance: Allowance
    probes: tuple[str, ...]  # half-open provider circuits admitted for this attempt
    budget: Budget
    timeouts: AttemptBudget


class Planner:
    def __init__(
        self,
        breakers: BreakerBoard,
        health: HealthBook,
        steering: Steering,
        latency: LatencyBook,
        config: RoutingConfig,
        allowances: Allowances,
    ) -> None:
        self.breakers = breakers
        self.health = health
        self.steering = steering
        self.latency = latency
        self.config = config
        self.allowances = allowances

    def plan(
        self,
        req: RequestState,
        route: Route,
        quarantine: list[str],
        now: float,
        *,
        alternatives: list[Route] | None,
        needs: Needs | None,
    ) -> Plan:
        """The attempt's ignore list and budgets; `alternatives` (None: no fallback is kept,
        a hedged attempt's) are the routes the loop could still fall back to."""
        scope = req.contract.workload
        excluded = req.excluded_for(route.model)
        allow, probes = self.steering.allowance_for(route, scope, quarantine, excluded, now)
        ignore = list(allow.ignore)
        fallback = (
            None
            if alternatives is None or needs is None
            else self.fallback(req, route, ignore, alternatives, needs, now)
        )
        budget = split(
            req.deadline.remaining(now) * 1000,
            deadline_ms=req.contract.deadline_ms,
            own=self.need(req, route, ignore, now),
            fallback=fallback,
            config=self.config,
            allowances=self.allowances,
        )
        total_s = budget.total_ms / 1000
        timeouts = AttemptBudget(
            connect_s=min(self.config.connect_timeout_s, total_s),
            total_s=total_s,
            ttft_s=None if budget.ttft_ms is None else budget.ttft_ms / 1000,
            stall_s=self.config.stall_timeout_s,
            hold_s=self.config.start_hold_s,
        )
        return Plan(ignore, allow, probes, budget, timeouts)

    def need(self, req: RequestState, route: Route, ignore: list[str], now: float) -> Need:
        """The route's need over the providers `ignore` leaves it (see routing/budget.py)."""
        endpoints = self.steering.endpoints(route)
        left = allowed(endpoints, ignore)
        gone = frozenset(e.provider_name for e in endpoints if e not in left)
        kind = kind_of(req.contract.workload, released=req.stream)
        measured = self.latency.measured(kind, route.id, exclude=gone, now=now)
        listed = listed_ttft_ms(endpoints, ignore, self.config.budget_percentile)
        return need_of(measured, listed, route.latency_p50_ms)

    def fallback(
        self,
        req: RequestState,
        route: Route,
        ignore: list[str],
        alternatives: list[Route],
        needs: Needs,
        now: float,
    ) -> Need | None:
        """The need of the fallback this attempt should leave time for, or None: no further
        attempt is allowed, or there is no compatible route and no other provider."""
        contract = req.contract
        if len(req.attempts) + 1 >= contract.max_attempts:
            return None
        others = [r for r in alternatives if r.id != route.id]
        scope = contract.workload
        open_ids = frozenset(
            r.id for r in others if self.breakers.status(r.id, now, scope) is CircuitStatus.OPEN
        )
        sel = select_routes(
            others, contract, needs, remaining_cost_usd=contract.max_cost_usd - req.cost_usd,
            suppressed=open_ids, health=self.health.at(now),
        )  # fmt: skip
        if sel.ranked:
            nxt = sel.ranked[0]
            return self.need(req, nxt, sorted(req.excluded_for(nxt.model)), now)
        if self.steering.another_provider(route, ignore):
            return self.need(req, route, ignore, now)
        return None

    def observe(self, req: RequestState, res: AttemptResult) -> None:
        """After the attempt: who served it, whether that provider could be excluded, and the
        latency sample (a reply that came whole, or a stream at its release)."""
        served = res.served_by
        res.provider_tag = self.steering.provider_tag(res.route, served)
        res.excludable = self.steering.excludable(res.route, res.ignore, served)
        replied = res.classification is None or res.completion.done
        if not replied or res.ended <= res.started:
            return
        self.latency.add(
            kind_of(req.contract.workload, released=req.stream),
            res.route.id,
            served,
            ttft_ms=None if res.ttft_s is None else res.ttft_s * 1000,
            total_ms=(res.ended - res.started) * 1000,
            now=res.ended,
        )
