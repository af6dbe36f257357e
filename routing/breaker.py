"""Circuit breakers per route and failure class (SPEC R9), a pure state machine.

    step(state, event, now, config) -> (state, events)

    CLOSED ──(N consecutive failures, or error rate >= threshold over the
     ▲        window with at least `min_volume` calls)──► OPEN
     │                                                     │ open_for_s elapsed,
     │ probe succeeded                                     ▼ next admission
     └──────────────────────────────────────────────── HALF_OPEN (at most
                      probe failed: back to OPEN ◄──   `half_open_max_probes`
                                                        admitted at once)

Only failures of classes that are the route's own fault count
(`FailureClass.counts_against_route`): a client's bad request (permanent) or
a route incompatibility never touches a circuit. `now` is always passed in;
nothing here reads a clock. `BreakerBoard` is the thin mutable shell that
keeps one state per (route, scope, class) and the event log.

Scopes: the router gives each workload its own circuits on a route (scope = the
workload), so the requests of one workload (their contract, their clients'
parameters) can never open a route's circuit for another. A method called without
`scope` reads or admits every scope of the route (what a caller that does not
scope, such as a test of one workload, expects); `record` without one uses "".
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass, replace
from enum import StrEnum

from ground.settings import BreakerConfig
from routing.errors import FailureClass

_DEFAULT = BreakerConfig()


class CircuitStatus(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


Window = tuple[tuple[float, bool], ...]  # (time, failed), in time order


@dataclass(frozen=True, slots=True)
class BreakerState:
    status: CircuitStatus = CircuitStatus.CLOSED
    consecutive: int = 0
    window: Window = ()  # (time, failed), in time order
    opened_at: float | None = None
    probes_in_flight: int = 0


# ---- inputs ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Admit:
    """An attempt asks to use the route."""


@dataclass(frozen=True, slots=True)
class Succeeded:
    pass


@dataclass(frozen=True, slots=True)
class Failed:
    failure_class: FailureClass


@dataclass(frozen=True, slots=True)
class Released:
    """An admitted attempt ended without a verdict about the route (cancelled, client error)."""


Input = Admit | Succeeded | Failed | Released

# ---- outputs (past tense) -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CallAdmitted:
    probe: bool


@dataclass(frozen=True, slots=True)
class CallRejected:
    status: CircuitStatus


@dataclass(frozen=True, slots=True)
class CircuitOpened:
    reason: str  # "consecutive" | "error_rate" | "probe_failed"


@dataclass(frozen=True, slots=True)
class CircuitHalfOpened:
    pass


@dataclass(frozen=True, slots=True)
class CircuitClosed:
    pass


Event = CallAdmitted | CallRejected | CircuitOpened | CircuitHalfOpened | CircuitClosed


def _prune(window: Window, now: float, span: float) -> Window:
    """The outcomes still inside the window (`now - t <= span`). A window is kept in time
    order (`_added`), so the expired outcomes are a prefix, found by bisection: the cost
    of a request does not grow with the request rate."""
    if not window or now - window[0][0] <= span:
        return window
    return window[bisect.bisect_left(window, True, key=lambda item: now - item[0] <= span) :]


def _added(window: Window, item: tuple[float, bool]) -> Window:
    """`window` with `item`, in time order (a `now` older than the newest outcome is placed
    where it belongs)."""
    if not window or window[-1][0] <= item[0]:
        return (*window, item)
    at = bisect.bisect_right(window, item[0], key=lambda x: x[0])
    return (*window[:at], item, *window[at:])


def _append(window: deque[tuple[float, bool]], item: tuple[float, bool]) -> None:
    """`_added` on the board's own window, in place: O(1) for an outcome in time order (a
    tuple copy was O(outcomes in the window) per request, which grows with the rate)."""
    if not window or window[-1][0] <= item[0]:
        window.append(item)
    else:
        window.insert(bisect.bisect_right(window, item[0], key=lambda x: x[0]), item)


def _drop_expired(window: deque[tuple[float, bool]], now: float, span: float) -> None:
    """`_prune` on the board's own window, in place: the expired outcomes are a prefix."""
    while window and now - window[0][0] > span:
        window.popleft()


def _open(now: float, reason: str) -> tuple[BreakerState, list[Event]]:
    return BreakerState(status=CircuitStatus.OPEN, opened_at=now), [CircuitOpened(reason)]


def step(
    state: BreakerState, event: Input, now: float, config: BreakerConfig = _DEFAULT
) -> tuple[BreakerState, list[Event]]:
    """One transition. Pure: same inputs, same outputs."""
    s = state
    if isinstance(event, Admit):
        if s.status is CircuitStatus.CLOSED:
            return s, [CallAdmitted(probe=False)]
        if s.status is CircuitStatus.OPEN:
            if s.opened_at is not None and now - s.opened_at >= config.open_for_s:
                return (
                    replace(s, status=CircuitStatus.HALF_OPEN, probes_in_flight=1),
                    [CircuitHalfOpened(), CallAdmitted(probe=True)],
                )
            return s, [CallRejected(s.status)]
        if s.probes_in_flight < config.half_open_max_probes:
            return replace(s, probes_in_flight=s.probes_in_flight + 1), [CallAdmitted(probe=True)]
        return s, [CallRejected(s.status)]

    if isinstance(event, Released):
        if s.status is CircuitStatus.HALF_OPEN:
            return replace(s, probes_in_flight=max(0, s.probes_in_flight - 1)), []
        return s, []

    if isinstance(event, Succeeded):
        if s.status is CircuitStatus.HALF_OPEN:
            return BreakerState(), [CircuitClosed()]
        if s.status is CircuitStatus.OPEN:
            return s, []  # a late result from before the circuit opened
        window = _added(_prune(s.window, now, config.window_s), (now, False))
        return replace(s, consecutive=0, window=window), []

    # Failed
    if not event.failure_class.counts_against_route:
        return step(s, Released(), now, config)
    if s.status is CircuitStatus.HALF_OPEN:
        return _open(now, "probe_failed")
    if s.status is CircuitStatus.OPEN:
        return s, []
    window = _added(_prune(s.window, now, config.window_s), (now, True))
    consecutive = s.consecutive + 1
    if consecutive >= config.consecutive_failures:
        return _open(now, "consecutive")
    failures = sum(1 for _, failed in window if failed)
    if len(window) >= config.min_volume and failures / len(window) >= config.error_rate:
        return _open(now, "error_rate")
    return replace(s, consecutive=consecutive, window=window), []


