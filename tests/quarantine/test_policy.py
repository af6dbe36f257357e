"""Table tests of the pure suspension policy (SPEC Q1-Q6, Q8), asserting on the decision log."""

from __future__ import annotations

from datetime import timedelta

import pytest

from ground.settings import PolicyConfig
from quarantine.errors import NotSuspendedError, UnknownTagError
from quarantine.exclusions import ignore_tags, merge_ignore
from quarantine.models import DecisionKind, Mode, ModelState
from quarantine.policy import lift, step, switch_mode
from tests.fixtures.quarantine_support import (
    DAY,
    HALF_HOUR,
    MODEL,
    T0,
    C,
    F,
    Z,
    kinds,
    prov,
    report,
    run,
)

HOUR = timedelta(hours=1)


def test_q1_frozen_round_between_failures_keeps_the_streak() -> None:
    """Q1: fail, frozen, fail counts as two consecutive failures and suspends."""
    _, decisions = run([{"a": F}, {"a": Z}, {"a": F}])
    assert kinds(decisions) == [("suspended", "a")]
    assert decisions[0].round_ids == ("r0", "r2")
    assert decisions[0].at == T0 + 2 * HALF_HOUR


def test_q1_frozen_round_between_clean_rounds_reinstates() -> None:
    """Q1/Q5: clean, frozen, clean while suspended counts as two clean rounds."""
    _, decisions = run([{"a": F}, {"a": F}, {"a": C}, {"a": Z}, {"a": C}])
    assert kinds(decisions) == [("suspended", "a"), ("reinstated_early", "a")]
    assert decisions[1].round_ids == ("r2", "r4")


@pytest.mark.parametrize("mode", [Mode.ENFORCE, Mode.OBSERVE])
def test_q1_transport_only_history_never_suspends(mode: Mode) -> None:
    """Q1: fifty frozen rounds change no streak and produce no decision."""
    state, decisions = run([{"a": Z, "b": Z}] * 50, mode=mode)
    assert decisions == []
    assert state.providers["a"].consecutive_failed_rounds == 0
    assert state.providers["a"].consecutive_clean_rounds == 0


def test_q1_frozen_round_does_not_reset_a_clean_streak_into_failure() -> None:
    """Q1: a frozen round after one failure leaves the fail streak at one."""
    state, _ = run([{"a": F}, {"a": Z}])
    assert state.providers["a"].consecutive_failed_rounds == 1


@pytest.mark.parametrize(
    "sequence",
    [[F], [F, C, F], [F, C, F, C, F, C], [C, F, C, F]],
    ids=["one", "alternating", "long-alternating", "clean-first"],
)
def test_q2_non_consecutive_failures_never_suspend(sequence: list) -> None:
    """Q2: one bad round is never enough, however often it recurs."""
    _, decisions = run([{"a": v} for v in sequence])
    assert decisions == []


def test_q2_second_consecutive_failure_suspends_with_evidence() -> None:
    """Q2/Q8: the second consecutive failed round suspends; decision carries reasons and rounds."""
    rounds = [
        {"a": prov("a", F, "language:language_mixing")},
        {"a": prov("a", F, "start:stray_prefix", "language:language_mixing")},
    ]
    state, decisions = run(rounds)
    (d,) = decisions
    assert d.kind is DecisionKind.SUSPENDED
    assert (d.tag, d.rung, d.until) == ("a", 1, T0 + HALF_HOUR + DAY)
    assert d.evidence == ("language:language_mixing", "start:stray_prefix")
    assert d.round_ids == ("r0", "r1")
    assert "2 consecutive failed rounds" in d.reason
    assert state.providers["a"].suspended_until == T0 + HALF_HOUR + DAY
    assert state.providers["a"].consecutive_failed_rounds == 0


def test_q2_setting_three_rounds_needs_three_failures() -> None:
    """Q2: fail_rounds is a knob; with 3, two failures are not enough."""
    _, decisions = run([{"a": F}, {"a": F}], config=PolicyConfig(fail_rounds=3))
    assert decisions == []
    _, decisions = run([{"a": F}] * 3, config=PolicyConfig(fail_rounds=3))
    assert kinds(decisions) == [("suspended", "a")]


