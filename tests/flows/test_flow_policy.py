"""Quarantine behaviour through real canary rounds (Q1-Q8, C5, C8, O1, O2):
small fleet scenarios per test (each its own model id, so state never leaks
between tests), the real Prefect test harness and a real local webhook."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

import pytest
from prefect.blocks.notifications import CustomWebhookNotificationBlock

from flows.admin import lift_suspension
from flows.canary_round import RoundSummary, canary_round
from ground.settings import load_settings
from quarantine.adapters.ignore import aignore_list
from quarantine.adapters.lease import aread_lease, arelease_lease, lease_name
from quarantine.adapters.locking import active_slots
from quarantine.adapters.store import aload_state, state_lock_name
from quarantine.exclusions import ignore_tags
from tests.fixtures.canary_env import STRAY, endpoint, load_model
from tests.fixtures.fleet import FleetHandle
from tests.fixtures.prefect import final_task_runs

T0 = datetime(2026, 11, 2, 0, 0, tzinfo=UTC)
HALF_HOUR = timedelta(minutes=30)
SLOW = {"ttft_s": 7.6, "tokens_per_s": 100, "jitter": 0.0}  # 1.9 s at the tests' scale
SWITCHES_ALWAYS = [{"kind": "language_switch", "rate": 1.0, "to": "en", "alt": "de"}]


def _load_with_switching_host(canary_env: FleetHandle, model: str, *others: dict[str, Any]) -> None:
    """`model` served by a/fp8 and b/fp8 (clean), always/fp8 (switches language every
    time) and `others`."""
    load_model(
        canary_env,
        model,
        [endpoint("a/fp8"), endpoint("b/fp8"), endpoint("always/fp8", defects=SWITCHES_ALWAYS),
         *others],
    )  # fmt: skip


async def _round(
    model: str, at: datetime, mode: Literal["observe", "enforce"] = "enforce"
) -> RoundSummary:
    summary = await canary_round(model=model, mode=mode, at=at)
    assert isinstance(summary, RoundSummary)
    return summary


def _kinds(summary: RoundSummary) -> list[tuple[str, str]]:
    return sorted((d["kind"], d["tag"]) for d in summary.decisions)


class _Hook(BaseHTTPRequestHandler):
    received: list[dict[str, Any]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        type(self).received.append(json.loads(body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A real HTTP listener on loopback collecting webhook POST bodies."""
    received: list[dict[str, Any]] = []
    handler = type("Hook", (_Hook,), {"received": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", received
    server.shutdown()
    server.server_close()


async def test_q3_q8_observe_mode_records_would_suspend_and_notifies(
    canary_env: FleetHandle,
    webhook: tuple[str, list[dict[str, Any]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Observe mode: would_suspend after two failing rounds, an admin notification reaches
    a real webhook, and provider.ignore stays empty."""
    model = "test/observe"
    load_model(
        canary_env,
        model,
        [
            endpoint("a/fp8"),
            endpoint("b/fp8"),
            endpoint("c/fp8"),
            endpoint("bad/fp8", defects=STRAY),
        ],
    )
    url, received = webhook
    await CustomWebhookNotificationBlock(
        name="canary-admins",
        url=url,
        json_data={"subject": "{{subject}}", "body": "{{body}}"},
        allow_private_urls=True,
    ).asave("canary-admins", overwrite=True)
    monkeypatch.setenv("CANARY_NOTIFICATION_BLOCK", "custom-webhook/canary-admins")

    first = await _round(model, T0, mode="observe")
    assert _kinds(first) == []
    second = await _round(model, T0 + HALF_HOUR, mode="observe")
    assert _kinds(second) == [("would_suspend", "bad/fp8")]
    assert second.notified == "block:custom-webhook/canary-admins"
    assert any("would_suspend: bad/fp8" in r["body"] for r in received), received
    assert ignore_tags(await aignore_list(model, T0 + HALF_HOUR)) == []
    state = await aload_state(model)
    assert state.providers["bad/fp8"].shadow_suspended_until is not None
    assert state.providers["bad/fp8"].suspended_until is None


async def test_q4_capacity_floor_suspends_one_broken_host_and_blocks_the_other(
    canary_env: FleetHandle,
) -> None:
    """3 endpoints, 2 broken (in different ways: two of three hosts with the same defect is
    the model's, issue 14): at their second failing round one is suspended, the other blocked
    by the floor (alert), and provider.ignore holds the suspended one only. (Recovery after
    two clean rounds through real rounds: test_flow_evidence.py's two reinstatement tests;
    the rule itself: test_policy.py's Q5 tests.)"""
    model = "test/floor"
    load_model(
        canary_env,
        model,
        [
            endpoint("ok/fp8"),
            endpoint("bad1/fp8", defects=STRAY),
            endpoint("bad2/fp8", defects=WALL),
        ],
    )
    assert _kinds(await _round(model, T0)) == []
    second = await _round(model, T0 + HALF_HOUR)
    assert _kinds(second) == [("blocked_by_floor", "bad2/fp8"), ("suspended", "bad1/fp8")]
    assert ignore_tags(await aignore_list(model, T0 + HALF_HOUR)) == ["bad1/fp8"]


async def test_q6_q8_the_ladder_climbs_across_rounds_and_a_lift_keeps_the_rung(
    canary_env: FleetHandle,
) -> None:
    """A host that keeps failing is suspended for 1 day and, failing again in the rounds after
    that suspension ended (an `at` jump), for 3 days: the rung lives in the stored state
    between rounds; a manual lift takes it out of provider.ignore and keeps the rung. (The
    whole ladder, 1, 3, 7, 7 days, and forgetting 14 days after the last suspension are the
    pure policy's: test_policy.py's Q6 tests; every field's round trip through the block:
    test_quarantine_store.py.)"""
    model = "test/ladder"
    load_model(
        canary_env,
        model,
        [endpoint("a/fp8"), endpoint("b/fp8"), endpoint("bad/fp8", defects=STRAY)],
    )

    async def suspend_twice(at: datetime) -> tuple[int, int]:
        """The rung and the length in days of the suspension the second round decides."""
        await _round(model, at)
        second = await _round(model, at + HALF_HOUR)
        [d] = [d for d in second.decisions if d["kind"] == "suspended"]
        at_, until = datetime.fromisoformat(d["at"]), datetime.fromisoformat(d["until"])
        return d["rung"], (until - at_).days

    assert await suspend_twice(T0) == (1, 1)
    ended = T0 + HALF_HOUR + timedelta(days=1)
    assert await suspend_twice(ended + timedelta(hours=1)) == (2, 3)

    # manual lift: out of provider.ignore now, rung kept
    now = ended + timedelta(hours=2)
    assert "bad/fp8" in ignore_tags(await aignore_list(model, now))
    lifted = await lift_suspension(
        model=model, tag="bad/fp8", reason="fixed upstream", author="ops", at=now
    )
    assert lifted["kind"] == "lifted" and lifted["actor"] == "ops"
    assert "bad/fp8" not in ignore_tags(await aignore_list(model, now))
    assert (await aload_state(model)).providers["bad/fp8"].suspensions == 2


WALL = [{"kind": "policy_filter", "rate": 1.0, "modes": ["refusal"]}]


def _controls_model(
    fleet: FleetHandle, monkeypatch: pytest.MonkeyPatch, model: str, *, control_filters: bool
) -> None:
    """Three healthy hosts, a refusing host `wall/fp8` and the control `ctl/fp8`, which
    filters like `wall` only if `control_filters`."""
    monkeypatch.setenv("CANARY_CONTROL_PROVIDERS", "ctl/fp8")
    control = endpoint("ctl/fp8", defects=WALL) if control_filters else endpoint("ctl/fp8")
    healthy = [endpoint(t) for t in ("a/fp8", "b/fp8", "c/fp8")]
    load_model(fleet, model, [*healthy, control, endpoint("wall/fp8", defects=WALL)])


async def test_c5_control_that_stops_filtering_weakens_the_refusal_probe(
    canary_env: FleetHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A control host that passes marks the refusal probe weak: an alert, and no
    refusal-based failure counts for anyone that round."""
    model = "test/controls"
    _controls_model(canary_env, monkeypatch, model, control_filters=False)
    for n in range(2):
        summary = await _round(model, T0 + n * HALF_HOUR)
        assert summary.weak_refusal_probe
        assert summary.controls == {"ctl/fp8": "pass"}
        wall_reasons = {why for tag, _l, _v, why in summary.endpoints if tag == "wall/fp8"}
        assert not any("refusal:" in why for why in wall_reasons)
        assert all("refusal" not in " ".join(d.get("evidence", [])) for d in summary.decisions)


async def test_c5_filtering_control_keeps_refusal_failures_counting(
    canary_env: FleetHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the control filtering as expected, a refusing host is suspended on refusal."""
    model = "test/controls-ok"
    _controls_model(canary_env, monkeypatch, model, control_filters=True)
    await _round(model, T0)
    second = await _round(model, T0 + HALF_HOUR)
    assert not second.weak_refusal_probe
    [d] = [d for d in second.decisions if d["kind"] == "suspended"]
    assert d["tag"] == "wall/fp8" and any(e.startswith("refusal:") for e in d["evidence"])


async def test_o2_two_rounds_for_one_model_at_once_one_runs(canary_env: FleetHandle) -> None:
    """Two rounds of the same model and slot started together: one completes, the other
    waits for the round lock, sees the slot applied and is cancelled (revision advances once)."""
    model = "test/concurrent"
    load_model(canary_env, model, [endpoint("a/fp8"), endpoint("b/fp8")])
    states = await asyncio.gather(
        canary_round(model=model, return_state=True),  # at = now, as a schedule and a CLI
        canary_round(model=model, return_state=True),  # run started together would be
    )
    kinds = sorted(s.type.value for s in states)
    assert kinds == ["CANCELLED", "COMPLETED"], kinds
    assert (await aload_state(model)).revision == 1


async def test_q2_o2_rounds_never_go_back_in_time(canary_env: FleetHandle) -> None:
    """A round whose half-hour slot is not after the last applied one changes nothing."""
    model = "test/backwards"
    load_model(canary_env, model, [endpoint("a/fp8"), endpoint("b/fp8")])
    await _round(model, T0 + HALF_HOUR)
    for at in (T0, T0 + HALF_HOUR + timedelta(minutes=10)):
        state = await canary_round(model=model, at=at, return_state=True)
        assert state.is_cancelled(), at
    assert (await aload_state(model)).revision == 1


async def test_q3_round_without_mode_keeps_the_stored_mode(
    canary_env: FleetHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A round that names no mode keeps the model's stored mode (CANARY_MODE only seeds a
    new model), so a default-mode run never frees real suspensions."""
    model = "test/mode"
    load_model(
        canary_env,
        model,
        [endpoint("a/fp8"), endpoint("b/fp8"), endpoint("bad/fp8", defects=STRAY)],
    )
    await _round(model, T0, mode="enforce")
    await _round(model, T0 + HALF_HOUR, mode="enforce")
    monkeypatch.setenv("CANARY_MODE", "observe")
    third = await canary_round(model=model, at=T0 + 2 * HALF_HOUR)
    assert isinstance(third, RoundSummary) and third.mode == "enforce"
    assert not any(d["kind"] == "mode_changed" for d in third.decisions)
    assert "bad/fp8" in ignore_tags(await aignore_list(model, T0 + 2 * HALF_HOUR))


async def test_q8_broken_notification_block_does_not_fail_an_applied_round(
    canary_env: FleetHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the state is applied, a missing notification block falls back to the log."""
    model = "test/notify-broken"
    monkeypatch.setenv("CANARY_NOTIFICATION_BLOCK", "custom-webhook/does-not-exist")
    load_model(
        canary_env,
        model,
        [endpoint("a/fp8"), endpoint("b/fp8"), endpoint("bad/fp8", defects=STRAY)],
    )
    await _round(model, T0)
    second = await _round(model, T0 + HALF_HOUR)
    assert ("suspended", "bad/fp8") in _kinds(second)
    assert second.notified == "log"


async def test_c8_language_failure_confirmed_by_majority_and_locale_sticks(
    canary_env: FleetHandle,
) -> None:
    """A host that switches language every time is confirmed (2 of 3) and probed in the
    same locale next round; a one-off switch is outvoted by its two confirmations."""
    model = "test/lang"
    # first_n: every request of the first probe set switches, the confirmations do not
    set_size = 3 + load_settings().probe.start_samples  # language, refusal, structured, start x n
    once = [{"kind": "language_switch", "first_n": set_size, "to": "en", "alt": "de"}]
    _load_with_switching_host(canary_env, model, endpoint("once/fp8", defects=once))
    first = await _round(model, T0)
    rows = {tag: (locale, verdict, why) for tag, locale, verdict, why in first.endpoints}
    assert rows["always/fp8"][1] == "failed" and "language:language_switch" in rows["always/fp8"][2]
    assert "language" not in rows["once/fp8"][2], rows["once/fp8"]
    confirmations = [r for r in canary_env.requests() if r["tag"] == "once/fp8"]
    assert len(confirmations) == set_size + 2  # the probe set, then two confirmation attempts

    second = await _round(model, T0 + HALF_HOUR)
    rows2 = {tag: (locale, verdict, why) for tag, locale, verdict, why in second.endpoints}
    assert rows2["always/fp8"][0] == rows["always/fp8"][0]  # sticky locale (C8)
    assert rows2["once/fp8"][0] != rows["once/fp8"][0]  # rotation moved on
    assert ("suspended", "always/fp8") in _kinds(second)


async def test_c8_an_endpoints_confirmations_do_not_wait_for_the_slowest_endpoints_probes(
    canary_env: FleetHandle,
) -> None:
    """The confirmations of a fast endpoint whose language failed start as soon as its own
    probe set ends, while a slow endpoint is still being probed: the round's critical path
    is its slowest endpoint's chain, not the slowest probe set plus the confirmations."""
    model = "test/lang-pipeline"
    _load_with_switching_host(canary_env, model, endpoint("slow/fp8", timing=SLOW))
    canary_env.clear_requests()
    summary = await _round(model, T0)
    rows = {tag: verdict for tag, _, verdict, _ in summary.endpoints}
    assert rows["always/fp8"] == "failed", rows
    seen = [r for r in canary_env.requests() if r["model"] == model]
    fast = sorted(r["ts"] for r in seen if r["tag"] == "always/fp8")
    set_size = 3 + load_settings().probe.start_samples
    assert len(fast) == set_size + 2, fast  # the probe set, then two confirmations
    # the slow endpoint's last reply cannot have started before its request plus its delay
    slow_busy_until = max(r["ts"] + r["scripted_ttft_s"] for r in seen if r["tag"] == "slow/fp8")
    assert fast[set_size] < slow_busy_until - 0.3, (fast[set_size], slow_busy_until)


async def test_o1_o3_the_graph_holds_the_rounds_steps_and_a_task_run_per_endpoint_with_a_story(
    canary_env: FleetHandle,
) -> None:
    """The run's task runs are the DAG of O1: discovery, one `pinned-probes` task run for
    every endpoint, inside it a `language-confirmation` task run for the endpoint whose
    language failed, the majority vote, the policy step, the apply; then a red `verdict`
    task run for the failing endpoint and one `clean` task run naming the others (O3). No
    endpoint has a probe task run of its own."""
    model = "test/graph"
    _load_with_switching_host(canary_env, model, endpoint("c/fp8"))
    state = await canary_round(model=model, mode="enforce", at=T0, return_state=True)
    assert state.is_completed(), state
    run_id = state.state_details.flow_run_id
    assert run_id is not None
    runs = await final_task_runs(run_id, expected=8)
    names = set(runs)
    summary = await state.aresult()
    assert isinstance(summary, RoundSummary)
    locale = next(row[1] for row in summary.endpoints if row[0] == "always/fp8")
    assert {"probe 4 endpoints", f"confirm always/fp8 [{locale}]", "clean: 3 endpoints"} <= names
    failed = [n for n in names if n.startswith("always/fp8: failed language")]
    assert len(failed) == 1, names  # (its start may be a peer outlier, not counted)
    assert runs[failed[0]].state.type.value == "FAILED"
    assert not [n for n in names if n.startswith("probe ") and n != "probe 4 endpoints"]
    assert runs["clean: 3 endpoints"].state.message == "a/fp8, b/fp8, c/fp8"
    steps = {r.task_key.rsplit("-", 1)[0] for r in runs.values()}
    assert {"discover_endpoints", "majority_vote", "policy_step", "apply_report"} <= steps
    confirm = runs[f"confirm always/fp8 [{locale}]"]
    parents = [p.id for p in confirm.task_inputs.get("__parents__", [])]
    assert parents == [runs["probe 4 endpoints"].id]  # nested in the probes' task run
    assert len(runs) == 8, sorted(names)


async def _strays_done(before: set[asyncio.Task[Any]]) -> None:
    """Wait until every task this loop started since `before` (the round's own, e.g. a stray
    lock request, which ends by taking its lock) has ended, instead of sleeping for it."""
    me = asyncio.current_task()
    strays = [t for t in asyncio.all_tasks() - before if t is not me and not t.done()]
    if strays:
        await asyncio.wait(strays, timeout=60)


async def test_o2_a_round_that_lost_its_lock_applies_nothing_and_gives_the_state_lock_back(
    canary_env: FleetHandle,
) -> None:
    """The round lock released by hand while the probes run (`canary lock release`): the
    round takes the state-write lock while it checks the round lock, finds it lost, applies
    nothing and gives the state-write lock back at once (not after its 60 s lease)."""
    model = "test/lock-lost"
    load_model(canary_env, model, [endpoint("a/fp8"), endpoint("slow/fp8", timing=SLOW)])
    before = asyncio.all_tasks()
    running = asyncio.ensure_future(
        canary_round(model=model, mode="enforce", at=T0, return_state=True)
    )
    for _ in range(200):
        if await aread_lease(lease_name(model)) is not None:
            break
        await asyncio.sleep(0.05)
    assert await arelease_lease(lease_name(model)) is not None
    state = await running
    assert state.is_failed() and "nothing applied" in (state.message or ""), state
    await _strays_done(before)  # a lock request the round left running would land meanwhile
    assert await active_slots(state_lock_name(model)) == 0  # taken, and given back
    assert (await aload_state(model)).revision == 0


async def test_a_round_starts_the_endpoint_reported_slowest_first(
    canary_env: FleetHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With one probe at a time, the endpoint whose listed median latency is the highest is
    probed first although its tag sorts last; the summary still lists endpoints by tag."""
    monkeypatch.setenv("CANARY_PROBE__CONCURRENCY", "1")
    monkeypatch.setenv("CANARY_CONTROL_PROVIDERS", "")
    model = "test/slowest-first"
    slow = {"ttft_s": 1.2, "tokens_per_s": 100, "jitter": 0.0}  # listed p50 latency 1.2 s
    load_model(
        canary_env,
        model,
        [endpoint("a/fp8"), endpoint("b/fp8"), endpoint("z-slow/fp8", timing=slow)],
    )
    canary_env.clear_requests()
    summary = await _round(model, T0)
    probed = [r["tag"] for r in sorted(canary_env.requests(), key=lambda r: r["ts"])
              if r["model"] == model and r["tag"]]  # fmt: skip
    assert probed[0] == "z-slow/fp8", probed[:5]
    assert [row[0] for row in summary.endpoints] == ["a/fp8", "b/fp8", "z-slow/fp8"]


async def test_o1_discovery_failure_fails_the_run_and_changes_no_state(
    canary_env: FleetHandle,
) -> None:
    """An unknown model fails the flow run visibly; no quarantine state is written."""
    state = await canary_round(model="nobody/nothing", at=T0, return_state=True)
    assert state.is_failed()
    assert "nobody/nothing" in (state.message or "")
    assert (await aload_state("nobody/nothing")).revision == 0
