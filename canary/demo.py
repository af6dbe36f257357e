"""`canary demo` (the README's main command, `make demo`): the whole product on
one machine with embedded defaults.

1. a fresh local Prefect server on SQLite (under `<CANARY_HOME>/demo`),
2. the `seed-incidents` fleet on loopback (24 endpoints: both incidents and most defect
   classes; the rest are in the `defect-zoo` scenario),
3. canary rounds in enforce mode at logical times t, t+30 min, t+60 min, ...,
   printing which hosts failed what and the resulting provider.ignore,
4. a recovery: the start-corrupting host is fixed in the fleet and is
   reinstated after two clean rounds,
5. the health report of the rounds (a flow run: HTML page with plots and a summary
   artifact),
6. what to look at in the UI, which stays up (`canary server stop` stops it; `--stop-ui`
   stops it at the end instead); the fleet is stopped.

Prefect's per-endpoint log lines stay out of the terminal (they are in the UI) unless
`--verbose`.

The first logical time is the next half-hour slot at which the locale rotation
gives the Portuguese-mixing host a Portuguese prompt, so the mixing incident
shows within the first rounds; the rotation itself is the production one.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from flows.roundplan import ROUND_SECONDS, next_slot_with_locale
from ground.prefect_server import LocalServer
from ground.settings import DEFAULT_MODEL, Settings

MIX_HOST = "mixhost/fp8"
FIXED_HOST = "startcorrupt/fp8"
CONTROL_HOST = "filterctl/fp8"


def free_port(preferred: int) -> int:
    for port in (preferred, *range(preferred + 1, preferred + 50)):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def first_round_time(tags: list[str], locales: list[str], now: datetime) -> datetime:
    """The next half-hour slot at which MIX_HOST is probed in pt-BR (if configured)."""
    slot = next_slot_with_locale(tags, locales, MIX_HOST, "pt-BR", now)
    return slot or datetime.fromtimestamp(
        (int(now.timestamp()) // ROUND_SECONDS + 1) * ROUND_SECONDS, UTC
    )


def _wait_http(url: str, timeout_s: float, headers: dict[str, str] | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1.0, headers=headers).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"{url} did not answer within {timeout_s:.0f} s")


def _say(text: str = "") -> None:
    print(text, flush=True)


def run_demo(
    settings: Settings, *, rounds_before_fix: int = 3, keep_ui: bool = True, verbose: bool = False
) -> int:
    from ground.prefect_server import start_local_server, stop_local_server, stop_pid

    home = demo_home(settings)
    demo_settings = settings.model_copy(update={"home": home})
    if stop_local_server(demo_settings):  # a UI left up by an earlier demo
        _say("[demo] stopped the Prefect server left up by the previous demo")
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    prefect_port = free_port(settings.prefect_port)
    fleet_port = free_port(8600)
    demo_settings = demo_settings.model_copy(update={"prefect_port": prefect_port})
    fleet_key = settings.fleet_key.get_secret_value()

    _say(f"[demo] starting a local Prefect server on SQLite ({home / 'prefect'}) ...")
    server = start_local_server(demo_settings)
    _say(f"[demo] Prefect UI: {server.ui_url}")
    fleet_log = (home / "fleet.log").open("wb")
    fleet = subprocess.Popen(
        [sys.executable, "-m", "canary.cli", "fleet", "serve", "--scenario", "seed-incidents",
         "--host", "127.0.0.1", "--port", str(fleet_port)],
        stdout=fleet_log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    base_url = f"http://127.0.0.1:{fleet_port}/api/v1"
    guide: list[str] = []
    try:
        _wait_http(f"{base_url}/models", 60)
        _say(f"[demo] seed-incidents fleet on {base_url}")
        os.environ.update(
            {
                "PREFECT_API_URL": server.api_url,
                "CANARY_HOME": str(home),
                "CANARY_BASE_URL": base_url,
                "CANARY_API_KEY": fleet_key,
                "CANARY_MODE": "enforce",
                "CANARY_CONTROL_PROVIDERS": CONTROL_HOST,
            }
        )
        os.environ.pop("OPENROUTER_API_KEY", None)
        guide = asyncio.run(_rounds(base_url, fleet_key, server, rounds_before_fix, verbose))
        return 0
    finally:
        stop_pid(fleet.pid)
        fleet_log.close()
        if keep_ui and guide:
            _say(
                f"\n[demo] the Prefect UI stays up at {server.ui_url}; stop it with: canary server stop"
            )
            for line in guide:
                _say(line)
        else:
            if server.pid is not None:
                stop_pid(server.pid)
            (home / "prefect" / "server.pid").unlink(missing_ok=True)
            _say("[demo] Prefect server stopped")


async def _rounds(
    base_url: str, key: str, server: LocalServer, rounds_before_fix: int, verbose: bool
) -> list[str]:
    """The rounds, the fix, the report; returns the closing guide's lines."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from canary.cli.tables import print_round, quiet_task_logs
    from flows.canary_round import canary_round
    from ground.settings import load_settings
    from probes.client import ProbeClient

    settings = load_settings()
    quiet_task_logs(verbose, also=() if verbose else ("canary.notify",))
    with temporary_settings(updates={PREFECT_API_URL: os.environ["PREFECT_API_URL"]}):
        async with ProbeClient.from_settings(settings) as client:
            tags = [e.tag for e in await client.discover(DEFAULT_MODEL)]
        at = first_round_time(tags, list(settings.locales), datetime.now(UTC))
        total = rounds_before_fix + 2
        last_run: str | None = None
        for n in range(total):
            if n == rounds_before_fix:
                _say(f"\n[demo] the operator of {FIXED_HOST} fixes it (fleet scenario updated)")
                await _fix_host(base_url, key, FIXED_HOST)
            _say(f"\n[demo] round {n + 1}/{total} at logical time {at:%Y-%m-%d %H:%M}Z")
            started = time.monotonic()
            state = await canary_round(  # the demo replays upcoming slots on purpose
                model=DEFAULT_MODEL, mode="enforce", at=at, allow_future=True, return_state=True
            )
            summary = await state.aresult(raise_on_failure=True)
            last_run = str(state.state_details.flow_run_id)
            print_round(summary)
            _say(f"[demo] round took {time.monotonic() - started:.1f} s")
            last_at = at
            at += timedelta(seconds=ROUND_SECONDS)
        report_path = await _report(last_at)
        guide = await _guide(server, last_run, report_path)
    from prefect.logging.handlers import APILogHandler

    await APILogHandler.aflush()  # ship the last run logs before the fleet goes away
    return guide