def test_q4_floor_blocks_the_second_candidate_in_documented_order() -> None:
    """Q4: of two candidates, the one with more failing contracts goes first; the next is blocked."""
    rounds = [{"a": prov("a", F, "x:1"), "b": prov("b", F, "x:1", "y:2")}] * 2
    _, decisions = run(rounds, production=["a", "b", "c"])
    assert kinds(decisions) == [("suspended", "b"), ("blocked_by_floor", "a")]
    blocked = decisions[1]
    assert "only 2 production endpoint(s) remain" in blocked.reason
    assert blocked.round_ids == ("r0", "r1") and blocked.evidence == ("x:1",)


def test_q4_tie_on_failing_contracts_is_broken_by_tag() -> None:
    """Q4: equal failing contracts: alphabetical tag order decides."""
    _, decisions = run([{"zz": F, "aa": F}] * 2, production=["aa", "zz", "c"])
    assert kinds(decisions) == [("suspended", "aa"), ("blocked_by_floor", "zz")]


def test_q4_tags_excluded_by_other_layers_do_not_count_as_capacity() -> None:
    """Q4: production means not excluded by any layer: an excluded host is no capacity."""
    _, decisions = run([{"a": F}] * 2, production=["a", "b", "c"], excluded=["c"])
    assert kinds(decisions) == [("blocked_by_floor", "a")]


def test_q4_suspended_endpoints_do_not_count_as_capacity() -> None:
    """Q4: a host already suspended is not production capacity for the next candidate."""
    _, decisions = run([{"a": F}, {"a": F}, {"b": F}, {"b": F}], production=["a", "b", "c"])
    assert kinds(decisions) == [("suspended", "a"), ("blocked_by_floor", "b")]


def test_q4_non_production_candidate_is_not_limited_by_the_floor() -> None:
    """Q4: suspending a non-production endpoint (e.g. a control) never lowers production capacity."""
    _, decisions = run([{"ctl": F}] * 2, production=["a", "b"])
    assert kinds(decisions) == [("suspended", "ctl")]


def test_q4_blocked_candidate_is_asked_again_and_suspended_when_capacity_returns() -> None:
    """Q4: the streak survives a block; once capacity is back the next failed round suspends."""
    state, first = run([{"a": F}] * 3, production=["a", "b"])
    assert kinds(first) == [("blocked_by_floor", "a"), ("blocked_by_floor", "a")]
    _, later = run([{"a": F}], state=state, start=T0 + DAY, production=["a", "b", "c"])
    assert kinds(later) == [("suspended", "a")]
    assert later[0].round_ids == ("r0", "r1", "r2", "r0")


def test_q4_floor_zero_allows_suspending_everything() -> None:
    """Q4: the floor is a setting; with 0 every failing host may go."""
    _, decisions = run([{"a": F, "b": F}] * 2, production=["a", "b"], config=PolicyConfig(floor=0))
    assert kinds(decisions) == [("suspended", "a"), ("suspended", "b")]


def test_q5_suspended_endpoint_keeps_being_judged_and_two_clean_rounds_reinstate() -> None:
    """Q5: while suspended the streaks move; two clean rounds reinstate early, rung kept."""
    state, decisions = run([{"a": F}, {"a": F}, {"a": F}, {"a": C}, {"a": C}])
    assert kinds(decisions) == [("suspended", "a"), ("reinstated_early", "a")]
    ps = state.providers["a"]
    assert ps.suspended_until is None and ps.suspensions == 1
    assert ps.last_suspension_end == T0 + 4 * HALF_HOUR


def test_q5_suspension_expires_when_its_time_is_up() -> None:
    """Q5: the first round at or after the end emits `expired` with the scheduled end."""
    state, decisions = run([{"a": F}, {"a": F}])
    until = decisions[0].until
    assert until is not None
    _, before = run([{"a": Z}], state=state, start=until - timedelta(seconds=1))
    assert before == []
    state, after = run([{"a": Z}], state=state, start=until)
    assert kinds(after) == [("expired", "a")]
    assert after[0].until == until
    assert state.providers["a"].last_suspension_end == until


