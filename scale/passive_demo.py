"""Production traffic as evidence, end to end (SPEC O8, issue 25): one provider starts
corrupting reply starts under load; the gateway marks it suspect and ejects it; the Prefect
automation declared with the deployments starts a triage run of it, which `canary serve`
runs; the next round of the model shows the production evidence. It prints the times.

What it starts (127.0.0.1, all stopped at the end, whatever happened), unless given:
  1. a local Prefect server on SQLite under a temporary CANARY_HOME (`--api-url` reuses one:
     the slow test passes the test harness's);
  2. the fleet (`canary fleet serve`) serving the shipped routes' models, the watched model
     with `--providers` equal providers load-balanced by price as OpenRouter does;
  3. `canary serve` (the deployments and their automation; the runner polls every second);
  4. `canary gateway serve` (the quarantine's provider.ignore and the suspect event through
     the same Prefect API, events into the same ledger as the canary's).

Then a load generator sends streaming chat through the gateway (`--clients` at a time):
a clean warm-up, then the fleet is switched at runtime (`/_fleet/scenario`: RNGs and
counters start again, the defect by rate) so one provider corrupts `--rate` of its starts.
It measures the time (and requests) from the switch to the gateway's ejection (/metrics),
to the triage flow run the automation created (its `created_by` names the automation), and
to that run's end; then runs the model's round deployment once and reads its decisions
artifact for the production evidence.

    .venv/bin/python -m scale.passive_demo [--providers 4] [--rate 0.3] [--keep]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from ground.slugs import model_slug
from scale.slot_test import Processes, free_port

ROOT = Path(__file__).resolve().parents[1]
MODEL = "meta-llama/llama-3.3-70b-instruct"  # the shipped chat contract's first route
OTHERS = ("qwen/qwen-2.5-72b-instruct", "google/gemini-2.0-flash")
KEY = "demo-gateway-key"
BAD = "prov-b/fp8"
FAST = {"ttft_s": 0.3, "tokens_per_s": 400.0, "jitter": 0.1}


def _endpoint(tag: str, defects: list[dict[str, Any]]) -> dict[str, Any]:
    name = "".join(p.title() for p in tag.split("/")[0].split("-"))
    return {"tag": tag, "provider_name": name, "timing": dict(FAST), "defects": defects,
            "pricing": {"prompt": "0.0000002", "completion": "0.0000004"}}  # fmt: skip


def demo_scenario(providers: int, rate: float | None = None, model: str = MODEL) -> dict[str, Any]:
    """The watched model with `providers` equal providers (the second one corrupting `rate` of
    its starts when given) and one provider for each other model of the shipped routes."""
    tags = [f"prov-{chr(97 + i)}/fp8" for i in range(providers)]
    defect = [{"kind": "stray_start", "rate": rate}] if rate else []
    watched = [_endpoint(t, defect if t == BAD else []) for t in tags]
    models = [{"id": model, "load_balance": "price", "endpoints": watched}]
    models += [
        {"id": m, "endpoints": [_endpoint(f"solo-{i}/fp8", [])]} for i, m in enumerate(OTHERS)
    ]
    return {"name": "passive-demo", "seed": 11, "time_scale": 0.1, "models": models}


def contracts_for(model: str, dest: Path) -> Path:
    """The shipped contracts with the chat contract's first route serving `model`."""
    import yaml

    from routing.routes import DEFAULT_DIR

    shutil.copytree(DEFAULT_DIR, dest, dirs_exist_ok=True)
    routes = yaml.safe_load((dest / "routes.yaml").read_text())
    for route in routes["routes"]:
        if route["model"] == MODEL:
            route["model"] = model
    (dest / "routes.yaml").write_text(yaml.safe_dump(routes, sort_keys=False))
    return dest


def child_env(
    api_url: str, fleet_url: str, fleet_key: str, home: Path, model: str = MODEL
) -> dict[str, str]:
    """What `canary serve`, the gateway, the rounds and the triage runs read."""
    return {
        **os.environ,
        "PREFECT_API_URL": api_url,
        "PREFECT_RUNNER_POLL_FREQUENCY": "1",
        "CANARY_HOME": str(home),
        "CANARY_BASE_URL": f"{fleet_url}/api/v1",
        "CANARY_API_KEY": fleet_key,
        "CANARY_MODELS": model,
        "CANARY_MODE": "observe",
        "CANARY_GATEWAY__KEYS": KEY,
        "CANARY_NOTIFICATION_BLOCK": "",
        "CANARY_BLIND_TRANSPORT_SHARE": "1.0",
        "PYTHONUNBUFFERED": "1",
    }


