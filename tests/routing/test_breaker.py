"""Circuit breakers per route and failure class (SPEC R9): the pure state machine."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from routing.breaker import (
    Admit,
    BreakerBoard,
    BreakerConfig,
    BreakerState,
    CallAdmitted,
    CallRejected,
    CircuitClosed,
    CircuitHalfOpened,
    CircuitOpened,
    CircuitStatus,
    Failed,
    Released,
    Succeeded,
    _added,
    _prune,
    step,
)
from routing.errors import FailureClass

F = FailureClass
CFG = BreakerConfig(
    consecutive_failures=3,
    error_rate=0.5,
    window_s=10,
    min_volume=6,
    open_for_s=5,
    half_open_max_probes=2,
)


def run(
    events: list, cfg: BreakerConfig = CFG, start: BreakerState | None = None
) -> tuple[BreakerState, list]:
    state = start or BreakerState()
    log: list = []
    for at, ev in events:
        state, out = step(state, ev, at, cfg)
        log.extend(out)
    return state, log


def test_r9_opens_after_consecutive_failures() -> None:
    """Three consecutive route failures open the circuit; a success in between resets the count (R9)."""
    state, log = run(
        [
            (0, Failed(F.CAPACITY)),
            (1, Failed(F.CAPACITY)),
            (2, Succeeded()),
            (3, Failed(F.CAPACITY)),
            (4, Failed(F.CAPACITY)),
        ]
    )
    assert state.status is CircuitStatus.CLOSED and log == []
    state, log = run([(5, Failed(F.CAPACITY))], start=state)
    assert state.status is CircuitStatus.OPEN and log == [CircuitOpened("consecutive")]


def test_r9_error_rate_over_window_needs_minimum_volume() -> None:
    """Alternating failures open on error rate only once the window holds min_volume calls (R9)."""
    events = [(i, Failed(F.TRANSIENT) if i % 2 else Succeeded()) for i in range(5)]
    state, log = run(events)
    assert state.status is CircuitStatus.CLOSED
    state, log = run([(5, Failed(F.TRANSIENT))], start=state)
    assert state.status is CircuitStatus.OPEN and log == [CircuitOpened("error_rate")]


def test_r9_old_outcomes_leave_the_window() -> None:
    """Failures older than window_s no longer count toward the error rate (R9)."""
    events = [(i * 0.1, Failed(F.TRANSIENT) if i % 2 else Succeeded()) for i in range(5)]
    state, _ = run(events)
    state, _ = run([(30, Succeeded()), (30.1, Failed(F.TRANSIENT))], start=state)
    assert state.status is CircuitStatus.CLOSED and len(state.window) == 2


def test_r9_client_errors_never_count() -> None:
    """Permanent request failures and route incompatibilities never move a circuit, however many (R9)."""
    events = [(i, Failed(F.PERMANENT if i % 2 else F.INCOMPATIBLE)) for i in range(50)]
    state, log = run(events)
    assert state == BreakerState() and log == []


def test_r9_half_open_probe_count_is_bounded() -> None:
    """After open_for, at most half_open_max_probes calls are admitted; a probe success closes (R9)."""
    opened, _ = run([(0, Failed(F.CAPACITY))] * 3)
    state, log = run([(1, Admit())], start=opened)
    assert log == [CallRejected(CircuitStatus.OPEN)]
    state, log = run([(5, Admit()), (5.1, Admit()), (5.2, Admit())], start=opened)
    assert log == [
        CircuitHalfOpened(),
        CallAdmitted(probe=True),
        CallAdmitted(probe=True),
        CallRejected(CircuitStatus.HALF_OPEN),
    ]
    assert state.probes_in_flight == 2
    state, log = run([(6, Released()), (6.1, Admit())], start=state)
    assert log == [CallAdmitted(probe=True)]
    state, log = run([(7, Succeeded())], start=state)
    assert state.status is CircuitStatus.CLOSED and log == [CircuitClosed()]


def test_r9_failed_probe_reopens() -> None:
    """A failing half-open probe sends the circuit back to open with a fresh timer (R9)."""
    opened, _ = run([(0, Failed(F.CAPACITY))] * 3)
    state, log = run([(5, Admit()), (5.5, Failed(F.INVALID_RESPONSE))], start=opened)
    assert state.status is CircuitStatus.OPEN and state.opened_at == 5.5
    assert log[-1] == CircuitOpened("probe_failed")


def test_r9_board_keeps_circuits_per_route_and_class() -> None:
    """Capacity failures open alpha's capacity circuit only; beta and other classes stay closed (R9)."""
    board = BreakerBoard(BreakerConfig(consecutive_failures=2, open_for_s=5))
    board.record("alpha", F.CAPACITY, 0)
    board.record("alpha", F.INVALID_RESPONSE, 0.5)
    assert board.status("alpha", 1) is CircuitStatus.CLOSED
    board.record("alpha", F.CAPACITY, 1)
    assert board.status("alpha", 1.5) is CircuitStatus.OPEN and not board.admit("alpha", 1.5)
    assert board.status("beta", 1.5) is CircuitStatus.CLOSED and board.admit("beta", 1.5)
    assert board.admit("alpha", 6.5) and board.status("alpha", 6.5) is CircuitStatus.HALF_OPEN
    assert not board.admit("alpha", 6.6)  # one probe slot by default
    board.record("alpha", None, 7)
    assert board.status("alpha", 7) is CircuitStatus.CLOSED