def test_q5_expiry_applies_to_endpoints_absent_from_the_round() -> None:
    """Q5: an endpoint not probed this round still expires on time."""
    state, _ = run([{"a": F}, {"a": F}])
    _, decisions = run([{"b": C}], state=state, start=T0 + 2 * DAY)
    assert kinds(decisions) == [("expired", "a")]


def _suspend_again(state: ModelState, at: object) -> tuple[ModelState, list]:
    return run([{"a": F}, {"a": F}], state=state, start=at)  # type: ignore[arg-type]


def test_q6_ladder_is_one_three_seven_then_seven() -> None:
    """Q6: successive suspensions last 1, 3, 7, 7 days when they follow within 14 days."""
    state, at, lengths = ModelState(model=MODEL), T0, []
    for _ in range(4):
        state, decisions = _suspend_again(state, at)
        suspended = [d for d in decisions if d.kind is DecisionKind.SUSPENDED]
        assert len(suspended) == 1
        d = suspended[0]
        assert d.until is not None
        lengths.append((d.rung, (d.until - d.at) / DAY))
        at = d.until + DAY  # next incident a day after the end
    assert lengths == [(1, 1.0), (2, 3.0), (3, 7.0), (4, 7.0)]


def test_q6_history_forgotten_fourteen_days_after_the_end_of_the_last_suspension() -> None:
    """Q6: at end + 14 days the ladder restarts (forgiven, then 1 day); a second earlier, rung 2."""
    state, decisions = _suspend_again(ModelState(model=MODEL), T0)
    end = decisions[0].until
    assert end is not None
    _, almost = _suspend_again(state, end + timedelta(days=14) - timedelta(hours=1))
    assert kinds(almost) == [("expired", "a"), ("suspended", "a")]
    assert almost[-1].rung == 2 and almost[-1].until - almost[-1].at == 3 * DAY
    _, later = _suspend_again(state, end + timedelta(days=14))
    assert kinds(later) == [("expired", "a"), ("forgiven", "a"), ("suspended", "a")]
    assert later[-1].rung == 1 and later[-1].until - later[-1].at == DAY


def test_q6_early_reinstatement_keeps_the_rung_and_starts_the_forgetting_clock() -> None:
    """Q6: reinstated early, the next suspension is rung 2; forgetting counts from reinstatement."""
    state, decisions = run([{"a": F}, {"a": F}, {"a": C}, {"a": C}])
    reinstated_at = decisions[-1].at
    _, again = _suspend_again(state, reinstated_at + DAY)
    assert again[-1].rung == 2
    _, forgotten = _suspend_again(state, reinstated_at + timedelta(days=14))
    assert kinds(forgotten) == [("forgiven", "a"), ("suspended", "a")]
    assert forgotten[-1].rung == 1


def test_q6_custom_ladder_from_config() -> None:
    """Q6: the ladder is a setting: (0.5, 2) days gives 12 h then 2 days for ever."""
    config = PolicyConfig(ladder_days=(0.5, 2.0))
    state, first = run([{"a": F}, {"a": F}], config=config)
    assert first[0].until is not None and first[0].until - first[0].at == timedelta(hours=12)
    _, second = run([{"a": F}, {"a": F}], state=state, start=T0 + DAY, config=config)
    assert second[-1].until is not None and second[-1].until - second[-1].at == 2 * DAY


def test_q3_observe_mode_records_shadow_suspensions_outside_provider_ignore() -> None:
    """Q3: observe runs the same machine, emits would_suspend, and never touches the ignore list."""
    state, decisions = run([{"a": F}, {"a": F}], mode=Mode.OBSERVE)
    assert kinds(decisions) == [("would_suspend", "a")]
    ps = state.providers["a"]
    assert ps.suspended_until is None and ps.shadow_suspended_until == decisions[0].until
    assert merge_ignore(MODEL, [], [], state, T0 + HALF_HOUR) == []


