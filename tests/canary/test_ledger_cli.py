"""`canary ledger prune` (O9): a real prune is an audited flow run (artifact, a
`ledger_prunes` row naming the run), a dry run counts without a run or a change, the
window defaults to the retention setting, and bad input or an unreachable ledger end
with one line and the table's exit code."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from prefect import get_client
from prefect.client.schemas.filters import (
    ArtifactCollectionFilter,
    ArtifactCollectionFilterKey,
    FlowRunFilter,
    FlowRunFilterName,
)
from typer.testing import CliRunner

from canary.cli import app
from flows.retention import ARTIFACT_KEY
from ground.clock import utc_now
from ground.settings import load_settings
from quarantine.adapters.retention import prunes
from tests.fixtures.retention_support import fill, prunable

OLD: dict[str, int] = {}  # what a prune may delete of the rows 40 days old (per table)


@pytest.fixture
def ledger_url(prefect_api: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The default ledger under a fresh CANARY_HOME, with rows 40 and 2 days old."""
    monkeypatch.setenv("CANARY_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CANARY_NOTIFICATION_BLOCK", "")
    url = load_settings().resolved_ledger_url
    now = utc_now()
    OLD.update(prunable(fill(url, now - timedelta(days=40), "old")))
    fill(url, now - timedelta(days=2), "new")
    return url


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["ledger", "prune", *args])
    return result.exit_code, result.output


async def _runs(name: str) -> list[Any]:
    async with get_client() as client:
        return await client.read_flow_runs(
            flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=[name]))
        )


async def _artifact() -> Any:
    async with get_client() as client:
        [latest] = await client.read_latest_artifacts(
            artifact_filter=ArtifactCollectionFilter(
                key=ArtifactCollectionFilterKey(any_=[ARTIFACT_KEY])
            )
        )
        return latest


def test_o9_ledger_prune_is_an_audited_flow_run(ledger_url: str) -> None:
    """The prune deletes the 40-day-old rows, prints what each table lost, and leaves a
    Completed flow run, its artifact and a `ledger_prunes` row naming that run."""
    code, out = _run("--older-than", "30d", "--author", "ops-test", "--reason", "monthly")
    assert code == 0, out
    result = json.loads(out)
    assert result["deleted"] == OLD and result["total"] == 17 and result["by"] == "ops-test"
    [run] = asyncio.run(_runs("prune ledger (ops-test)"))
    assert run.state_type.value == "COMPLETED"
    assert run.parameters["older_than_days"] == 30
    artifact = asyncio.run(_artifact())
    assert "monthly" in artifact.data and "`routing_attempts` | 4" in artifact.data
    [record] = prunes(ledger_url)
    assert record["flow_run_id"] == str(run.id) and record["actor"] == "ops-test"
    code, out = _run("--older-than", "30d", "--dry-run")
    assert code == 0 and json.loads(out)["total"] == 0, out


def test_o9_dry_run_counts_without_a_run_and_the_window_defaults_to_the_setting(
    ledger_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--dry-run` prints what would go and changes nothing (no run, no record); without
    `--older-than` the window is CANARY_LEDGER__RETENTION_DAYS."""
    old = dict(OLD)
    code, out = _run("--older-than", "30d", "--dry-run", "--author", "dry-tester")
    assert code == 0, out
    assert json.loads(out)["would_delete"] == old
    code, again = _run("--dry-run")  # the default window, 30 days
    assert code == 0 and json.loads(again)["would_delete"] == old, again
    monkeypatch.setenv("CANARY_LEDGER__RETENTION_DAYS", "1")
    code, out = _run("--dry-run")
    assert code == 0 and json.loads(out)["would_delete"] == {t: 2 * n for t, n in old.items()}
    assert asyncio.run(_runs("prune ledger (dry-tester)")) == []
    assert prunes(ledger_url) == []


def test_ledger_prune_bad_input_exits_2_and_an_unreachable_ledger_1(
    ledger_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A window under a day needs --force (30m is minutes), a non-duration and an empty
    reason are refused with exit 2; a ledger that cannot be opened is exit 1, one line."""
    code, out = _run("--older-than", "30m")
    assert code == 2 and "m is minutes" in out and len(out.strip().splitlines()) == 1, out
    code, out = _run("--older-than", "30m", "--force", "--dry-run")
    assert code == 0 and json.loads(out)["total"] == 34, out
    code, out = _run("--older-than", "soon")
    assert code == 2 and "30d" in out, out
    code, out = _run("--reason", " ")
    assert code == 2 and "reason" in out, out
    monkeypatch.setenv("CANARY_LEDGER_URL", f"sqlite:///{tmp_path}")  # a folder, not a file
    code, out = _run("--dry-run")
    assert code == 1 and "the ledger could not be pruned" in out, out
    assert len(out.strip().splitlines()) == 1
