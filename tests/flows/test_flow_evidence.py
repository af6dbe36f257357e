"""No clean verdict without evidence (SPEC Q5, C5) through real canary rounds: a suspended host
is not reinstated early on rounds that could not judge it (a control that stopped filtering,
a model-level start style), a model without positive controls says the refusal contract is
unverified and alerts once, and what a host is held to follows its listing. Real fleet over
loopback, Prefect's test harness, real SQLite."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prefect import get_client
from prefect.artifacts import Artifact
from typer.testing import CliRunner

from canary.cli import app
from flows.canary_round import RoundSummary, canary_round
from flows.roundplan import round_index, start_locale
from ground.settings import DEFAULT_LOCALES
from ground.slugs import model_slug
from quarantine.adapters.store import aload_state
from tests.fixtures.canary_env import STRAY, endpoint, load_model
from tests.fixtures.fleet import FleetHandle

HALF_HOUR = timedelta(minutes=30)
WALL = [{"kind": "policy_filter", "rate": 1.0, "modes": ["refusal"]}]
QUOTED = [{"kind": "start_prefix", "rate": 1.0, "prefix": '"'}]
HEALTHY = [f"{name}/fp8" for name in ("alpha", "bravo", "charlie", "delta", "echo")]
NO_STRUCTURED = ["max_tokens", "temperature", "top_p", "stop", "seed"]


def _slot(locale: str, day: int) -> datetime:
    """The first half-hour slot of 2026-11-`day` whose shared start locale is `locale`."""
    at = datetime(2026, 11, day, tzinfo=UTC)
    while start_locale(DEFAULT_LOCALES, round_index(at)) != locale:
        at += HALF_HOUR
    return at


async def _cli(*args: str) -> Any:
    """`canary ...` in-process, off the test's event loop (the CLI runs its own)."""
    return await asyncio.to_thread(CliRunner().invoke, app, list(args))


async def _round(model: str, at: datetime) -> RoundSummary:
    summary = await canary_round(model=model, mode="enforce", at=at)
    assert isinstance(summary, RoundSummary)
    return summary


def _kinds(summary: RoundSummary) -> list[tuple[str, str]]:
    return sorted((d["kind"], d["tag"]) for d in summary.decisions)


async def _read_events(name: str, model: str) -> list[Any]:
    """The `name` events about `model` the API has stored so far."""
    from prefect.events.filters import EventFilter, EventNameFilter

    async with get_client() as client:
        page = await client.read_events(EventFilter(event=EventNameFilter(name=[name])), limit=50)
    return [e for e in page.events if e.resource.get("canary.model") == model]


async def _events_until_now(name: str, model: str) -> list[Any]:
    """Every `name` event about `model` emitted so far in this process: a marker event is
    emitted after them and, once the API has it, so has it every event emitted before it
    (one events client per process, sent and stored in order). A wait on that, not a sleep,
    shows that no further event came."""
    from prefect.events import emit_event

    marker = f"canary-tests.marker.{uuid.uuid4().hex}"
    emit_event(marker, resource={"prefect.resource.id": "canary-tests", "canary.model": model})
    for _ in range(300):
        if await _read_events(marker, model):
            return await _read_events(name, model)
        await asyncio.sleep(0.1)
    raise AssertionError(f"the marker event {marker} never reached the API")