def test_q3_observe_and_enforce_produce_the_same_decisions_apart_from_the_kind() -> None:
    """Q3: identical machine: same sequence, same decisions, would_suspend in place of suspended."""
    seq = [
        {"a": F, "b": F},
        {"a": F, "b": Z},
        {"a": C, "b": F},
        {"a": C, "b": C},
        {"a": F},
        {"a": F},
    ]
    _, enforce = run(seq, mode=Mode.ENFORCE, production=["a", "b", "c"])
    _, observe = run(seq, mode=Mode.OBSERVE, production=["a", "b", "c"])
    rename = {"suspended": "would_suspend"}
    assert [(rename.get(k, k), t) for k, t in kinds(enforce)] == kinds(observe)
    assert [(d.at, d.until, d.rung) for d in enforce] == [(d.at, d.until, d.rung) for d in observe]


def test_q3_switching_observe_to_enforce_does_not_suspend_retroactively() -> None:
    """Q3: a shadow suspension is dropped on the switch, never turned into a real one."""
    state, _ = run([{"a": F}, {"a": F}], mode=Mode.OBSERVE)
    state, decisions = run([{"a": C}], state=state, start=T0 + 2 * HALF_HOUR, mode=Mode.ENFORCE)
    assert kinds(decisions) == [("mode_changed", "")]
    assert decisions[0].evidence == ("a",)
    ps = state.providers["a"]
    assert ps.suspended_until is None and ps.shadow_suspended_until is None
    assert ps.suspensions == 1  # rung kept: identical machine
    assert merge_ignore(MODEL, [], [], state, T0 + 3 * HALF_HOUR) == []


def test_q3_switching_enforce_to_observe_empties_the_canary_layer() -> None:
    """Q3: enforce -> observe takes suspensions out of provider.ignore but keeps them, so a
    return to enforce before their end restores them (a measured incident is not forgotten)."""
    state, first = run([{"a": F}, {"a": F}])
    assert ignore_tags(merge_ignore(MODEL, [], [], state, T0 + HALF_HOUR)) == ["a"]
    state, decisions = switch_mode(state, Mode.OBSERVE, now=T0 + HOUR, actor="ops", reason="test")
    assert kinds(decisions) == [("mode_changed", "")] and decisions[0].actor == "ops"
    assert decisions[0].evidence == ("a",)
    assert state.providers["a"].suspended_until == first[0].until
    assert merge_ignore(MODEL, [], [], state, T0 + HOUR) == []
    back, _ = switch_mode(state, Mode.ENFORCE, now=T0 + 2 * HOUR, actor="ops", reason="test")
    assert ignore_tags(merge_ignore(MODEL, [], [], back, T0 + 2 * HOUR)) == ["a"]


def test_q3_fresh_state_adopts_the_first_rounds_mode_silently() -> None:
    """Q3: a model's very first round in enforce mode emits no mode_changed decision."""
    state, decisions = run([{"a": C}], mode=Mode.ENFORCE)
    assert decisions == [] and state.mode is Mode.ENFORCE


def test_q8_manual_lift_records_who_and_why_and_keeps_the_rung() -> None:
    """Q8/Q6: a lift ends the suspension at once, carries actor and reason, rung stays."""
    state, _ = run([{"a": F}, {"a": F}])
    now = T0 + 3 * HOUR
    new, decisions = lift(state, "a", reason="provider fixed the template", actor="alice", now=now)
    (d,) = decisions
    assert (d.kind, d.tag, d.actor, d.reason, d.rung) == (
        DecisionKind.LIFTED, "a", "alice", "provider fixed the template", 1
    )  # fmt: skip
    ps = new.providers["a"]
    assert ps.suspended_until is None and ps.last_suspension_end == now and ps.suspensions == 1
    _, again = _suspend_again(new, now + HOUR)
    assert again[-1].rung == 2


def test_q8_lift_of_an_active_endpoint_is_refused_without_change() -> None:
    """Q8: lifting an endpoint that is not suspended is a clear error; the state is unchanged."""
    state, _ = run([{"a": F}])
    before = state.model_dump()
    with pytest.raises(NotSuspendedError, match=r"'a'.*not suspended"):
        lift(state, "a", reason="x", actor="bob", now=T0 + HOUR)
    assert state.model_dump() == before