@dataclass(frozen=True, slots=True)
class RecordedEvent:
    route_id: str
    failure_class: FailureClass
    at: float
    event: Event
    scope: str = ""


Key = tuple[str, str, FailureClass]  # route id, scope (the workload), failure class


class BreakerBoard:
    """One breaker per (route, scope, failure class); a thin mutable shell around `step`."""

    def __init__(self, config: BreakerConfig = _DEFAULT) -> None:
        self.config = config
        self.states: dict[Key, BreakerState] = {}
        # outcomes per (route, scope), in time order; a circuit judges a copy (`Window`)
        self.windows: dict[tuple[str, str], deque[tuple[float, bool]]] = {}
        self.log: list[RecordedEvent] = []

    def _apply(self, key: Key, event: Input, now: float) -> list[Event]:
        state, events = step(self.states.get(key, BreakerState()), event, now, self.config)
        self.states[key] = state
        self.log.extend(RecordedEvent(key[0], key[2], now, e, key[1]) for e in events)
        if len(self.log) > 10_000:
            del self.log[:5_000]
        return events

    def _keys(self, route_id: str, scope: str | None) -> list[Key]:
        return [k for k in self.states if k[0] == route_id and (scope is None or k[1] == scope)]

    def status(self, route_id: str, now: float, scope: str | None = None) -> CircuitStatus:
        """The worst status of the route's circuits (an elapsed OPEN reads as HALF_OPEN)."""
        worst = CircuitStatus.CLOSED
        for key in self._keys(route_id, scope):
            s = self.states[key]
            if s.status is CircuitStatus.OPEN:
                ready = s.opened_at is not None and now - s.opened_at >= self.config.open_for_s
                if not ready:
                    return CircuitStatus.OPEN
                worst = CircuitStatus.HALF_OPEN
            elif s.status is CircuitStatus.HALF_OPEN:
                worst = CircuitStatus.HALF_OPEN
        return worst

    def admit(self, route_id: str, now: float, scope: str | None = None) -> bool:
        """Ask every circuit of the route; admitted only if none rejects (no partial claims)."""
        keys = self._keys(route_id, scope)
        for key in keys:
            _, events = step(self.states[key], Admit(), now, self.config)
            if any(isinstance(e, CallRejected) for e in events):
                rejected = CallRejected(self.states[key].status)
                self.log.append(RecordedEvent(key[0], key[2], now, rejected, key[1]))
                return False
        for key in keys:
            if self.states[key].status is not CircuitStatus.CLOSED:
                self._apply(key, Admit(), now)
        return True

    def _seed_windows(self, route_id: str, scope: str, now: float) -> None:
        """Every closed circuit of the route (in this scope) judges its error rate over the
        scope's one outcome window (successes included, even those before the class first
        failed)."""
        outcomes = self.windows.setdefault((route_id, scope), deque())
        _drop_expired(outcomes, now, self.config.window_s)
        closed = [
            k for k in self._keys(route_id, scope) if self.states[k].status is CircuitStatus.CLOSED
        ]
        if closed:
            window = tuple(outcomes)
            for key in closed:
                self.states[key] = replace(self.states[key], window=window)

    def record(
        self, route_id: str, failure_class: FailureClass | None, now: float, scope: str = ""
    ) -> None:
        """Feed an attempt's verdict: None = success (to every circuit of the route in
        `scope`)."""
        where = (route_id, scope)
        if failure_class is None:
            self._seed_windows(route_id, scope, now)
            for key in self._keys(route_id, scope):
                self._apply(key, Succeeded(), now)
            _append(self.windows[where], (now, False))
            return
        target = (route_id, scope, failure_class)
        counts = failure_class.counts_against_route
        if counts:
            self._seed_windows(route_id, scope, now)
            if target not in self.states:  # a class failing for the first time starts from
                self.states[target] = BreakerState(window=tuple(self.windows[where]))  # the route's
            self._apply(target, Failed(failure_class), now)
            _append(self.windows[where], (now, True))
        for key in self._keys(route_id, scope):
            if key == target and counts:
                continue
            if counts and self.states[key].status is CircuitStatus.HALF_OPEN:
                # the route failed while this circuit was probing it: the probe failed too
                self._apply(key, Failed(key[2]), now)
            else:
                self._apply(key, Released(), now)

    def release(self, route_id: str, now: float, scope: str | None = None) -> None:
        """An admitted attempt ended without a verdict on the route: give its slot back."""
        for key in self._keys(route_id, scope):
            self._apply(key, Released(), now)