def test_r9_error_rate_counts_successes_before_the_first_failure() -> None:
    """55 successes then 5 capacity failures is a 1-in-12 error rate: the circuit stays closed; a real 50 % rate still opens (R9)."""
    cfg = BreakerConfig(consecutive_failures=10, error_rate=0.5, min_volume=5, window_s=60)
    board = BreakerBoard(cfg)
    for i in range(55):
        board.record("alpha", None, i * 0.1)
    for i in range(5):
        board.record("alpha", F.CAPACITY, 6 + i * 0.1)
    assert board.status("alpha", 7) is CircuitStatus.CLOSED
    bad = BreakerBoard(cfg)
    for i in range(3):
        bad.record("beta", None, i)
        bad.record("beta", F.CAPACITY, i + 0.5)
    assert bad.status("beta", 3) is CircuitStatus.OPEN
    assert any(e.event == CircuitOpened("error_rate") for e in bad.log)


def test_r9_half_open_probe_failing_with_another_class_reopens() -> None:
    """A half-open capacity circuit whose probe fails as invalid_response opens again (fresh timer), instead of staying half-open (R9)."""
    board = BreakerBoard(BreakerConfig(consecutive_failures=1, open_for_s=5))
    board.record("alpha", F.CAPACITY, 0)
    assert board.admit("alpha", 6) and board.status("alpha", 6) is CircuitStatus.HALF_OPEN
    board.record("alpha", F.INVALID_RESPONSE, 6.5)
    assert board.states[("alpha", "", F.CAPACITY)].status is CircuitStatus.OPEN
    assert board.states[("alpha", "", F.CAPACITY)].opened_at == 6.5
    assert board.status("alpha", 7) is CircuitStatus.OPEN and not board.admit("alpha", 7)
    board.record("alpha", F.PERMANENT, 7)  # a client's error is no verdict on the probe
    assert board.states[("alpha", "", F.CAPACITY)].status is CircuitStatus.OPEN


class BreakerMachine(RuleBasedStateMachine):
    """Random event sequences keep the breaker's invariants (R9)."""

    def __init__(self) -> None:
        super().__init__()
        self.state = BreakerState()
        self.now = 0.0
        self.last_event: object = None

    @rule(
        dt=st.floats(0, 3),
        ev=st.sampled_from([Admit(), Succeeded(), Released(), *[Failed(c) for c in FailureClass]]),
    )
    def feed(self, dt: float, ev: object) -> None:
        self.now += dt
        before = self.state
        self.state, events = step(self.state, ev, self.now, CFG)  # type: ignore[arg-type]
        if isinstance(ev, Failed) and not ev.failure_class.counts_against_route:
            assert (
                self.state.status is before.status and self.state.consecutive == before.consecutive
            )
        if (
            before.status is CircuitStatus.OPEN
            and isinstance(ev, Admit)
            and before.opened_at is not None
        ):
            admitted = any(isinstance(e, CallAdmitted) for e in events)
            assert admitted == (self.now - before.opened_at >= CFG.open_for_s)

    @invariant()
    def bounded(self) -> None:
        assert 0 <= self.state.probes_in_flight <= CFG.half_open_max_probes
        assert self.state.consecutive < CFG.consecutive_failures
        assert (self.state.status is CircuitStatus.CLOSED) == (self.state.opened_at is None)


TestBreakerMachine = BreakerMachine.TestCase
TestBreakerMachine.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)


@settings(max_examples=200, deadline=None)
@given(
    outcomes=st.lists(st.tuples(st.floats(0, 500, allow_nan=False), st.booleans()), max_size=60),
    now=st.floats(0, 600, allow_nan=False),
    span=st.floats(0.001, 200, allow_nan=False),
)
def test_r9_the_outcome_window_keeps_exactly_the_outcomes_within_its_span(
    outcomes: list[tuple[float, bool]], now: float, span: float
) -> None:
    """The window is kept in time order and pruned by bisection (so a request's cost does
    not grow with the request rate); it keeps exactly the outcomes with `now - t <= span`,
    whatever order they arrived in (R9)."""
    window: tuple[tuple[float, bool], ...] = ()
    for item in outcomes:
        window = _added(window, item)
    assert list(window) == sorted(outcomes, key=lambda x: x[0])  # a stable sort by time
    kept = _prune(window, now, span)
    assert sorted(kept) == sorted(x for x in outcomes if now - x[0] <= span)
