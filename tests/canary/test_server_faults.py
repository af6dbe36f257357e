"""Locks that cannot outlive their holder, against a real Prefect server process (the
embedded local server of `ground/prefect_server.py`, on a free port under tmp_path) and
real `canary round` processes: a round killed with SIGKILL frees its model's lock for the
next round and its run is marked Crashed; when the Prefect API disappears mid-round the
CLI gives up with one line and exit 1; after the server restarts under that held lock,
the next round runs. One server start and one restart for the whole module."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ground.prefect_server import SERVER_ENV, server_env, start_local_server, stop_local_server
from ground.settings import Settings
from quarantine.adapters.lease import lease_name
from tests.fixtures.canary_env import endpoint, scenario
from tests.fixtures.fleet import FleetHandle

pytestmark = pytest.mark.slow
LEASE_S = 10
API_LOST_AFTER_S = 6
SLOW = {"ttft_s": 40.0, "tokens_per_s": 50}  # probes that outlast the test's patience


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    home = tmp_path_factory.mktemp("server-faults")
    settings = Settings(_env_file=None, home=home, prefect_port=_free_port())
    with pytest.MonkeyPatch.context() as env:  # the server's batching comes from us alone
        for name in SERVER_ENV:
            env.delenv(name, raising=False)
        start_local_server(settings)
    try:
        yield settings
    finally:
        stop_local_server(settings)


def _api(settings: Settings) -> str:
    return f"http://127.0.0.1:{settings.prefect_port}/api"


def _env(settings: Settings, fleet: FleetHandle) -> dict[str, str]:
    return {
        **os.environ,
        "PREFECT_API_URL": _api(settings),
        "CANARY_HOME": str(settings.home),
        "CANARY_BASE_URL": fleet.base_url,
        "CANARY_API_KEY": fleet.key,
        "CANARY_MODE": "enforce",
        "CANARY_CONTROL_PROVIDERS": "",
        "CANARY_NOTIFICATION_BLOCK": "",
        "CANARY_PROBE__TTFT_THRESHOLD_S": "60",
        "CANARY_ROUND_LEASE_S": str(LEASE_S),
        "CANARY_API_LOST_AFTER_S": str(API_LOST_AFTER_S),
        "CANARY_ROUND_LOCK_WAIT_S": "100",
        "PYTHONUNBUFFERED": "1",
    }


def _round(
    settings: Settings, fleet: FleetHandle, model: str, at: str, tmp: Path
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "canary.cli", "round", "--model", model, "--at", at],
        env=_env(settings, fleet),
        cwd=tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _load(fleet: FleetHandle, model: str, *, slow: bool) -> None:
    eps = [endpoint(t, timing=SLOW) if slow else endpoint(t) for t in ("a/fp8", "b/fp8")]
    fleet.load(scenario(model, eps), time_scale=1.0 if slow else 0.25)


def _lock_of(settings: Settings, model: str, pid: int, timeout_s: float = 120) -> dict[str, Any]:
    """Wait until process `pid` holds `model`'s round lock; return the lease record."""
    url = f"{_api(settings)}/variables/name/{lease_name(model)}"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        r = httpx.get(url, timeout=5)
        if r.status_code == 200 and r.json()["value"].get("pid") == pid:
            value: dict[str, Any] = r.json()["value"]
            return value
        time.sleep(0.5)
    raise AssertionError(f"process {pid} never took the round lock of {model}")


def _run_state(settings: Settings, run_id: str) -> dict[str, Any]:
    state: dict[str, Any] = httpx.get(f"{_api(settings)}/flow_runs/{run_id}", timeout=5).json()[
        "state"
    ]
    return state


def test_a_round_killed_with_sigkill_frees_the_lock_for_the_next_round(
    server: Settings, fleet: FleetHandle, tmp_path: Path
) -> None:
    """kill -9 of `canary round` mid-round: the next round of that model takes the lock
    (within the lease bound, at once on the same machine), runs, and the killed run is
    marked Crashed instead of staying Running for ever."""
    model = "test/killed-round"
    at = "2026-11-09T00:00:00Z"
    _load(fleet, model, slow=True)
    first = _round(server, fleet, model, at, tmp_path)
    try:
        held = _lock_of(server, model, first.pid)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    killed_at = time.monotonic()
    assert _run_state(server, held["flow_run_id"])["type"] == "RUNNING"

    _load(fleet, model, slow=False)
    second = _round(server, fleet, model, at, tmp_path)
    out, err = second.communicate(timeout=240)
    took = time.monotonic() - killed_at
    assert second.returncode == 0, err[-3000:]
    assert "a/fp8" in out and "stayed held" not in out, out
    crashed = _run_state(server, held["flow_run_id"])
    assert crashed["type"] == "CRASHED", crashed
    assert "process" in crashed["message"]
    print(f"next round finished {took:.1f} s after the kill (lease {LEASE_S} s)")


def test_api_gone_mid_round_exits_1_and_a_restarted_server_lets_the_next_round_run(
    server: Settings, fleet: FleetHandle, tmp_path: Path
) -> None:
    """The Prefect server dies while a round holds its lock: the CLI gives up with one
    error line and exit 1 within the bound (not minutes); after the server restarts, the
    lock (a database row that survived) does not block the next round, which runs and
    marks the abandoned run Crashed."""
    model = "test/server-restart"
    at = "2026-11-09T00:30:00Z"
    _load(fleet, model, slow=True)
    holder = _round(server, fleet, model, at, tmp_path)
    try:
        held = _lock_of(server, model, holder.pid)
        stop_local_server(server)
        stopped_at = time.monotonic()
        _, err = holder.communicate(timeout=120)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    gave_up_after = time.monotonic() - stopped_at
    assert holder.returncode == 1, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: the Prefect API at") and "stopped answering" in last, err
    assert gave_up_after < 90, gave_up_after
    print(f"CLI gave up {gave_up_after:.1f} s after the server stopped")

    start_local_server(server)
    _load(fleet, model, slow=False)
    nxt = _round(server, fleet, model, at, tmp_path)
    out, err = nxt.communicate(timeout=240)
    assert nxt.returncode == 0, err[-3000:]
    assert "a/fp8" in out and "stayed held" not in out, out
    assert _run_state(server, held["flow_run_id"])["type"] == "CRASHED"


def test_the_embedded_server_records_task_runs_and_events_in_batches(server: Settings) -> None:
    """The local server runs with `SERVER_ENV` (read back from its own settings API), and
    a variable the operator set wins over our default."""
    found = httpx.get(f"{_api(server)}/admin/settings", timeout=10).json()
    services = found["server"]["services"]
    assert services["task_run_recorder"]["batch_size"] == 500
    assert services["task_run_recorder"]["flush_interval"] == 2
    assert services["event_persister"]["batch_size"] == 500
    assert found["server"]["analytics_enabled"] is False
    mine = {"PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_BATCH_SIZE": "1"}
    assert server_env(mine) == {**SERVER_ENV, **mine}