@dataclass
class Timeline:
    """Seconds from the defect's start (the fleet switched), and what was checked."""

    model: str = MODEL
    warmup_requests: int = 0
    sent: int = 0
    eject_requests: int | None = None
    ejected_s: float | None = None
    triage_created_s: float | None = None
    triage_started_s: float | None = None
    triage_ended_s: float | None = None
    triage_state: str | None = None
    triage: dict[str, Any] = field(default_factory=dict)
    round_state: str | None = None
    round_production: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the gateway showed when it timed out

    def lines(self) -> list[str]:
        def s(x: float | None) -> str:
            return "-" if x is None else f"{x:.1f} s"

        return [
            f"defect -> ejection        {s(self.ejected_s)} ({self.eject_requests} requests)",
            f"defect -> triage created  {s(self.triage_created_s)} (by {self.triage.get('created_by')})",
            f"defect -> triage started  {s(self.triage_started_s)}",
            f"defect -> triage ended    {s(self.triage_ended_s)} ({self.triage_state})",
            f"triage parameters         {self.triage.get('parameters')}",
            f"next round                {self.round_state}; production lines:",
            *(f"  {line}" for line in self.round_production),
            *self.notes,
        ]


async def _one(http: httpx.AsyncClient) -> None:
    body = {"model": "chat", "stream": True,
            "messages": [{"role": "user", "content": "Continue the scene: the lantern flickers."}]}  # fmt: skip
    async with http.stream("POST", "/v1/chat/completions", json=body,
                           headers={"Authorization": f"Bearer {KEY}"}) as resp:  # fmt: skip
        async for _ in resp.aiter_lines():
            pass


class Load:
    """A load generator: `clients` workers sending streaming chat until stopped."""

    def __init__(self, http: httpx.AsyncClient, clients: int) -> None:
        self.http, self.sent, self.errors = http, 0, 0
        self.stopping = asyncio.Event()
        self.tasks = [asyncio.create_task(self._worker()) for _ in range(clients)]

    async def _worker(self) -> None:
        while not self.stopping.is_set():
            try:
                await _one(self.http)
            except httpx.HTTPError:
                self.errors += 1
            self.sent += 1

    async def stop(self) -> None:
        self.stopping.set()
        await asyncio.gather(*self.tasks, return_exceptions=True)


def ejected_in(metrics: str, model: str, tag_name: str) -> bool:
    pattern = rf'canary_router_provider_ejected\{{model="{re.escape(model)}",provider="{tag_name}"\}} 1\.0'
    return re.search(pattern, metrics) is not None


async def _triage_run(since: Any) -> Any | None:
    """The triage run the automation created since `since`, if any."""
    from prefect import get_client

    async with get_client() as client:
        deployment = await client.read_deployment_by_name("triage/triage")
        from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId

        runs = await client.read_flow_runs(
            deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment.id]))
        )
    mine = [r for r in runs if r.created and r.created >= since and r.created_by
            and r.created_by.type == "AUTOMATION"]  # fmt: skip
    return mine[0] if mine else None


async def _watch(t: Timeline, http: httpx.AsyncClient, load: Load, t0: float, since: Any,
                 timeout_s: float) -> None:  # fmt: skip
    """Poll the gateway's /metrics and the Prefect API until the triage run has ended."""
    bad_name = "".join(p.title() for p in BAD.split("/")[0].split("-"))
    run, metrics = None, ""
    while time.monotonic() - t0 < timeout_s:
        await asyncio.sleep(0.25)
        now = time.monotonic() - t0
        if t.ejected_s is None:
            metrics = (await http.get("/metrics")).text
        if t.ejected_s is None and ejected_in(metrics, t.model, bad_name):
            t.ejected_s, t.eject_requests = now, load.sent - t.warmup_requests
        if t.ejected_s is None:
            continue
        run = await _triage_run(since)
        if run is None:
            continue
        t.triage_created_s = t.triage_created_s or now
        if not load.stopping.is_set():
            await load.stop()  # the evidence is in: leave the machine to the triage run
        if run.start_time and t.triage_started_s is None:
            t.triage_started_s = now
        if run.state and run.state.is_final():
            t.triage_ended_s, t.triage_state = now, run.state.name
            t.triage = {"parameters": run.parameters, "id": str(run.id),
                        "created_by": run.created_by.display_value if run.created_by else None}  # fmt: skip
            return
    t.notes = [f"timed out after {timeout_s:.0f} s; {load.sent} requests, {load.errors} errors"]
    t.notes += [
        line for line in metrics.splitlines() if bad_name in line and "_created" not in line
    ]


