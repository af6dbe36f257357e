"""Admin functions the CLI and admin flows call (SPEC Q3, Q7, Q8, O4), on Prefect's harness."""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path

import pytest

from ground.settings import load_settings
from quarantine.adapters import admin
from quarantine.adapters.ignore import aignore_list
from quarantine.adapters.incidents import aadd_runtime_exclusion, aremove_runtime_exclusion
from quarantine.adapters.ledger import Ledger
from quarantine.adapters.store import aload_state, aupdate_state
from quarantine.errors import NotSuspendedError, UnknownModelError, UnknownTagError
from quarantine.models import Mode
from quarantine.verdicts import RoundVerdict
from tests.fixtures.quarantine_support import DAY, HALF_HOUR, T0, C, F, run

pytestmark = pytest.mark.usefixtures("prefect_api")
HOUR = timedelta(hours=1)


def new_model() -> str:
    return f"test/{uuid.uuid4().hex[:10]}"


async def seeded(mode: Mode = Mode.ENFORCE) -> str:
    """A model with `a` suspended (or shadow-suspended), `b` clean, `c` with one failure."""
    model = new_model()
    await aupdate_state(
        model,
        lambda s: run([{"a": F, "b": C, "c": C}, {"a": F, "b": C, "c": F}], state=s, mode=mode),
    )
    return model


def last(round_id: str, verdict: RoundVerdict, reasons: list[str]) -> dict:
    why = f"failed: {', '.join(reasons)}" if verdict is F else verdict.value
    return {
        "round_id": round_id,
        "at": (T0 + HALF_HOUR).isoformat(),
        "verdict": verdict.value,
        "reasons": reasons,
        "unjudged": [],
        "why": why,
    }


async def test_q8_status_json_has_the_documented_shape() -> None:
    """Q8/O4: status lists each endpoint's state, end, streaks, rung, the layer and reason
    keeping it out of traffic, its last round (with what it could not judge and why, C5) and
    the contracts it is held to, plus the ignore tags; the refusal contract's standing and
    the day's bill (C13) follow."""
    model = await seeded()
    status = await admin.astatus(model, T0 + HOUR)
    data = status.to_json()
    refusal, bill = data.pop("refusal"), data.pop("bill")
    assert refusal == {"line": "refusal contract: not probed yet", "probe": None,
                       "controls_missing_since": None}  # fmt: skip
    assert bill["day"] == str(T0.date()) and bill["spent_usd"] == 0.0
    assert bill["rounds_per_day"] == 48 and bill["forecast_usd"] == 0.0
    assert data == {
        "model": model,
        "mode": "enforce",
        "providers": {
            "a": {
                "state": "suspended",
                "suspended_until": (T0 + HALF_HOUR + DAY).isoformat(),
                "consecutive_failed_rounds": 0,
                "consecutive_clean_rounds": 0,
                "suspensions": 1,
                "layer": "canary",
                "reason": "start:stray_prefix",
                "last_round": last("r1", F, ["start:stray_prefix"]),
                "held_to": [],
            },
            "b": {
                "state": "active",
                "suspended_until": None,
                "consecutive_failed_rounds": 0,
                "consecutive_clean_rounds": 2,
                "suspensions": 0,
                "layer": None,
                "reason": "",
                "last_round": last("r1", C, []),
                "held_to": [],
            },
            "c": {
                "state": "active",
                "suspended_until": None,
                "consecutive_failed_rounds": 1,
                "consecutive_clean_rounds": 0,
                "suspensions": 0,
                "layer": None,
                "reason": "",
                "last_round": last("r1", F, ["start:stray_prefix"]),
                "held_to": [],
            },
        },
        "ignore": ["a"],
        "warnings": [],
    }


async def test_q3_status_shows_shadow_suspensions_in_observe_mode() -> None:
    """Q3: in observe mode the endpoint is shadow-suspended and not in the ignore list."""
    model = await seeded(Mode.OBSERVE)
    data = (await admin.astatus(model, T0 + HOUR)).to_json()
    assert data["mode"] == "observe"
    assert data["providers"]["a"]["state"] == "shadow-suspended"
    assert data["ignore"] == []


async def test_q5_status_after_the_end_shows_active_even_before_the_next_round() -> None:
    """Q5: once the suspension time is up the status (and ignore list) say active at once."""
    model = await seeded()
    data = (await admin.astatus(model, T0 + 2 * DAY)).to_json()
    assert data["providers"]["a"]["state"] == "active" and data["ignore"] == []


async def test_q8_lift_updates_state_and_ledger(tmp_path: Path) -> None:
    """Q8: a manual lift ends the suspension, bumps the revision and is recorded in the ledger."""
    model = await seeded()
    settings = load_settings(home=tmp_path)
    before = await aload_state(model)
    decision = await admin.alift(
        model, "a", "fixed upstream", "alice", T0 + HOUR, settings=settings
    )
    assert (decision.kind.value, decision.actor, decision.reason) == (
        "lifted",
        "alice",
        "fixed upstream",
    )
    after = await aload_state(model)
    assert after.revision == before.revision + 1
    assert after.providers["a"].suspended_until is None
    assert (await aignore_list(model, T0 + HOUR)) == []
    frame = Ledger(settings.resolved_ledger_url).decisions_frame(model)
    assert list(frame["kind"]) == ["lifted"] and list(frame["actor"]) == ["alice"]


@pytest.mark.parametrize(
    ("model_kind", "tag", "error", "message"),
    [
        ("unknown", "a", UnknownModelError, "no quarantine state stored"),
        ("seeded", "zz", UnknownTagError, "no endpoint 'zz'"),
        ("seeded", "b", NotSuspendedError, "not suspended"),
    ],
    ids=["unknown-model", "unknown-tag", "not-suspended"],
)
async def test_q8_bad_lifts_are_clear_errors_without_state_change(
    tmp_path: Path, model_kind: str, tag: str, error: type[Exception], message: str
) -> None:
    """Q8: unknown model, unknown tag, or an endpoint that is not suspended: clear error, no change."""
    model = await seeded() if model_kind == "seeded" else new_model()
    before = await aload_state(model)
    settings = load_settings(home=tmp_path)
    with pytest.raises(error, match=message):
        await admin.alift(model, tag, "why", "alice", T0 + HOUR, settings=settings)
    assert await aload_state(model) == before
    assert not (tmp_path / "ledger.db").exists()


async def test_o4_status_of_an_unknown_model_is_a_clear_error() -> None:
    """O4: asking for the status of a model without state names the model."""
    model = new_model()
    with pytest.raises(UnknownModelError, match=model):
        await admin.astatus(model, T0)


async def test_q7b_admin_exclusions_reach_the_status_ignore_list() -> None:
    """Q7b/O4: an exclusion added by an admin is in the next status; removing it takes it out."""
    model = await seeded()
    await aadd_runtime_exclusion(
        model, "b", reason="incident 7", author="ops", until=T0 + DAY, now=T0
    )
    assert (await admin.astatus(model, T0 + HOUR)).to_json()["ignore"] == ["a", "b"]
    await aremove_runtime_exclusion(model, "b", actor="ops", now=T0 + 2 * HOUR)
    assert (await admin.astatus(model, T0 + 2 * HOUR)).to_json()["ignore"] == ["a"]
