"""The analyst's pages in a real browser (O3, O4): a local Prefect server like the demo's
(`prefect server start` on SQLite, UI included), two enforce rounds and a report made by
the real `canary` command against the fleet, then headless Chromium (Debian's package)
renders the block page, the status artifact, the round's artifacts, the failing verdict
task run and the report, and the suspended endpoint, its reason and its evidence numbers
must be in each rendered page; so must what each endpoint was judged on and the bill
(the status artifact's why column and spend, the decisions artifact's sections, the
report's daily spend).

Marked `browser`; skipped when /usr/bin/chromium is missing. `make ui-check` runs it alone
and keeps the screenshots in $UI_CHECK_DIR (default /tmp/ui-check)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from canary.demo import free_port
from flows.status_artifact import status_key
from ground.prefect_server import LocalServer, start_local_server, stop_pid
from ground.settings import Settings, load_settings
from ground.slugs import model_slug
from quarantine.adapters.store import BLOCK_TYPE_SLUG, block_name
from tests.fixtures.canary_env import STRAY, TIME_SCALE, endpoint, load_model
from tests.fixtures.fleet import FleetHandle

# replies judged for their start per endpoint and round: the start samples, the
# refusal and the language reply
REPLIES = load_settings().probe.start_samples + 2

CHROMIUM = Path("/usr/bin/chromium")
MODEL = "test/browser"
BAD = "bad/fp8"
EVIDENCE = f"{REPLIES} of {REPLIES} replies anomalous"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (/usr/bin/chromium)"),
]


def _chromium(url: str, *extra: str, budget_ms: int) -> str:
    profile = tempfile.mkdtemp(prefix="ui-check-")
    try:
        out = subprocess.run(
            [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={profile}", "--hide-scrollbars",
             f"--virtual-time-budget={budget_ms}", *extra, url],
            capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        return out.stdout
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def rendered(url: str, expected: list[str], shot: Path) -> str:
    """The page's DOM after the JS app rendered it (retried with a longer budget until every
    `expected` string is there), and a screenshot of it in `shot`."""
    dom = ""
    for budget in (20_000, 40_000, 80_000):
        dom = _chromium(url, "--dump-dom", budget_ms=budget)
        if all(e in dom for e in expected):
            break
    _chromium(url, f"--screenshot={shot}", "--window-size=1400,1600", budget_ms=40_000)
    missing = [e for e in expected if e not in dom]
    assert not missing, f"{url}: {missing} not rendered (screenshot {shot})"
    return dom


@pytest.fixture
def ui_server(tmp_path: Path) -> Iterator[tuple[LocalServer, Path]]:
    """A local Prefect server with its UI on a free port, as `canary demo` starts it."""
    home = tmp_path / "home"
    settings = Settings(_env_file=None, home=home, prefect_port=free_port(4350))
    server = start_local_server(settings)
    try:
        yield server, home
    finally:
        if server.pid is not None:
            stop_pid(server.pid)


def _canary(env: dict[str, str], *args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "canary.cli", *args], env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return out.stdout


def _api(server: LocalServer, method: str, path: str, body: Any = None) -> Any:
    response = httpx.request(method, f"{server.api_url}{path}", json=body, timeout=30)
    response.raise_for_status()
    return response.json()


def test_o3_browser_shows_suspended_endpoint_reason_and_evidence(
    fleet: FleetHandle, ui_server: tuple[LocalServer, Path], tmp_path: Path
) -> None:
    """Block page, status artifact, decisions and table artifacts, the red verdict task run
    and the report page each show the suspended endpoint with its reason and numbers."""
    server, home = ui_server
    shots = Path(os.environ.get("UI_CHECK_DIR") or tmp_path / "shots")
    shots.mkdir(parents=True, exist_ok=True)
    load_model(fleet, MODEL, [endpoint("a/fp8"), endpoint("b/fp8"), endpoint("c/fp8"),
                              endpoint(BAD, defects=STRAY)])  # fmt: skip
    env = {
        **os.environ,
        "PREFECT_API_URL": server.api_url,
        "CANARY_HOME": str(home),
        "CANARY_BASE_URL": fleet.base_url,
        "CANARY_API_KEY": fleet.key,
        "CANARY_PROBE__TTFT_THRESHOLD_S": "2.0",
        "CANARY_NOTIFICATION_BLOCK": "",
    }
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    for k in (2, 1):
        at = (now - timedelta(minutes=30 * k)).isoformat()
        _canary(env, "round", "--model", MODEL, "--mode", "enforce", "--at", at)
    report_dir = tmp_path / "report"
    _canary(env, "report", "--model", MODEL, "--since", "1d", "--out", str(report_dir))
    assert TIME_SCALE  # the fleet runs at the tests' time scale (fast healthy hosts)

    ui = server.ui_url
    slug = model_slug(MODEL)
    block = _api(
        server,
        "GET",
        f"/block_types/slug/{BLOCK_TYPE_SLUG}/block_documents/name/{block_name(MODEL)}",
    )
    rendered(f"{ui}/blocks/block/{block['id']}", [BAD, "suspended until", "start:stray_start"],
             shots / "1-block.png")  # fmt: skip

    def latest(key: str) -> dict[str, Any]:
        found = _api(server, "POST", "/artifacts/filter",
                     {"artifacts": {"key": {"any_": [key]}}, "sort": "CREATED_DESC", "limit": 1})  # fmt: skip
        assert found, key
        return dict(found[0])

    status = latest(status_key(MODEL))
    # C5/C13: the why column, the refusal contract's standing, the day's spend and forecast
    rendered(f"{ui}/artifacts/artifact/{status['id']}",
             [BAD, "rung 1: start:stray_start", EVIDENCE, "why", "Evidence and bill",
              "refusal contract: unverified", "Spent on", "Forecast for the day"],
             shots / "2-status.png")  # fmt: skip
    decisions = latest(f"canary-decisions-{slug}")
    # C5: what each endpoint was judged on; C13: the round's bill
    rendered(f"{ui}/artifacts/artifact/{decisions['id']}",
             [BAD, "suspended", EVIDENCE, "began with", "What each endpoint was judged on",
              "Refusal probe: ", "not judged (why)", "The round's bill", "total"],
             shots / "3-decisions.png")  # fmt: skip
    table = latest(f"canary-round-{slug}")
    rendered(f"{ui}/artifacts/artifact/{table['id']}", [BAD, f"{REPLIES}/{REPLIES} anomalous starts"],
             shots / "4-round-table.png")  # fmt: skip

    flow_run = decisions["flow_run_id"]
    for _ in range(60):  # task-run records reach the API from an event queue
        runs = _api(server, "POST", "/task_runs/filter",
                    {"flow_runs": {"id": {"any_": [flow_run]}}})  # fmt: skip
        failed = [
            r
            for r in runs
            if r["name"] == f"{BAD}: failed start" and r["state"]["type"] == "FAILED"
        ]
        if failed:
            break
        time.sleep(1)
    assert failed, [r["name"] for r in runs]
    rendered(f"{ui}/runs/task-run/{failed[0]['id']}",
             [f"{BAD}: failed start", "Contract failed", EVIDENCE], shots / "5-verdict-task-run.png")  # fmt: skip
    _chromium(f"{ui}/runs/flow-run/{flow_run}", f"--screenshot={shots / '6-flow-run-graph.png'}",
              "--window-size=1400,1000", budget_ms=40_000)  # fmt: skip

    page = (report_dir / "report.html").as_uri()
    dom = rendered(page, [BAD, "Verdict per round and endpoint", "data:image/png;base64,",
                          "The canary's daily spend", "The canary's bill on", "forecast"],
                   shots / "7-report.png")  # fmt: skip
    assert dom.count("<img") == 5  # the daily spend plot (C13) is the fifth
