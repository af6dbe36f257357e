"""The automation of SPEC O8 on Prefect's real API (the test harness runs its triggers and
actions services): `canary serve`'s deployments declare it, once however often they are
applied; a provider the real gateway finds suspect from production traffic sends the event
`canary.gateway.provider.suspect`, and the automation creates a triage run of that endpoint
and the contract of its reason, carrying the evidence, with the automation as its creator.
(The run itself, served and finished, is the slow end-to-end test in
test_passive_end_to_end.py and `scale/passive_demo.py`.)"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any

import httpx
from prefect import get_client
from prefect.client.schemas.filters import (
    DeploymentFilter,
    DeploymentFilterId,
)
from prefect.events.actions import RunDeployment
from prefect.events.schemas.deployment_triggers import (
    DeploymentEventTrigger,
    DeploymentTriggerTypes,
)
from pydantic import TypeAdapter

from deployments.local import TRIAGE_AUTOMATION, build_deployments, deployment_specs
from ground.settings import GatewayConfig, Settings
from routing.events import EventLog
from routing.gateway import create_app
from routing.router import Router
from routing.suspect_events import SUSPECT_EVENT, emit_suspect
from tests.fixtures.fleet import FleetHandle
from tests.fixtures.routing import ServedApp, make_router, routing_catalog
from tests.routing.test_passive_gateway import KEY, MODEL, load, spread_scenario

MODELS = ["acme/alpha"]


async def apply_triage() -> Any:
    """The triage deployment as `canary serve` applies it; its id."""
    settings = Settings(_env_file=None, models=MODELS)
    # built as `canary serve` builds them: outside an event loop (to_deployment is sync there)
    deployments = await asyncio.to_thread(build_deployments, settings)
    [triage] = [d for d in deployments if d.name == "triage"]
    return await triage.aapply()


async def test_o8_the_deployments_declare_the_triage_automation_once() -> None:
    """The spec's trigger is valid for Prefect's own deployment-trigger schema (what
    `prefect deploy` reads from prefect.yaml); applying the triage deployment twice leaves
    one automation, whose action runs that deployment with parameters from the event."""
    [spec] = [s for s in deployment_specs(Settings(_env_file=None)) if s["name"] == "triage"]
    [trigger] = TypeAdapter(list[DeploymentTriggerTypes]).validate_python(spec["triggers"])
    assert isinstance(trigger, DeploymentEventTrigger) and trigger.expect == {SUSPECT_EVENT}


async def test_o8_applying_twice_leaves_one_automation(prefect_api: None) -> None:
    """Idempotent: deployments delete the automations they own and create them again."""
    deployment_id = await apply_triage()
    assert await apply_triage() == deployment_id
    async with get_client() as client:
        found = await client.read_automations_by_name(TRIAGE_AUTOMATION)
    assert len(found) == 1
    [action] = found[0].actions
    assert isinstance(action, RunDeployment) and action.deployment_id == deployment_id
    assert action.parameters is not None
    assert action.parameters["provider"] == "{{ event.resource['canary.endpoint'] }}"


async def triage_runs(deployment_id: Any, since: datetime, provider: str) -> list[Any]:
    """Flow runs of the triage deployment created since `since` for `provider`."""
    async with get_client() as client:
        runs = await client.read_flow_runs(
            deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment_id]))
        )
    return [
        r
        for r in runs
        if r.created and r.created >= since and r.parameters.get("provider") == provider
    ]


def _router(fleet: FleetHandle, ledger_url: str) -> Router:
    router = make_router(
        fleet.base_url, fleet.key, listed=True, events=EventLog(ledger_url),
        catalog=routing_catalog(chat={"route_groups": ["text"]}),
    )  # fmt: skip
    router.passive.announce = emit_suspect
    return router


async def test_o8_a_suspect_provider_starts_a_triage_run_through_the_automation(
    prefect_api: None, fleet: FleetHandle, ledger_url: str
) -> None:
    """AlphaB starts corrupting 30% of its starts under load; the gateway ejects it and
    sends the event; within seconds the automation has created a triage run of alpha-b for
    the start contract with the gateway's numbers as its evidence, created by the automation
    (`created_by`: type AUTOMATION, the automation's name)."""
    deployment_id = await apply_triage()
    since = datetime.now(UTC)
    fleet.load(spread_scenario())
    router = _router(fleet, ledger_url)
    app = create_app(router, GatewayConfig(keys=[KEY], events_flush_s=0.05))
    async with ServedApp(app) as s, httpx.AsyncClient(base_url=s.url, timeout=30) as http:
        await load(http, 40)
        fleet.load(spread_scenario({"alpha-b": [{"kind": "stray_start", "rate": 0.3}]}))
        for _ in range(50):
            if router.passive.ejections.ejected(MODEL, time.monotonic()):
                break
            await load(http, 4)
    ejected_at = time.monotonic()
    runs: list[Any] = []
    while not runs and time.monotonic() - ejected_at < 30:
        await asyncio.sleep(0.5)
        runs = await triage_runs(deployment_id, since, "alpha-b")
    assert len(runs) == 1, "the automation started no triage run within 30 s"
    run = runs[0]
    assert run.parameters["model"] == MODEL and run.parameters["contracts"] == ["start"]
    assert run.parameters["evidence"].startswith("production: ")
    assert "rejected for a stray start, peers 0 of" in run.parameters["evidence"]
    assert run.created_by is not None and run.created_by.type == "AUTOMATION"
    assert run.created_by.display_value == TRIAGE_AUTOMATION
    print(f"\ntriage run created {time.monotonic() - ejected_at:.1f} s after the ejection")
    async with get_client() as client:
        await client.delete_flow_run(run.id)  # nothing serves the deployment here