async def _next_round(t: Timeline) -> None:
    """Run the model's round deployment once (what its schedule runs) and read the
    production evidence in its decisions artifact."""
    from prefect import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        ArtifactFilterKey,
    )
    from prefect.deployments import arun_deployment

    run = await arun_deployment(f"canary-round/round-{model_slug(t.model)}", timeout=240)
    t.round_state = run.state.name if run.state else None
    async with get_client() as client:
        artifacts = await client.read_artifacts(artifact_filter=ArtifactFilter(
            key=ArtifactFilterKey(any_=[f"canary-decisions-{model_slug(t.model)}"]),
            flow_run_id=ArtifactFilterFlowRunId(any_=[run.id]),
        ))  # fmt: skip
    text = "\n".join(str(a.data) for a in artifacts)
    t.round_production = [
        line for line in text.splitlines() if "production:" in line or "suspect (" in line
    ]


async def run_scenario(api_url: str, fleet: Any, home: Path, *, model: str = MODEL,
                       providers: int = 4, rate: float = 0.3, clients: int = 4,
                       warmup: int = 60, timeout_s: float = 240.0) -> Timeline:  # fmt: skip
    """The whole path (see the module docstring) against the Prefect API at `api_url` and
    the running fleet `fleet` (a tests.fixtures.fleet.FleetHandle); a `model` other than the
    shipped routes' gets the shipped contracts with its route (`contracts_for`)."""
    from datetime import UTC, datetime

    from prefect.settings import PREFECT_API_URL, temporary_settings

    procs = Processes(home)
    env = child_env(api_url, fleet.root_url, fleet.key, home, model)
    fleet.load(demo_scenario(providers, model=model))
    t = Timeline(model=model)
    contracts = None if model == MODEL else contracts_for(model, home / "contracts")
    try:
        with temporary_settings(updates={PREFECT_API_URL: api_url}):
            gateway_url = await _start(procs, env, home, contracts)
            async with httpx.AsyncClient(base_url=gateway_url, timeout=60) as http:
                load = Load(http, clients)
                while load.sent < warmup:
                    await asyncio.sleep(0.1)
                t.warmup_requests = load.sent
                since, t0 = datetime.now(UTC), time.monotonic()
                fleet.load(demo_scenario(providers, rate, model))  # the defect starts now
                try:
                    await _watch(t, http, load, t0, since, timeout_s)
                finally:
                    await load.stop()
                    t.sent = load.sent
            if t.triage_state is not None:
                await _next_round(t)
    finally:
        procs.stop_all()
    return t


async def _start(procs: Processes, env: dict[str, str], home: Path, contracts: Path | None) -> str:
    """`canary serve` and `canary gateway serve`; the gateway's URL once the triage
    deployment and its automation exist and the gateway answers."""
    from prefect import get_client

    from deployments.local import TRIAGE_AUTOMATION

    procs.start("serve", [sys.executable, "-m", "canary.cli", "serve"], env)
    port = free_port()
    extra = ["--contracts", str(contracts)] if contracts is not None else []
    procs.start("gateway", [sys.executable, "-m", "canary.cli", "gateway", "serve",
                            "--port", str(port), *extra], env)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        async with get_client() as client:
            found = await client.read_automations_by_name(TRIAGE_AUTOMATION)
        try:
            up = httpx.get(f"{url}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            up = False
        if found and up:
            return url
    raise RuntimeError(f"serve or gateway did not come up; logs in {home}:\n"
                       + procs.log("serve")[-2000:] + procs.log("gateway")[-2000:])  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--providers", type=int, default=4)
    parser.add_argument("--rate", type=float, default=0.3)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument(
        "--api-url", default=None, help="a running Prefect API (else a local server)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary CANARY_HOME")
    args = parser.parse_args()
    from ground.prefect_server import start_local_server, stop_pid
    from ground.settings import Settings
    from tests.fixtures.fleet import start_fleet, stop_fleet

    home = Path(tempfile.mkdtemp(prefix="passive-demo-"))
    server = None
    if args.api_url is None:
        settings = Settings(_env_file=None, home=home, prefect_port=free_port())
        server = start_local_server(settings)
    api_url = args.api_url or server.api_url  # type: ignore[union-attr]
    fleet = start_fleet()
    try:
        t = asyncio.run(run_scenario(api_url, fleet, home, providers=args.providers,
                                     rate=args.rate, clients=args.clients))  # fmt: skip
    finally:
        stop_fleet(fleet)
        if server is not None and server.pid is not None:
            stop_pid(server.pid)
    print("\n".join(t.lines()))
    if args.keep:
        print(f"logs and ledger in {home}")
    else:
        shutil.rmtree(home, ignore_errors=True)
    ok = t.ejected_s is not None and t.triage_state == "Completed" and bool(t.round_production)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