@pytest.mark.slow
async def test_c5_q5_a_control_that_stops_filtering_never_reinstates_a_refusing_host_early(
    canary_env: FleetHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """C5/Q5: `wall` refuses and is suspended while the control filters; then the control
    stops filtering (the refusal probe is weak) and `wall` keeps refusing: two rounds later,
    which would reinstate it were they clean, it is still suspended with no clean round
    counted (before issue 23 its refusals counted as clean and it was reinstated after two).
    Once the control filters again and `wall` is fixed, two clean rounds reinstate it."""
    model = "test/evidence-weak"
    monkeypatch.setenv("CANARY_CONTROL_PROVIDERS", "ctl/fp8")
    healthy = [endpoint(t) for t in ("a/fp8", "b/fp8", "c/fp8")]

    def serve(control_filters: bool, wall_refuses: bool) -> None:
        ctl = endpoint("ctl/fp8", defects=WALL if control_filters else None)
        wall = endpoint("wall/fp8", defects=WALL if wall_refuses else None)
        load_model(canary_env, model, [*healthy, ctl, wall])

    serve(control_filters=True, wall_refuses=True)
    t0 = datetime(2026, 11, 6, tzinfo=UTC)
    await _round(model, t0)
    second = await _round(model, t0 + HALF_HOUR)
    assert ("suspended", "wall/fp8") in _kinds(second)

    serve(control_filters=False, wall_refuses=True)
    for n in range(2, 4):  # two unjudged rounds
        summary = await _round(model, t0 + n * HALF_HOUR)
        assert summary.weak_refusal_probe and summary.refusal_probe == "weak"
        assert _kinds(summary) == [], summary.decisions
        assert "refusal: weak probe (a positive control passed)" in summary.unjudged["wall/fp8"]
        rows = {tag: verdict for tag, _l, verdict, _w in summary.endpoints}
        assert rows["wall/fp8"] == "unjudged" and rows["a/fp8"] == "unjudged"
    state = await aload_state(model)
    wall = state.providers["wall/fp8"]
    assert wall.suspended(t0 + 3 * HALF_HOUR) and wall.consecutive_clean_rounds == 0
    assert "refusal: weak probe (a positive control passed)" in wall.recent_rounds[-1].unjudged
    status = await Artifact.aget(f"canary-status-{model_slug(model)}")
    assert status is not None and isinstance(status.data, str)
    assert "not judged: refusal: weak probe" in status.data
    assert "refusal contract: weak probe in the last round" in status.data
    decisions = await Artifact.aget(f"canary-decisions-{model_slug(model)}")
    assert decisions is not None and isinstance(decisions.data, str)
    assert "Refusal probe: **weak**" in decisions.data
    assert "| `wall/fp8` | not judged | " in decisions.data

    serve(control_filters=True, wall_refuses=False)
    first_clean = await _round(model, t0 + 4 * HALF_HOUR)
    assert ("reinstated_early", "wall/fp8") not in _kinds(first_clean)
    second_clean = await _round(model, t0 + 5 * HALF_HOUR)
    assert ("reinstated_early", "wall/fp8") in _kinds(second_clean)


@pytest.mark.slow
async def test_c5_q5_a_model_level_start_style_suspends_no_host_and_reinstates_none(
    canary_env: FleetHandle,
) -> None:
    """C5/Q5: a host suspended for stray starts, then every host (it included) opens with the
    same quote (a model-level finding): two rounds, which would reinstate it were they
    clean, suspend nobody and do not reinstate it early, since the start contract is
    unjudged for all (before issue 23 a model-level finding counted as clean). With the style
    gone, two clean rounds reinstate it."""
    model = "test/evidence-style"
    load_model(
        canary_env, model, [*(endpoint(t) for t in HEALTHY), endpoint("bad/fp8", defects=STRAY)]
    )
    t0 = _slot("en", 7)
    await _round(model, t0)
    second = await _round(model, t0 + HALF_HOUR)
    assert _kinds(second) == [("suspended", "bad/fp8")]

    load_model(canary_env, model, [endpoint(t, defects=QUOTED) for t in [*HEALTHY, "bad/fp8"]])
    for n in range(2, 4):  # two unjudged rounds
        summary = await _round(model, t0 + n * HALF_HOUR)
        assert _kinds(summary) == [], summary.decisions
        assert len(summary.findings) == 1 and "model-level: start:" in summary.findings[0]
        why = summary.unjudged["bad/fp8"]
        assert "start: model-level finding (most hosts share it)" in why, why
    bad = (await aload_state(model)).providers["bad/fp8"]
    assert bad.suspended(t0 + 3 * HALF_HOUR) and bad.consecutive_clean_rounds == 0

    load_model(canary_env, model, [endpoint(t) for t in [*HEALTHY, "bad/fp8"]])
    first_clean = await _round(model, t0 + 4 * HALF_HOUR)
    assert ("reinstated_early", "bad/fp8") not in _kinds(first_clean)
    second_clean = await _round(model, t0 + 5 * HALF_HOUR)
    assert ("reinstated_early", "bad/fp8") in _kinds(second_clean)


async def test_c5_without_a_positive_control_the_refusal_contract_is_unverified_and_alerts_once(
    canary_env: FleetHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """C5: a model with no positive control: every round's refusal probe is unverified (its
    results count), `canary status`, the status artifact and the decisions artifact say so,
    and one `canary.controls.missing` event goes out, not one per round. A control configured
    later verifies the probe and clears the memory."""
    model = "test/evidence-controls"
    load_model(canary_env, model, [endpoint(t) for t in ("a/fp8", "b/fp8", "c/fp8")])
    t0 = datetime(2026, 11, 8, tzinfo=UTC)
    for n in range(2):
        summary = await _round(model, t0 + n * HALF_HOUR)
        assert summary.refusal_probe == "unverified"
        assert {v for _t, _l, v, _w in summary.endpoints} == {"clean"}
    events = await _events_until_now("canary.controls.missing", model)
    assert len(events) == 1, [e.payload for e in events]
    assert "CANARY_CONTROL_PROVIDERS" in events[0].payload["reason"]
    state = await aload_state(model)
    assert state.controls_missing_since == t0

    out = await _cli("status", "--model", model, "--json")
    assert out.exit_code == 0, out.output
    refusal = json.loads(out.output)["refusal"]
    assert refusal["line"].startswith("refusal contract: unverified: no positive control")
    text = await _cli("status", "--model", model)
    assert "refusal contract: unverified" in " ".join(text.output.split())
    status = await Artifact.aget(f"canary-status-{model_slug(model)}")
    assert status is not None and "refusal contract: unverified" in str(status.data)

    monkeypatch.setenv("CANARY_CONTROL_PROVIDERS", "ctl/fp8")
    load_model(
        canary_env,
        model,
        [*(endpoint(t) for t in ("a/fp8", "b/fp8", "c/fp8")), endpoint("ctl/fp8", defects=WALL)],
    )
    third = await _round(model, t0 + 2 * HALF_HOUR)
    assert third.refusal_probe == "verified"
    assert (await aload_state(model)).controls_missing_since is None


async def test_c5_q5_held_contracts_follow_the_listing_at_first_sight_and_never_shrink(
    canary_env: FleetHandle,
) -> None:
    """C5/Q5: a host that never advertised structured output is not held to it and is
    clean; a host that stops advertising it stays held to it and is not judged on it, so it
    is not clean (nor frozen for ever). `canary status --json` shows what each is held to."""
    model = "test/evidence-held"
    never = endpoint("never/fp8", supported_parameters=NO_STRUCTURED)
    load_model(
        canary_env, model, [endpoint("a/fp8"), endpoint("b/fp8"), endpoint("drops/fp8"), never]
    )
    t0 = datetime(2026, 11, 9, tzinfo=UTC)
    first = await _round(model, t0)
    assert {v for _t, _l, v, _w in first.endpoints} == {"clean"}

    drops = endpoint("drops/fp8", supported_parameters=NO_STRUCTURED)
    load_model(canary_env, model, [endpoint("a/fp8"), endpoint("b/fp8"), drops, never])
    second = await _round(model, t0 + HALF_HOUR)
    rows = {tag: verdict for tag, _l, verdict, _w in second.endpoints}
    assert rows == {"a/fp8": "clean", "b/fp8": "clean", "drops/fp8": "unjudged",
                    "never/fp8": "clean"}  # fmt: skip
    assert second.unjudged == {"drops/fp8": ["structured: no longer advertised"]}

    out = await _cli("status", "--model", model, "--json")
    assert out.exit_code == 0, out.output
    providers = json.loads(out.output)["providers"]
    assert "structured" in providers["drops/fp8"]["held_to"]
    assert "structured" not in providers["never/fp8"]["held_to"]
    # every host is held to the stream contract (C12: no request of its own); tools only
    # where advertised (issue 22)
    assert providers["never/fp8"]["held_to"] == [
        "language",
        "latency",
        "refusal",
        "start",
        "stream",
    ]
    assert providers["drops/fp8"]["last_round"]["why"] == (
        "not judged: structured: no longer advertised"
    )
