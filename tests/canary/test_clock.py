"""The model's logical clock: an `--at` in the future is refused before any flow run
(unless `--allow-future`), a replay of the past still works on a fresh model, a stored
last round in the future fails later rounds loudly, and `canary clock reset` (audited
like `lift`) repairs it. Pure rules first, then the CLI on the fleet and Prefect's API."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prefect import get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName
from typer.testing import CliRunner

from canary.cli import app
from ground.settings import load_settings
from quarantine.adapters.ledger import Ledger
from quarantine.adapters.store import aload_state
from quarantine.clock import ClockNotAheadError, clock_ahead, future_at, reset_clock
from quarantine.models import Mode, ModelState, ProviderState, RoundNote
from quarantine.verdicts import RoundVerdict
from tests.fixtures.canary_env import STRAY, endpoint, load_model
from tests.fixtures.fleet import FleetHandle

NOW = datetime(2026, 11, 10, 12, 0, tzinfo=UTC)
SLOT = timedelta(minutes=30)


def test_future_at_allows_one_slot_of_slack() -> None:
    """Up to one half-hour slot ahead is fine (a round at the slot boundary); more is not."""
    assert not future_at(NOW + SLOT, NOW)
    assert future_at(NOW + SLOT + timedelta(seconds=1), NOW)
    assert not future_at(NOW - timedelta(days=30), NOW)


def _state_with_future_round() -> ModelState:
    future = NOW + timedelta(days=365)
    notes = [
        RoundNote(round_id="r-past", at=NOW - SLOT, verdict=RoundVerdict.FAILED),
        RoundNote(round_id="r-future", at=future, verdict=RoundVerdict.FAILED),
    ]
    return ModelState(
        model="a/b",
        mode=Mode.ENFORCE,
        revision=3,
        last_round_id="r-future",
        last_round_at=future,
        providers={
            "bad/fp8": ProviderState(
                suspended_at=future,
                suspended_until=future + timedelta(days=1),
                suspensions=1,
                recent_rounds=notes,
            ),
            "ok/fp8": ProviderState(recent_rounds=notes[:1]),
        },
    )


def test_reset_clock_rewinds_to_the_latest_real_round_and_moves_future_suspensions() -> None:
    """The last round becomes the latest one at or before now; a suspension that started in
    the future starts now with its length kept; one audited decision says what changed."""
    state = _state_with_future_round()
    assert clock_ahead(state, NOW)
    new, [decision] = reset_clock(state, now=NOW, reason="typo in --at", actor="ops")
    assert new.last_round_at == NOW - SLOT and new.last_round_id == "r-past"
    assert not clock_ahead(new, NOW)
    bad = new.providers["bad/fp8"]
    assert bad.suspended_at == NOW and bad.suspended_until == NOW + timedelta(days=1)
    assert decision.kind.value == "clock_reset" and decision.actor == "ops"
    assert decision.round_ids == ("r-future",)
    assert any("bad/fp8" in e for e in decision.evidence)
    assert state.last_round_id == "r-future"  # the input is not mutated


def test_reset_clock_refuses_when_nothing_is_in_the_future() -> None:
    """A clock that is not ahead is not reset (a clear error, nothing changed)."""
    state = _state_with_future_round().model_copy(update={"last_round_at": NOW - SLOT})
    with pytest.raises(ClockNotAheadError, match="not in the future"):
        reset_clock(state, now=NOW, reason="r", actor="a")
    with pytest.raises(ValueError, match="reason"):
        reset_clock(_state_with_future_round(), now=NOW, reason=" ", actor="a")


# ---- through the CLI ------------------------------------------------------------------


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


async def _runs(model: str) -> list[Any]:
    async with get_client() as client:
        return await client.read_flow_runs(
            flow_run_filter=FlowRunFilter(name=FlowRunFilterName(like_=model))
        )


def test_future_at_is_refused_and_clock_reset_repairs_a_model(canary_env: FleetHandle) -> None:
    """`--at` a day ahead: exit 2, one line, no flow run. With --allow-future it applies,
    and a round now then fails (exit 1) naming the repair; `canary clock reset` (a flow
    run, a ledger decision) brings the model back and the next round runs."""
    model = "test/clock-future"
    load_model(canary_env, model, [endpoint("a/fp8"), endpoint("b/fp8"), endpoint("c/fp8")])
    now = datetime.now(UTC)
    ahead = (now + timedelta(days=1)).isoformat()

    code, out = _run("round", "--model", model, "--at", ahead)
    assert code == 2 and len(out.strip().splitlines()) == 1, out
    assert "--allow-future" in out
    assert asyncio.run(_runs(model)) == []

    code, out = _run("round", "--model", model, "--at", ahead, "--allow-future")
    assert code == 0, out
    code, out = _run("round", "--model", model)
    assert code == 1 and len(out.strip().splitlines()) == 1, out
    assert "canary clock reset" in out
    assert asyncio.run(aload_state(model)).revision == 1

    code, out = _run("clock", "reset", "--model", model, "--reason", "typo in --at")
    assert code == 0, out
    assert json.loads(out)["kind"] == "clock_reset"
    code, out = _run("clock", "reset", "--model", model, "--reason", "again")
    assert code == 1 and "not in the future" in out, out

    code, out = _run("round", "--model", model)
    assert code == 0, out
    state = asyncio.run(aload_state(model))
    assert state.revision == 3 and state.last_round_at is not None
    assert abs(state.last_round_at - datetime.now(UTC)) < timedelta(minutes=5)
    ledger = Ledger(load_settings().resolved_ledger_url)
    assert "clock_reset" in set(ledger.decisions_frame(model)["kind"])
    ledger.close()


def test_replaying_the_past_works_on_a_fresh_model(canary_env: FleetHandle) -> None:
    """Replays of the past through --at keep working (two past slots suspend a bad host)."""
    model = "test/clock-replay"
    load_model(
        canary_env,
        model,
        [endpoint("a/fp8"), endpoint("b/fp8"), endpoint("bad/fp8", defects=STRAY)],
    )
    t0 = datetime(2026, 10, 1, tzinfo=UTC)
    for k in range(2):
        at = (t0 + k * SLOT).isoformat()
        code, out = _run("round", "--model", model, "--mode", "enforce", "--at", at)
        assert code == 0, out
    assert "suspended bad/fp8" in out
