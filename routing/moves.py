"""The router's next move after a failed attempt, as a pure function (SPEC R2–R5).

    next_move(classification, route, contract, budget, deadline, now, jitter, config)
        -> (Stop(error) | RetrySame(wait_s) | FallBack(reason, min_context), budget')

In the shape of `quarantine.policy.step`: data in, a decision and the next state out; no
clock (`now` is given), no randomness (`jitter`, a number in [0, 1), is drawn by the caller),
no I/O. `config` is `settings.routing` taken whole (its backoff base and cap; its
`same_route_retries` starts the `LoopBudget`); the allowances an attempt needs travel with
the `deadline`. `Router._loop` only performs the moves: it raises a `Stop`'s error, sleeps and
retries the same route for a `RetrySame`, and leaves the route behind for a `FallBack`.

The rules, in order:
- our own credentials or credits refused: stop (`UpstreamMisconfiguredError`);
- a permanent request failure: stop (`PermanentRequestError`);
- an ambiguous completion when the workload does not replay: stop;
- a transient failure before anything was sent (early) while a same-route retry is left:
  retry the route after a full-jitter backoff, if the wait fits the deadline;
- capacity with a `Retry-After` that fits the deadline: wait and retry the route, once per
  route (a route that asks again, or a hint that does not fit, falls back);
- everything else falls back; a context overflow raises the context the next route needs.
"""

from __future__ import annotations

from dataclasses import dataclass

from ground.settings import RoutingConfig
from routing.backoff import full_jitter_delay
from routing.classify import Classification
from routing.contracts import Contract
from routing.deadline import Deadline
from routing.errors import (
    AmbiguousCompletionError,
    FailureClass,
    PermanentRequestError,
    RoutingError,
    UpstreamMisconfiguredError,
)
from routing.routes import Route

F = FailureClass


@dataclass(frozen=True, slots=True)
class LoopBudget:
    """What the loop has left besides attempts and time."""

    same_route_left: int
    retry_index: int = 0  # full-jitter backoff exponent
    hinted: frozenset[str] = frozenset()  # routes whose Retry-After was already honoured

    @classmethod
    def start(cls, config: RoutingConfig) -> LoopBudget:
        """A request's budget before its first attempt: `config.same_route_retries` left."""
        return cls(same_route_left=config.same_route_retries)


@dataclass(frozen=True, slots=True)
class Stop:
    """End the request with this error."""

    error: RoutingError


@dataclass(frozen=True, slots=True)
class RetrySame:
    """Wait `wait_s`, then try the same route again."""

    wait_s: float
    reason: str


@dataclass(frozen=True, slots=True)
class FallBack:
    """Leave this route; the next compatible one gets `reason` as its fallback reason."""

    reason: str
    min_context: int | None = None  # a context overflow: the next route needs more than this


Move = Stop | RetrySame | FallBack


def next_move(
    c: Classification,
    *,
    route: Route,
    contract: Contract,
    budget: LoopBudget,
    deadline: Deadline,
    now: float,
    jitter: float,
    config: RoutingConfig,
    status_code: int | None = None,
) -> tuple[Move, LoopBudget]:
    """The move after attempt `c` on `route` failed (see the module docstring)."""
    stop = _stop(c, route, contract, status_code)
    if stop is not None:
        return stop, budget
    cls = c.failure_class
    reason = f"{cls.value}:{c.reason}"
    if cls is F.TRANSIENT and c.early and budget.same_route_left > 0:
        return _after_backoff(reason, budget, deadline, now, jitter, config)
    if cls is F.CAPACITY and c.retry_after_s is not None:
        return _after_hint(c, c.retry_after_s, route, budget, deadline, now)
    if cls is F.INCOMPATIBLE and c.reason == "context_length_exceeded":
        return FallBack(reason, min_context=route.context_length), budget
    return FallBack(reason), budget


def _stop(
    c: Classification, route: Route, contract: Contract, status_code: int | None
) -> Stop | None:
    """The failures no other attempt can help: our own credentials, a permanent request
    failure, an ambiguous completion the workload does not replay."""
    cls = c.failure_class
    if cls is F.UPSTREAM_CONFIG:
        return Stop(
            UpstreamMisconfiguredError(
                f"the upstream rejected the gateway's own credentials or credits: {c.reason}",
                status_code=status_code,
                reason=c.reason,
            )
        )
    if cls is F.PERMANENT:
        return Stop(
            PermanentRequestError(
                f"upstream rejected the request: {c.reason}",
                status_code=status_code,
                reason=c.reason,
            )
        )
    if cls is F.AMBIGUOUS and contract.ambiguous_policy != "replay":
        return Stop(
            AmbiguousCompletionError(
                f"the connection to {route.id} was lost after output started; the workload's"
                f" policy is {contract.ambiguous_policy!r}, so it is not replayed",
                status_code=status_code,
                reason=c.reason,
            )
        )
    return None


def _after_backoff(
    reason: str,
    budget: LoopBudget,
    deadline: Deadline,
    now: float,
    jitter: float,
    config: RoutingConfig,
) -> tuple[Move, LoopBudget]:
    """An early transient failure with a same-route retry left: the same route after a
    full-jitter backoff when the wait fits the deadline, else fall back. The backoff
    exponent grows either way; a retry also spends the same-route retry."""
    delay = full_jitter_delay(
        budget.retry_index,
        base_s=config.backoff_base_s,
        cap_s=config.backoff_cap_s,
        rand=lambda: jitter,
    )
    budget = LoopBudget(budget.same_route_left, budget.retry_index + 1, budget.hinted)
    if not deadline.may_start(now, wait_s=delay):
        return FallBack(reason), budget
    spent = LoopBudget(budget.same_route_left - 1, budget.retry_index, budget.hinted)
    return RetrySame(delay, reason), spent


def _after_hint(
    c: Classification,
    retry_after_s: float,
    route: Route,
    budget: LoopBudget,
    deadline: Deadline,
    now: float,
) -> tuple[Move, LoopBudget]:
    """Capacity with a `Retry-After`: wait it out on the same route, once per route, when it
    fits the deadline; else fall back, saying why (asked again, or too long a wait)."""
    if route.id in budget.hinted:
        return FallBack(f"retry_after_repeated:{c.reason}"), budget
    if not deadline.may_start(now, wait_s=retry_after_s):
        return FallBack(f"retry_after_{retry_after_s:g}s_exceeds_deadline"), budget
    hinted = LoopBudget(budget.same_route_left, budget.retry_index, budget.hinted | {route.id})
    return RetrySame(retry_after_s, f"{c.failure_class.value}:{c.reason}"), hinted
