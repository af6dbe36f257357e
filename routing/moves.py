"""The router's next move after a failed attempt, as a pure function (SPEC R2–R5).

    next_move(classification, route, contract, budget, deadline, now, jitter, config)
        -> (Stop(error) | RetrySame(wait_s) | SwitchProvider(reason) | FallBack(reason,
            min_context), budget')

In the shape of `quarantine.policy.step`: data in, a decision and the next state out; no
clock (`now` is given), no randomness (`jitter`, a number in [0, 1), is drawn by the caller),
no I/O. `config` is `settings.routing` taken whole (its backoff base and cap; its
`same_route_retries` starts the `LoopBudget`); the allowances an attempt needs travel with
the `deadline`. `Router._loop` only performs the moves: it raises a `Stop`'s error, sleeps and
retries the same route for a `RetrySame`, tries the same route again without the provider that
served the failed attempt for a `SwitchProvider`, and leaves the route behind for a `FallBack`.

The rules, in order:
- our own credentials or credits refused: stop (`UpstreamMisconfiguredError`);
- a permanent request failure: stop (`PermanentRequestError`);
- a provider's policy refusal when the workload's `on_refusal` is `stop`: stop, quoting the
  provider's reason (by default another route may try);
- an ambiguous completion when the workload does not replay, or its tools have side effects
  (never replayed without the tool store's dedupe): stop;
- a transient failure before anything was sent (early) while a same-route retry is left:
  retry the route after a full-jitter backoff, if the wait fits the deadline;
- capacity with a `Retry-After` that fits the deadline: wait and retry the route, once per
  route (a route that asks again, or a hint that does not fit, falls back);
- a failure the provider that served it answers for, when the router could exclude that
  provider for the request's following attempts (`provider_excluded`: the reply named it and
  the capacity floor allows): the same route again without it, once per route (R13);
- everything else falls back (a slow first token included: a route-level outcome); a context
  overflow raises the context the next route needs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ground.settings import RoutingConfig
from routing.backoff import full_jitter_delay
from routing.classify import Classification, provider_said
from routing.contracts import Contract
from routing.deadline import Deadline
from routing.errors import (
    ERROR_FOR_CLASS,
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
    switched: frozenset[str] = frozenset()  # routes already retried without a provider

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
class SwitchProvider:
    """Try the same route again; the provider that served the failed attempt is excluded
    (the router added it to the request's `provider.ignore`)."""

    reason: str


@dataclass(frozen=True, slots=True)
class FallBack:
    """Leave this route; the next compatible one gets `reason` as its fallback reason."""

    reason: str
    min_context: int | None = None  # a context overflow: the next route needs more than this


Move = Stop | RetrySame | SwitchProvider | FallBack


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
    provider_excluded: bool = False,
) -> tuple[Move, LoopBudget]:
    """The move after attempt `c` on `route` failed (see the module docstring).
    `provider_excluded`: the provider that served it is excluded for the following attempts."""
    stop = _stop(c, route, contract, status_code)
    if stop is not None:
        return stop, budget
    cls = c.failure_class
    reason = f"{cls.value}:{c.reason}"
    if cls is F.TRANSIENT and c.early and budget.same_route_left > 0:
        return _after_backoff(reason, budget, deadline, now, jitter, config)
    if cls is F.CAPACITY and c.retry_after_s is not None:
        return _after_hint(c, c.retry_after_s, route, budget, deadline, now)
    if provider_excluded and cls.counts_against_route and route.id not in budget.switched:
        return SwitchProvider(f"provider:{reason}"), replace(
            budget, switched=budget.switched | {route.id}
        )
    if cls is F.INCOMPATIBLE and c.reason == "context_length_exceeded":
        return FallBack(reason, min_context=route.context_length), budget
    return FallBack(reason), budget


def _stop(
    c: Classification, route: Route, contract: Contract, status_code: int | None
) -> Stop | None:
    """The failures no other attempt can help: our own credentials, a permanent request
    failure, a refusal the workload does not take elsewhere, an ambiguous completion the
    workload does not replay."""
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
    if c.refusal and contract.on_refusal == "stop":
        return Stop(
            ERROR_FOR_CLASS[cls](
                f"the provider on {route.id} refused the request ({c.reason}); the workload's"
                f" policy takes no other route{provider_said(c)}",
                status_code=status_code,
                reason=c.reason,
            )
        )
    if cls is F.AMBIGUOUS and (contract.ambiguous_policy != "replay" or contract.side_effect_tools):
        why = (
            "its tools have side effects"
            if contract.ambiguous_policy == "replay"
            else f"the workload's policy is {contract.ambiguous_policy!r}"
        )
        return Stop(
            AmbiguousCompletionError(
                f"the upstream on {route.id} may have accepted the request ({c.reason}) and"
                f" no complete reply came; {why}, so it is not replayed",
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
    budget = replace(budget, retry_index=budget.retry_index + 1)
    if not deadline.may_start(now, wait_s=delay):
        return FallBack(reason), budget
    spent = replace(budget, same_route_left=budget.same_route_left - 1)
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
    hinted = replace(budget, hinted=budget.hinted | {route.id})
    return RetrySame(retry_after_s, f"{c.failure_class.value}:{c.reason}"), hinted
