"""The command line from an analyst's seat (O3, Q7, Q8): `canary status` says why and since
when, shows exclusions as such and fits 80 columns without cutting dates; `canary exclude
list`; `--version`; help pages without `<bool>`. In-process CliRunner against the real
fleet and Prefect's test harness."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from typer.testing import CliRunner

from canary.cli import app
from tests.fixtures.canary_env import STRAY, endpoint, load_model
from tests.fixtures.fleet import FleetHandle

runner = CliRunner()


def _run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args), terminal_width=80)
    return result.exit_code, result.output


def test_o3_status_shows_state_layer_until_last_round_and_why(canary_env: FleetHandle) -> None:
    """After two failing rounds the stray-start host is suspended (until a full date), an
    endpoint under a runtime incident exclusion shows as `excluded (incident)` with its
    reason, and `canary exclude list` lists the entry."""
    model = "test/cli-analyst"
    load_model(canary_env, model, [endpoint("a/fp8"), endpoint("b/fp8"), endpoint("c/fp8"),
                                   endpoint("bad/fp8", defects=STRAY)])  # fmt: skip
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    for k in (2, 1):
        code, out = _run("round", "--model", model, "--mode", "enforce", "--at",
                         (now - timedelta(minutes=30 * k)).isoformat())  # fmt: skip
        assert code == 0, out
    code, out = _run("exclude", "add", "a/fp8", "--model", model, "--reason", "incident 7")
    assert code == 0, out

    code, out = _run("status", "--model", model)
    assert code == 0, out
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines), out
    bad = next(line for line in lines if line.startswith("bad/fp8"))
    assert re.search(r"suspended\s+\d{4}-\d\d-\d\d \d\d:\d\dZ\s+1\s+0/0\s+failed\s*$", bad), bad
    excluded = next(line for line in lines if line.startswith("a/fp8"))
    assert "excluded" in excluded and "clean" in excluded
    assert "bad/fp8 (canary): canary suspension" not in out  # the reason, not the entry text
    assert "bad/fp8 (canary): start:stray_start" in out
    assert "a/fp8 (incident): incident 7 (cli)" in out

    code, out = _run("status", "--model", model, "--json")
    status = json.loads(out)["providers"]
    assert status["a/fp8"]["state"] == "excluded" and status["a/fp8"]["layer"] == "incident"
    assert (
        status["bad/fp8"]["layer"] == "canary"
        and status["bad/fp8"]["reason"] == "start:stray_start"
    )
    assert status["bad/fp8"]["last_round"]["verdict"] == "failed"
    assert status["bad/fp8"]["last_round"]["reasons"] == ["start:stray_start"]
    assert status["b/fp8"]["state"] == "active"

    code, out = _run("exclude", "list", "--model", model)
    assert code == 0, out
    row = next(line for line in out.splitlines() if line.startswith("a/fp8"))
    assert "incident" in row and "incident 7" in row and "cli" in row
    code, out = _run("exclude", "list", "--model", model, "--json")
    assert [(r["tag"], r["layer"], r["active"]) for r in json.loads(out)] == [
        ("a/fp8", "incident", True)
    ]


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["round"],
        ["status"],
        ["exclude", "add"],
        ["exclude", "list"],
        ["demo"],
        ["history"],
        ["report"],
        ["triage"],
        ["gateway", "serve"],
        ["gateway", "report"],
        ["served"],
        ["ledger", "prune"],
        ["fleet", "serve"],
    ],
)
def test_help_pages_show_flags_without_a_type_and_no_spec_codes(command: list[str]) -> None:
    """`--help` shows `--force`, not `--force <bool>`, and explains in words."""
    code, out = _run(*command, "--help")
    assert code == 0, out
    assert "<bool>" not in out
    assert not re.search(r"\b[CQRO]\d{1,2}\b", out), out


def test_version_prints_the_installed_version() -> None:
    """`canary --version` prints the package's version and exits 0."""
    from importlib.metadata import version

    code, out = _run("--version")
    assert code == 0 and out.strip() == f"provider-canary {version('provider-canary')}"
