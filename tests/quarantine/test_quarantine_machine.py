"""Hypothesis state machine over the pure policy (SPEC Q1-Q4, Q6, Q7): random rounds, frozen
rounds, time jumps, manual lifts and runtime exclusions, with the issue's invariants checked
against an independent bookkeeping of the decision log."""

from __future__ import annotations

from datetime import datetime, timedelta

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from ground.settings import PolicyConfig
from quarantine.errors import NotSuspendedError
from quarantine.exclusions import RuntimeExclusion, ignore_tags, merge_ignore
from quarantine.models import DecisionKind, Mode, ModelState, RoundReport
from quarantine.policy import lift, step
from quarantine.verdicts import ProviderRound, RoundVerdict
from tests.fixtures.quarantine_support import HALF_HOUR, MODEL, T0

TAGS = ("a", "b", "c", "d", "ctl")
PRODUCTION = frozenset({"a", "b", "c", "d"})  # "ctl" is a control: never production
CONFIG = PolicyConfig()
SUSPENDING = (DecisionKind.SUSPENDED, DecisionKind.WOULD_SUSPEND)
verdicts = st.sampled_from(list(RoundVerdict))
round_input = st.dictionaries(
    st.sampled_from(TAGS), st.tuples(verdicts, st.integers(min_value=1, max_value=3)), min_size=1
)


class PolicyMachine(RuleBasedStateMachine):
    """Drives `step`/`lift` and checks every decision against its own bookkeeping."""

    @initialize(mode=st.sampled_from(list(Mode)))
    def start(self, mode: Mode) -> None:
        self.mode = mode
        self.state = ModelState(model=MODEL, mode=mode)
        self.now: datetime = T0
        self.n = 0
        self.runtime: list[RuntimeExclusion] = []
        self.fails_since_reset = dict.fromkeys(TAGS, 0)
        self.ever_failed = dict.fromkeys(TAGS, False)
        self.rung = dict.fromkeys(TAGS, 0)
        self.last_end: dict[str, datetime | None] = dict.fromkeys(TAGS)

    def _excluded(self) -> frozenset[str]:
        return frozenset(r.tag for r in self.runtime if r.active(self.now))

    def _suspended_now(self) -> set[str]:
        return {t for t, ps in self.state.providers.items() if ps.suspended(self.now)}

    def _book(self, decisions: list) -> None:
        for d in decisions:
            if d.kind in SUSPENDING:
                assert d.mode is self.mode
                assert d.kind is (
                    DecisionKind.SUSPENDED
                    if self.mode is Mode.ENFORCE
                    else DecisionKind.WOULD_SUSPEND
                )
                assert self.ever_failed[d.tag], "transport-only history suspended"
                assert self.fails_since_reset[d.tag] >= CONFIG.fail_rounds, "suspended too early"
                end = self.last_end[d.tag]
                forgotten = end is None or d.at - end >= CONFIG.forget_after
                expected = 1 if forgotten else self.rung[d.tag] + 1
                assert d.rung == expected
                days = CONFIG.ladder_days[min(expected, len(CONFIG.ladder_days)) - 1]
                assert d.until - d.at == timedelta(days=days)
                self.rung[d.tag] = expected
                self.fails_since_reset[d.tag] = 0
            elif d.kind is DecisionKind.EXPIRED:
                self.last_end[d.tag] = d.until
            elif d.kind in (DecisionKind.REINSTATED_EARLY, DecisionKind.LIFTED):
                self.last_end[d.tag] = d.at
                if d.kind is DecisionKind.LIFTED:
                    self.fails_since_reset[d.tag] = 0

    @rule(rounds=round_input)
    def canary_round(self, rounds: dict[str, tuple[RoundVerdict, int]]) -> None:
        self.now += HALF_HOUR
        self.n += 1
        built = {
            t: ProviderRound(
                tag=t,
                verdict=v,
                reasons=(f"c{k}:x",) if v is RoundVerdict.FAILED else (),
                failing_contracts=k if v is RoundVerdict.FAILED else 0,
            )
            for t, (v, k) in rounds.items()
        }
        for t, rnd in built.items():
            if rnd.verdict is RoundVerdict.FAILED:
                self.ever_failed[t] = True
                self.fails_since_reset[t] += 1
            elif rnd.verdict is RoundVerdict.CLEAN:
                self.fails_since_reset[t] = 0
        excluded = self._excluded()
        before = self._suspended_now()
        report = RoundReport(
            round_id=f"r{self.n}",
            model=MODEL,
            at=self.now,
            mode=self.mode,
            rounds=built,
            production_tags=PRODUCTION,
            excluded_tags=excluded,
        )
        self.state, decisions = step(self.state, report, CONFIG)
        self._book(decisions)
        new_production_suspensions = {
            d.tag for d in decisions if d.kind in SUSPENDING and d.tag in PRODUCTION - excluded
        }
        assert not (new_production_suspensions & before), "re-suspended while suspended"
        if new_production_suspensions:
            remaining = PRODUCTION - excluded - self._suspended_now()
            assert len(remaining) >= CONFIG.floor, "canary took production below the floor"

    @rule(hours=st.integers(min_value=1, max_value=24 * 20))
    def time_jump(self, hours: int) -> None:
        self.now += timedelta(hours=hours)

    @rule(tag=st.sampled_from(TAGS))
    def manual_lift(self, tag: str) -> None:
        ps = self.state.providers.get(tag)
        if ps is None or not ps.suspended(self.now):
            if ps is not None:
                before = self.state.model_dump()
                try:
                    lift(self.state, tag, reason="test", actor="hypothesis", now=self.now)
                except NotSuspendedError:
                    pass
                else:
                    raise AssertionError("lifted an endpoint that is not suspended")
                assert self.state.model_dump() == before
            return
        self.state, decisions = lift(
            self.state, tag, reason="test", actor="hypothesis", now=self.now
        )
        assert [d.kind for d in decisions] == [DecisionKind.LIFTED]
        self._book(decisions)
        assert not self.state.providers[tag].suspended(self.now)

    @rule(tag=st.sampled_from(TAGS), hours=st.none() | st.integers(min_value=1, max_value=72))
    def add_exclusion(self, tag: str, hours: int | None) -> None:
        until = self.now + timedelta(hours=hours) if hours else None
        self.runtime = [r for r in self.runtime if r.tag != tag]
        self.runtime.append(
            RuntimeExclusion(
                tag=tag, reason="incident", author="ops", added_at=self.now, until=until
            )
        )

    @rule(tag=st.sampled_from(TAGS))
    def remove_exclusion(self, tag: str) -> None:
        self.runtime = [r for r in self.runtime if r.tag != tag]

    @invariant()
    def ignore_list_follows_the_mode(self) -> None:
        if not hasattr(self, "state"):
            return
        merged = ignore_tags(merge_ignore(MODEL, [], self.runtime, self.state, self.now))
        without_canary = ignore_tags(merge_ignore(MODEL, [], self.runtime, None, self.now))
        if self.mode is Mode.OBSERVE:
            assert merged == without_canary, "observe mode changed provider.ignore"
        else:
            assert set(merged) == set(without_canary) | self._suspended_now()


TestPolicyMachine = PolicyMachine.TestCase
TestPolicyMachine.settings = settings(
    max_examples=100,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