def test_q8_lift_of_an_unknown_tag_names_the_known_ones() -> None:
    """Q8: an unknown tag is a clear error listing the known endpoints."""
    state, _ = run([{"a": F}])
    with pytest.raises(UnknownTagError, match=r"'nope'.*known: a"):
        lift(state, "nope", reason="x", actor="bob", now=T0)


def test_q8_lift_needs_reason_and_actor() -> None:
    """Q8: a lift without a reason or actor is refused."""
    state, _ = run([{"a": F}, {"a": F}])
    with pytest.raises(ValueError, match="reason and actor"):
        lift(state, "a", reason=" ", actor="bob", now=T0 + HOUR)


def test_q8_every_decision_names_model_mode_and_time() -> None:
    """Q8: each decision of a mixed history is self-describing (model, mode, at, reason)."""
    _, decisions = run(
        [{"a": F, "b": F}, {"a": F, "b": F}, {"a": C}, {"a": C}], production=["a", "b"]
    )
    assert kinds(decisions) == [("blocked_by_floor", "a"), ("blocked_by_floor", "b")]
    assert all(d.model == MODEL and d.mode is Mode.ENFORCE and d.reason for d in decisions)


def test_c8_sticky_locale_set_by_language_failure_and_cleared_by_clean_language() -> None:
    """C8: the failed locale sticks across a frozen round and clears after a clean language result."""
    state = ModelState(model=MODEL)
    config = PolicyConfig()
    state, _ = step(state, report("r0", T0, {"a": F}, language_failed={"a": "pt-BR"}), config)
    assert state.providers["a"].sticky_locale == "pt-BR"
    state, _ = step(state, report("r1", T0 + HALF_HOUR, {"a": Z}), config)
    assert state.providers["a"].sticky_locale == "pt-BR"
    state, _ = step(state, report("r2", T0 + HOUR, {"a": C}), config)
    assert state.providers["a"].sticky_locale is None


def test_step_refuses_a_report_for_another_model() -> None:
    """A report is applied only to its own model's state."""
    with pytest.raises(ValueError, match="other/model"):
        step(
            ModelState(model=MODEL), report("r0", T0, {"a": F}, model="other/model"), PolicyConfig()
        )


def test_step_is_pure_and_leaves_its_input_state_alone() -> None:
    """The policy returns a new state; the input object is not mutated."""
    state, _ = run([{"a": F}])
    before = state.model_dump()
    step(state, report("r9", T0 + HOUR, {"a": F}), PolicyConfig())
    assert state.model_dump() == before


def test_policy_config_is_the_settings_policy_section(monkeypatch: pytest.MonkeyPatch) -> None:
    """Q2/Q4/Q5/Q6 knobs come from the one settings object, nested as CANARY_POLICY__*."""
    from ground.settings import load_settings

    monkeypatch.setenv("CANARY_POLICY__FLOOR", "3")
    monkeypatch.setenv("CANARY_POLICY__FAIL_ROUNDS", "4")
    monkeypatch.setenv("CANARY_POLICY__LADDER_DAYS", "2,5")
    monkeypatch.setenv("CANARY_POLICY__FORGET_AFTER_DAYS", "10")
    c = load_settings(_env_file=None).policy
    assert isinstance(c, PolicyConfig) and c == PolicyConfig(
        floor=3, fail_rounds=4, ladder_days=(2.0, 5.0), forget_after_days=10
    )
    assert (c.floor, c.fail_rounds, c.clean_rounds, c.ladder_days, c.forget_after_days) == (
        3, 4, 2, (2.0, 5.0), 10.0
    )  # fmt: skip


def test_q8_decision_event_names_the_kind_and_endpoint() -> None:
    """Q8: a decision maps to a Prefect event `canary.endpoint.<kind>` carrying the whole decision."""
    state, decisions = run([{"a": F}, {"a": F}])
    event = decisions[0].event()
    assert event["event"] == "canary.endpoint.suspended"
    assert event["resource"]["prefect.resource.id"] == f"canary.endpoint.{MODEL}.a"
    assert event["payload"]["round_ids"] == ["r0", "r1"]
    assert decisions[0].significant
    _, expired = run([{"a": Z}], state=state, start=T0 + 2 * DAY)
    assert not expired[0].significant
