"""`canary demo` (the README's main command, `make demo`): the whole product on
one machine with embedded defaults.

1. a fresh local Prefect server on SQLite (under `<CANARY_HOME>/demo`),
2. the `seed-incidents` fleet on loopback (23 endpoints: both incidents and most defect
   classes; the rest are in the `defect-zoo` scenario),
3. canary rounds in enforce mode at logical times t, t+30 min, t+60 min, ...,
   printing which hosts failed what and the resulting provider.ignore,
4. a recovery: the start-corrupting host is fixed in the fleet and is
   reinstated after two clean rounds,
5. the UI address to inspect the flow runs; then everything it started is
   stopped (or kept up with --keep-ui).

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
from typing import Any

import httpx

from flows.roundplan import ROUND_SECONDS, next_slot_with_locale
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


def run_demo(settings: Settings, *, rounds_before_fix: int = 3, keep_ui: bool = False) -> int:
    from ground.prefect_server import start_local_server, stop_pid

    home = settings.home / "demo"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    prefect_port = free_port(settings.prefect_port)
    fleet_port = free_port(8600)
    demo_settings = settings.model_copy(update={"home": home, "prefect_port": prefect_port})
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
        return asyncio.run(_rounds(base_url, fleet_key, server.ui_url, rounds_before_fix))
    finally:
        if keep_ui:
            _say(f"[demo] keeping the Prefect UI up at {server.ui_url} (pid {server.pid});")
            _say(f"       stop it with: CANARY_HOME={home} canary server stop")
        else:
            if server.pid is not None:
                stop_pid(server.pid)
            (home / "prefect" / "server.pid").unlink(missing_ok=True)
        stop_pid(fleet.pid)
        fleet_log.close()


async def _rounds(base_url: str, key: str, ui_url: str, rounds_before_fix: int) -> int:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from canary.cli.tables import print_round, quiet_task_logs
    from flows.canary_round import canary_round
    from ground.settings import load_settings
    from probes.client import ProbeClient

    settings = load_settings()
    quiet_task_logs()
    with temporary_settings(updates={PREFECT_API_URL: os.environ["PREFECT_API_URL"]}):
        async with ProbeClient.from_settings(settings) as client:
            tags = [e.tag for e in await client.discover(DEFAULT_MODEL)]
        at = first_round_time(tags, list(settings.locales), datetime.now(UTC))
        total = rounds_before_fix + 2
        for n in range(total):
            if n == rounds_before_fix:
                _say(f"\n[demo] the operator of {FIXED_HOST} fixes it (fleet scenario updated)")
                await _fix_host(base_url, key, FIXED_HOST)
            _say(f"\n[demo] round {n + 1}/{total} at logical time {at:%Y-%m-%d %H:%M}Z")
            started = time.monotonic()
            summary = await canary_round(  # the demo replays upcoming slots on purpose
                model=DEFAULT_MODEL, mode="enforce", at=at, allow_future=True
            )
            print_round(summary)
            _say(f"[demo] round took {time.monotonic() - started:.1f} s")
            at += timedelta(seconds=ROUND_SECONDS)
    _say(
        f"\n[demo] inspect the flow runs, task runs, artifacts and logs in the Prefect UI: {ui_url}"
    )
    from prefect.logging.handlers import APILogHandler

    await APILogHandler.aflush()  # ship the last run logs before the server goes away
    return 0


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
