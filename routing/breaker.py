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
keeps one state per (route, class) and the event log.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from ground.settings import BreakerConfig
from routing.errors import FailureClass

_DEFAULT = BreakerConfig()


class CircuitStatus(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True, slots=True)
class BreakerState:
    status: CircuitStatus = CircuitStatus.CLOSED
    consecutive: int = 0
    window: tuple[tuple[float, bool], ...] = ()  # (time, failed)
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


def _prune(
    window: tuple[tuple[float, bool], ...], now: float, span: float
) -> tuple[tuple[float, bool], ...]:
    return tuple(item for item in window if now - item[0] <= span)


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
        window = (*_prune(s.window, now, config.window_s), (now, False))
        return replace(s, consecutive=0, window=window), []

    # Failed
    if not event.failure_class.counts_against_route:
        return step(s, Released(), now, config)
    if s.status is CircuitStatus.HALF_OPEN:
        return _open(now, "probe_failed")
    if s.status is CircuitStatus.OPEN:
        return s, []
    window = (*_prune(s.window, now, config.window_s), (now, True))
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


class BreakerBoard:
    """One breaker per (route, failure class); a thin mutable shell around `step`."""

    def __init__(self, config: BreakerConfig = _DEFAULT) -> None:
        self.config = config
        self.states: dict[tuple[str, FailureClass], BreakerState] = {}
        self.windows: dict[str, tuple[tuple[float, bool], ...]] = {}  # route -> outcomes
        self.log: list[RecordedEvent] = []

    def _apply(self, key: tuple[str, FailureClass], event: Input, now: float) -> list[Event]:
        state, events = step(self.states.get(key, BreakerState()), event, now, self.config)
        self.states[key] = state
        self.log.extend(RecordedEvent(key[0], key[1], now, e) for e in events)
        if len(self.log) > 10_000:
            del self.log[:5_000]
        return events

    def _keys(self, route_id: str) -> list[tuple[str, FailureClass]]:
        return [k for k in self.states if k[0] == route_id]

    def status(self, route_id: str, now: float) -> CircuitStatus:
        """The worst status of the route's circuits (an elapsed OPEN reads as HALF_OPEN)."""
        worst = CircuitStatus.CLOSED
        for key in self._keys(route_id):
            s = self.states[key]
            if s.status is CircuitStatus.OPEN:
                ready = s.opened_at is not None and now - s.opened_at >= self.config.open_for_s
                if not ready:
                    return CircuitStatus.OPEN
                worst = CircuitStatus.HALF_OPEN
            elif s.status is CircuitStatus.HALF_OPEN:
                worst = CircuitStatus.HALF_OPEN
        return worst

    def admit(self, route_id: str, now: float) -> bool:
        """Ask every circuit of the route; admitted only if none rejects (no partial claims)."""
        keys = self._keys(route_id)
        for key in keys:
            _, events = step(self.states[key], Admit(), now, self.config)
            if any(isinstance(e, CallRejected) for e in events):
                self.log.append(
                    RecordedEvent(key[0], key[1], now, CallRejected(self.states[key].status))
                )
                return False
        for key in keys:
            if self.states[key].status is not CircuitStatus.CLOSED:
                self._apply(key, Admit(), now)
        return True

    def _seed_windows(self, route_id: str, now: float) -> None:
        """Every closed circuit of the route judges its error rate over the route's one
        outcome window (successes included, even those before the class first failed)."""
        window = _prune(self.windows.get(route_id, ()), now, self.config.window_s)
        self.windows[route_id] = window
        for key in self._keys(route_id):
            if self.states[key].status is CircuitStatus.CLOSED:
                self.states[key] = replace(self.states[key], window=window)

    def record(self, route_id: str, failure_class: FailureClass | None, now: float) -> None:
        """Feed an attempt's verdict: None = success (to every circuit of the route)."""
        if failure_class is None:
            self._seed_windows(route_id, now)
            for key in self._keys(route_id):
                self._apply(key, Succeeded(), now)
            self.windows[route_id] = (*self.windows[route_id], (now, False))
            return
        target = (route_id, failure_class)
        counts = failure_class.counts_against_route
        if counts:
            self._seed_windows(route_id, now)
            self.states.setdefault(
                target, BreakerState(window=self.windows[route_id])
            )  # a class failing for the first time starts from the route's window
            self._apply(target, Failed(failure_class), now)
            self.windows[route_id] = (*self.windows[route_id], (now, True))
        for key in self._keys(route_id):
            if key == target and counts:
                continue
            if counts and self.states[key].status is CircuitStatus.HALF_OPEN:
                # the route failed while this circuit was probing it: the probe failed too
                self._apply(key, Failed(key[1]), now)
            else:
                self._apply(key, Released(), now)

    def release(self, route_id: str, now: float) -> None:
        for key in self._keys(route_id):
            self._apply(key, Released(), now)
