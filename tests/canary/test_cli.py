"""The `canary` command line (O5, Q7, Q8 from an operator's seat): exact command
names, JSON shapes, exit codes. Runs in-process with typer's CliRunner against
the real fleet and Prefect's test harness."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from typer.testing import CliRunner

from canary.cli import app
from tests.fixtures.canary_env import STRAY, endpoint, load_model
from tests.fixtures.fleet import FleetHandle

runner = CliRunner()
T0 = "2026-11-03T00:00:00Z"


def _run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


@pytest.fixture
def small_model(canary_env: FleetHandle, request: pytest.FixtureRequest) -> str:
    """A 3-endpoint model of its own per test (state in the session's Prefect is shared)."""
    model = f"test/cli-{request.node.name.removeprefix('test_')[:40]}"
    load_model(
        canary_env,
        model,
        [endpoint("a/fp8"), endpoint("b/fp8"), endpoint("bad/fp8", defects=STRAY)],
    )
    return model


def test_o5_round_status_ignore_exclude_lift_from_the_cli(small_model: str) -> None:
    """Rounds print a per-endpoint table; status/ignore print the documented JSON;
    a runtime exclusion shows in `canary ignore` at once and can be removed; lift works."""
    m = small_model
    code, out = _run("round", "--model", m, "--mode", "enforce", "--at", T0)
    assert code == 0, out
    assert "bad/fp8" in out and "failed" in out and "start:stray_start" in out
    at2 = (datetime.fromisoformat(T0) + timedelta(minutes=30)).isoformat()
    code, out = _run("round", "--model", m, "--mode", "enforce", "--at", at2)
    assert code == 0, out
    assert "suspended bad/fp8" in out

    code, out = _run("status", "--model", m, "--json")
    assert code == 0, out
    status = json.loads(out)
    assert status["model"] == m and status["mode"] == "enforce"
    bad = status["providers"]["bad/fp8"]
    assert set(bad) >= {
        "state", "suspended_until", "consecutive_failed_rounds",
        "consecutive_clean_rounds", "suspensions",
    }  # fmt: skip
    # status is read at the real "now": the logical suspension (Nov 3) has ended by then
    assert status["providers"]["a/fp8"]["state"] == "active"

    code, out = _run("exclude", "add", "a/fp8", "--model", m, "--reason", "incident 42")
    assert code == 0, out
    code, out = _run("ignore", "--model", m)
    assert code == 0 and "a/fp8" in json.loads(out)
    code, out = _run("exclude", "remove", "a/fp8", "--model", m)
    assert code == 0, out
    code, out = _run("ignore", "--model", m)
    assert "a/fp8" not in json.loads(out)

    code, out = _run("lift", "a/fp8", "--model", m, "--reason", "nothing to lift")
    assert code == 1 and "not suspended" in out

    code, out = _run("exclude", "add", "deepinfra/fp88", "--model", m, "--reason", "typo")
    assert code == 2 and "--force" in out  # an input mistake, found before any flow run
    code, out = _run("exclude", "add", "newhost/fp8", "--model", m, "--reason", "x", "--force")
    assert code == 0, out


def _state(status_json: str) -> dict[str, Any]:
    """`canary status --json` without what the wall clock alone moves: the bill's rounds
    left in the day and its forecast (a half-hour slot may pass between two calls)."""
    status = json.loads(status_json)
    for key in ("rounds_left", "forecast_usd"):
        status.get("bill", {}).pop(key, None)
    return status


def test_o5_triage_reprobes_one_endpoint_without_touching_state(small_model: str) -> None:
    """Triage prints outcomes for the chosen contract, leaves an artifact, and changes no
    state unless --record."""
    m = small_model
    code, out = _run("round", "--model", m, "--at", T0)
    assert code == 0, out
    code, before = _run("status", "--model", m, "--json")
    code, out = _run(
        "triage", "--model", m, "--provider", "bad/fp8", "--contract", "start", "--locale", "pt-BR",
        "--repeats", "2",
    )  # fmt: skip
    assert code == 0, out
    assert "start" in out and "fail" in out and "canary-triage-" in out
    assert "refusal" not in out
    code, after = _run("status", "--model", m, "--json")
    assert _state(after) == _state(before)

    code, out = _run("triage", "--model", m, "--provider", "bad/fp8", "--record")
    assert code == 0, out
    code, recorded = _run("status", "--model", m, "--json")
    assert (
        json.loads(recorded)["providers"]["bad/fp8"] != json.loads(before)["providers"]["bad/fp8"]
    )


def test_cli_bad_arguments_and_config_exit_2(
    canary_env: FleetHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bad --at, unknown contract or locale, and bad configuration: exit 2 with a clear message."""
    code, out = _run("round", "--model", "test/cli", "--at", "yesterday")
    assert code == 2 and "ISO-8601" in out
    code, out = _run("triage", "--provider", "x/fp8", "--contract", "vibes")
    assert code == 2 and "unknown contract" in out
    code, out = _run("triage", "--provider", "x/fp8", "--locale", "xx")
    assert code == 2 and "unknown locale" in out
    code, out = _run("triage", "--provider", "x/fp8", "--contract", "start", "--record")
    assert code == 2 and "--record needs every contract" in out
    code, out = _run("exclude", "add", "a/fp8", "--model", "test/cli", "--reason", "")
    assert code == 2 and "reason" in out, out
    monkeypatch.setenv("CANARY_POLICY__FLOOR", "-1")
    code, out = _run("status", "--model", "test/cli")
    assert code == 2 and "CANARY_POLICY__FLOOR" in out, out
    monkeypatch.delenv("CANARY_POLICY__FLOOR")
    monkeypatch.setenv("CANARY_CAPACITY_FLOOR", "3")  # the name of an earlier version
    code, out = _run("status", "--model", "test/cli")
    assert code == 2 and "use CANARY_POLICY__FLOOR" in out, out


def test_cli_unknown_model_exits_1_and_secrets_stay_out(canary_env: FleetHandle) -> None:
    """An unknown model is our error (exit 1) with a clear message that never shows the key."""
    code, out = _run("round", "--model", "nobody/nothing", "--at", T0)
    assert code == 1, out
    assert "nobody/nothing" in out
    assert canary_env.key not in out
    code, out = _run("status", "--model", "nobody/nothing")
    assert code == 1 and "nobody/nothing" in out


def test_q7_ignore_merges_builtin_incident_and_canary_layers(small_model: str) -> None:
    """`canary ignore` is the merged provider.ignore: canary suspension + runtime incident."""
    m = small_model
    now = datetime.now(UTC).replace(microsecond=0)
    for k in (2, 1):
        code, out = _run(
            "round",
            "--model",
            m,
            "--mode",
            "enforce",
            "--at",
            (now - timedelta(minutes=30 * k)).isoformat(),
        )
        assert code == 0, out
    code, out = _run(
        "exclude",
        "add",
        "b",
        "--model",
        m,
        "--reason",
        "provider-wide outage",
        "--until",
        (now + timedelta(hours=1)).isoformat(),
    )
    assert code == 0, out
    code, out = _run("ignore", "--model", m)
    assert set(json.loads(out)) == {"b", "bad/fp8"}