async def _report(last_at: datetime) -> Path:
    """The health report of the demo's rounds, as the daily report deployment makes it."""
    from flows.report import daily_report

    result = await daily_report(model=DEFAULT_MODEL, since_days=1, at=last_at)
    path = Path(result["html"])
    _say(f"\n[demo] health report: {path}")
    _say(f"       (figures next to it; rebuild with: canary report --model {DEFAULT_MODEL})")
    return path


async def _guide(server: LocalServer, flow_run_id: str | None, report_path: Path) -> list[str]:
    """The last lines: where each answer lives in the UI, with direct addresses."""
    ui_url = server.ui_url
    from prefect import get_client

    from flows.status_artifact import status_key
    from quarantine.adapters.store import BLOCK_TYPE_SLUG, block_name

    async with get_client() as client:
        block = await client.read_block_document_by_name(block_name(DEFAULT_MODEL), BLOCK_TYPE_SLUG)
    slug = block_name(DEFAULT_MODEL)
    lines = [
        "",
        f"[demo] what to look at in the Prefect UI ({ui_url}):",
        "  1. Who is out of traffic, until when and why: Blocks > Canary Quarantine State >",
        f"     {slug}   {ui_url}/blocks/block/{block.id}",
        "  2. The quarantine's history, one version per round, with the evidence: Artifacts >",
        f"     {status_key(DEFAULT_MODEL)}   {ui_url}/artifacts/key/{status_key(DEFAULT_MODEL)}",
    ]
    if flow_run_id:
        lines += [
            "  3. The last round: the graph's red 'verdict' task runs are the endpoints that",
            "     failed a contract (named after it); its Artifacts tab has the table (failures",
            "     first), the decisions with the numbers behind them and the failing transcripts:",
            f"     {ui_url}/runs/flow-run/{flow_run_id}",
        ]
    lines += [
        f"  4. Health over time (open in a browser, works offline): {report_path}",
        f"     and its summary: {ui_url}/artifacts/key/canary-report-{slug}",
        "  From a terminal (any shell): export CANARY_HOME="
        f"{os.environ.get('CANARY_HOME', '')} PREFECT_API_URL={server.api_url}",
        f"     canary status; canary history --provider {FIXED_HOST}; canary exclude list",
    ]
    return lines


async def _fix_host(base_url: str, key: str, tag: str) -> None:
    """Make `tag` healthy in the running fleet (drop its defects) via /_fleet/scenario."""
    root = base_url.rsplit("/api/v1", 1)[0]
    async with httpx.AsyncClient(timeout=10) as http:
        current: dict[str, Any] = (await http.get(f"{root}/_fleet/scenario")).json()
        scenario = current.get("scenario", current)
        for model in scenario["models"]:
            for endpoint in model["endpoints"]:
                for key in [k for k in endpoint if k.startswith("scripted_")]:
                    del endpoint[key]  # read-only figures GET adds; POST rejects them
                if endpoint["tag"] == tag:
                    endpoint["defects"] = []
        response = await http.post(f"{root}/_fleet/scenario", json={"scenario": scenario})
        response.raise_for_status()


def demo_home(settings: Settings) -> Path:
    """Where the demo keeps its Prefect server and ledger (apart from real state)."""
    return settings.home / "demo"
