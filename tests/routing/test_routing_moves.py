"""The router's next move as a pure function (R2-R5): each failure class and budget state
maps to exactly one move, with no clock, randomness or I/O inside."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ground.settings import Allowances, RoutingConfig
from routing.classify import Classification
from routing.contracts import Contract
from routing.deadline import Deadline
from routing.errors import (
    AmbiguousCompletionError,
    FailureClass,
    PermanentRequestError,
    UpstreamMisconfiguredError,
)
from routing.moves import FallBack, LoopBudget, Move, RetrySame, Stop, SwitchProvider, next_move
from routing.routes import Route
from tests.fixtures.routing import routing_catalog

F = FailureClass
CONFIG = RoutingConfig(backoff_base_s=0.1, backoff_cap_s=2.0)
ROUTE = Route(id="alpha", model="acme/alpha", context_length=8192)


def contract(workload: str = "chat", **update: object) -> Contract:
    c = routing_catalog().contract(workload)
    return Contract.model_validate({**c.model_dump(), **update}) if update else c


def move(
    c: Classification,
    *,
    budget: LoopBudget | None = None,
    remaining_s: float = 10.0,
    jitter: float = 0.5,
    workload_contract: Contract | None = None,
    provider_excluded: bool = False,
) -> tuple[Move, LoopBudget]:
    deadline = Deadline(at=100.0 + remaining_s, allowances=Allowances())
    return next_move(
        c,
        route=ROUTE,
        contract=workload_contract or contract(),
        budget=budget or LoopBudget.start(CONFIG),
        deadline=deadline,
        now=100.0,
        jitter=jitter,
        config=CONFIG,
        status_code=502,
        provider_excluded=provider_excluded,
    )


@pytest.mark.parametrize(
    ("cls", "error"),
    [(F.UPSTREAM_CONFIG, UpstreamMisconfiguredError), (F.PERMANENT, PermanentRequestError)],
)
def test_r2_our_key_and_permanent_failures_stop(cls: FailureClass, error: type) -> None:
    m, _ = move(Classification(cls, "x"))
    assert isinstance(m, Stop) and isinstance(m.error, error) and m.error.status_code == 502


def test_r8_ambiguous_stops_unless_the_workload_replays() -> None:
    c = Classification(F.AMBIGUOUS, "stream_cut")
    m, _ = move(c, workload_contract=contract(ambiguous_policy="fail"))
    assert isinstance(m, Stop) and isinstance(m.error, AmbiguousCompletionError)
    m, _ = move(c, workload_contract=contract(ambiguous_policy="replay"))
    assert isinstance(m, FallBack) and m.reason == "ambiguous_completion:stream_cut"


def test_r5_early_transient_retries_the_route_once_after_full_jitter() -> None:
    """delay = jitter * min(cap, base * 2**i); the second early failure falls back."""
    c = Classification(F.TRANSIENT, "connect_error", early=True)
    m, budget = move(c, jitter=0.5)
    assert m == RetrySame(0.05, "transient_transport:connect_error")
    assert budget == LoopBudget(same_route_left=0, retry_index=1)
    m, _ = move(c, budget=budget)
    assert isinstance(m, FallBack)


def test_r5_the_same_route_retries_and_backoff_come_from_the_routing_config() -> None:
    """`settings.routing` taken whole: its `same_route_retries` starts the budget (none left:
    an early failure falls back) and its base and cap shape the wait (R5)."""
    c = Classification(F.TRANSIENT, "connect_error", early=True)
    assert LoopBudget.start(RoutingConfig(same_route_retries=0)).same_route_left == 0
    m, _ = move(c, budget=LoopBudget.start(RoutingConfig(same_route_retries=0)))
    assert m == FallBack("transient_transport:connect_error")
    slow = RoutingConfig(backoff_base_s=0.4, backoff_cap_s=0.3)
    deadline = Deadline(at=110.0, allowances=Allowances())
    m, _ = next_move(
        c, route=ROUTE, contract=contract(), budget=LoopBudget.start(slow), deadline=deadline,
        now=100.0, jitter=0.5, config=slow,
    )  # fmt: skip
    assert m == RetrySame(0.15, "transient_transport:connect_error")  # 0.5 * min(0.3, 0.4)


def test_r5_late_transient_falls_back() -> None:
    m, budget = move(Classification(F.TRANSIENT, "read_timeout", early=False))
    assert isinstance(m, FallBack) and budget == LoopBudget.start(CONFIG)


def test_r4_a_backoff_that_does_not_fit_the_deadline_falls_back() -> None:
    c = Classification(F.TRANSIENT, "connect_error", early=True)
    m, _ = move(c, remaining_s=Allowances().required_s + 0.01, jitter=0.99)
    assert isinstance(m, FallBack)


def test_r5_retry_after_honoured_once_per_route_when_it_fits() -> None:
    c = Classification(F.CAPACITY, "rate_limited", retry_after_s=3.0)
    m, budget = move(c)
    assert m == RetrySame(3.0, "capacity:rate_limited") and budget.hinted == {"alpha"}
    m, _ = move(c, budget=budget)
    assert m == FallBack("retry_after_repeated:rate_limited")
    m, _ = move(c, remaining_s=2.0)
    assert m == FallBack("retry_after_3s_exceeds_deadline")


def test_r6_context_overflow_asks_the_next_route_for_more_context() -> None:
    m, _ = move(Classification(F.INCOMPATIBLE, "context_length_exceeded"))
    assert m == FallBack("route_incompatible:context_length_exceeded", min_context=8192)


@given(
    cls=st.sampled_from(list(FailureClass)),
    early=st.booleans(),
    retry_after=st.none() | st.floats(0, 100),
    left=st.integers(0, 2),
    index=st.integers(0, 10),
    remaining=st.floats(0, 60),
    jitter=st.floats(0, 0.999),
    excluded=st.booleans(),
    switched=st.booleans(),
)
def test_r3_every_failure_has_exactly_one_bounded_move(
    cls: FailureClass,
    early: bool,
    retry_after: float | None,
    left: int,
    index: int,
    remaining: float,
    jitter: float,
    excluded: bool,
    switched: bool,
) -> None:
    """Any classification gives one move; a same-route wait always fits the deadline and
    never exceeds the cap or the hint; budgets only shrink; a route is retried without a
    provider at most once."""
    c = Classification(cls, "r", early=early, retry_after_s=retry_after)
    budget = LoopBudget(same_route_left=left, retry_index=index,
                        switched=frozenset({"alpha"}) if switched else frozenset())  # fmt: skip
    m, after = move(c, budget=budget, remaining_s=remaining, jitter=jitter,
                    provider_excluded=excluded)  # fmt: skip
    assert after.same_route_left <= budget.same_route_left
    assert not (isinstance(m, SwitchProvider) and (switched or not excluded))
    if isinstance(m, RetrySame):
        deadline = Deadline(at=100.0 + remaining, allowances=Allowances())
        assert deadline.may_start(100.0, wait_s=m.wait_s)
        assert m.wait_s <= max(CONFIG.backoff_cap_s, retry_after or 0.0)


def test_r13_a_failure_of_an_excluded_provider_retries_the_route_without_it_once() -> None:
    """When the provider that served a failure is excluded for the next attempts, the route
    is tried again without it, once per route; a slow first token (no provider named) and a
    client's error never switch (R13)."""
    c = Classification(F.INVALID_RESPONSE, "stray_start")
    m, budget = move(c, provider_excluded=True)
    assert m == SwitchProvider("provider:invalid_response:stray_start")
    assert budget.switched == {"alpha"}
    m, _ = move(c, budget=budget, provider_excluded=True)
    assert m == FallBack("invalid_response:stray_start")
    m, _ = move(Classification(F.SLOW_FIRST_TOKEN, "slow_first_token"))
    assert m == FallBack("slow_first_token:slow_first_token")
    m, _ = move(Classification(F.PERMANENT, "invalid_request"), provider_excluded=True)
    assert isinstance(m, Stop)


def test_r8_r13_ambiguous_on_side_effect_tools_is_never_replayed() -> None:
    """A workload whose tools have side effects never replays an ambiguous completion, even
    under a `replay` policy (R8, R13)."""
    from routing.classify import with_side_effects

    tools = contract("tool_agent")
    replaying = Contract.model_validate(
        {**tools.model_dump(), "side_effect_free": True, "ambiguous_policy": "replay"}
    )
    assert replaying.side_effect_tools
    c = with_side_effects(Classification(F.TRANSIENT, "read_timeout"))
    assert c.failure_class is F.AMBIGUOUS
    m, _ = move(c, workload_contract=replaying)
    assert isinstance(m, Stop) and isinstance(m.error, AmbiguousCompletionError)
    assert with_side_effects(Classification(F.TRANSIENT, "connect_error", early=True)).early
    assert with_side_effects(Classification(F.CAPACITY, "read_timeout")).failure_class is F.CAPACITY
