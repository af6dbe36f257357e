"""What an analyst and an operator see of real rounds (O3, O4, O6, Q7, Q8), all read from one
round world (tests/fixtures/world.py: three healthy hosts and a stray-start host suspended
by the second of two enforce rounds), built once for this module: the state block's
readable fields, the living status artifact, the round's artifacts with the numbers behind
every verdict, the failing transcripts, a task graph whose verdict task runs say which
endpoint failed which contract, the flow run's name and tags, `canary status` and `canary
exclude list` at 80 columns, and the same state read by another process. Real fleet over
loopback, Prefect's test harness, real SQLite."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from prefect import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterFlowRunId,
    ArtifactFilterKey,
)
from prefect.client.schemas.sorting import ArtifactSort
from typer.testing import CliRunner

from canary.cli import app
from flows.graph import FAILED_STATE_NAME
from flows.status_artifact import status_key
from ground.settings import load_settings
from ground.slugs import model_slug
from quarantine.adapters.store import BLOCK_TYPE_SLUG, block_name
from tests.fixtures.prefect import final_task_runs
from tests.fixtures.world import World, world_slots

# replies judged for their start per endpoint and round: the start samples, the
# refusal and the language reply
REPLIES = load_settings().probe.start_samples + 2


async def _artifacts(**filters: Any) -> list[Any]:
    async with get_client() as client:
        return await client.read_artifacts(
            artifact_filter=ArtifactFilter(**filters), sort=ArtifactSort.CREATED_DESC
        )


def _minute(at: datetime) -> str:
    return f"{at:%Y-%m-%d %H:%M}Z"


def _run(*args: str) -> tuple[int, str]:
    """`canary ...` in-process, 80 columns wide."""
    result = CliRunner().invoke(app, list(args), terminal_width=80)
    return result.exit_code, result.output


async def test_o3_round_artifacts_status_block_and_graph_show_the_evidence(world: World) -> None:
    """Two enforce rounds suspend the stray-start host (the round world); the analyst then
    finds: the block's `suspended` and `endpoints` fields, a `canary-status` artifact with one
    version per round, the table (failures first, k/n evidence), the decisions markdown with
    the numbers, the failing transcripts (bounded, no key), and red verdict task runs named
    after the failed contract while the run itself completed."""
    summary = world.summaries[-1]
    assert [d["kind"] for d in summary.decisions] == ["suspended"]
    run_id = world.run_ids[-1]
    model = world.model
    slug = model_slug(model)
    until = _minute(world.times[-1] + timedelta(days=1))

    # the block page: structured fields, no JSON string
    async with get_client() as client:
        doc = await client.read_block_document_by_name(block_name(model), BLOCK_TYPE_SLUG)
    data = dict(doc.data)
    assert data.get("state_json") is None and data["mode"] == "enforce"
    assert data["endpoints"]["bad/fp8"]["state"] == "suspended"
    assert data["endpoints"]["bad/fp8"]["last_reasons"] == ["start:stray_start"]
    assert data["endpoints"]["a/fp8"]["state"] == "active"
    assert data["suspended"] == [f"bad/fp8: suspended until {until}, rung 1 (start:stray_start)"]

    # the living status artifact: one version per round, the latest lists the suspension
    versions = await _artifacts(key=ArtifactFilterKey(any_=[status_key(model)]))
    assert len(versions) == 2
    latest = versions[0].data
    suspended = latest.split("## Suspended")[1].split("## Shadow")[0]
    assert f"`bad/fp8` until {until}, rung 1: start:stray_start" in suspended
    assert f"{REPLIES} of {REPLIES} replies anomalous" in suspended
    assert "| `a/fp8` | clean | clean | 0 / 2 | 0 |" in latest  # last round, why (C5)
    # the refusal contract's standing and the day's bill (C5, C13)
    assert "## Evidence and bill" in latest
    assert "refusal contract: unverified: no positive control for this model" in latest
    assert f"- Spent on {world.times[-1].date()}: **$" in latest and "(2 rounds, " in latest
    assert "- Forecast for the day: **$" in latest and "at 48 rounds a day" in latest

    # the round's artifacts
    mine = await _artifacts(flow_run_id=ArtifactFilterFlowRunId(any_=[run_id]))
    by_key = {a.key: a for a in mine}
    assert set(by_key) == {
        f"canary-round-{slug}", f"canary-decisions-{slug}", f"canary-transcripts-{slug}",
        status_key(model),
    }  # fmt: skip
    table = by_key[f"canary-round-{slug}"].data
    rows = table if isinstance(table, list) else json.loads(table)
    assert rows[0]["endpoint"] == "bad/fp8" and rows[0]["contract"] == "start"
    assert (
        rows[0]["outcome"] == "fail"
        and rows[0]["evidence"] == f"{REPLIES}/{REPLIES} anomalous starts"
    )
    assert {r["endpoint"] for r in rows[:5]} == {"bad/fp8"}
    decisions = by_key[f"canary-decisions-{slug}"].data
    assert f"| suspended | `bad/fp8` | {until} | 1 |" in decisions
    assert f"{REPLIES} of {REPLIES} replies anomalous" in decisions and "began with `" in decisions
    assert "## Positive controls" not in decisions  # this model has no control
    # what each endpoint was judged on (C5) and the round's bill (C13)
    judged = decisions.split("## What each endpoint was judged on")[1].split("## The round")[0]
    assert "Refusal probe: **unverified**" in judged
    assert "| `bad/fp8` | failed | " in judged and "**start failed**" in judged
    assert "| `a/fp8` | clean | " in judged and "| refusal | " in judged  # unverified column
    bill = decisions.split("## The round's bill")[1]
    assert "Budget: **full** (6 start samples): no daily budget set." in bill
    assert "| `bad/fp8` | 9 | " in bill and "| **total** | 36 | " in bill
    transcripts = by_key[f"canary-transcripts-{slug}"].data
    assert "## `bad/fp8`" in transcripts and "a/fp8" not in transcripts
    assert transcripts.count("#### ") == REPLIES  # the text requests behind the start failure
    assert world.env["CANARY_API_KEY"] not in transcripts

    # the graph: a red verdict task run for the failing endpoint, named after the contract,
    # one for the clean ones, and the round's steps (O1), not a task run per endpoint probed
    runs = await final_task_runs(run_id, expected=7)
    failed = runs["bad/fp8: failed start"]
    assert failed.state.type.value == "FAILED" and failed.state.name == FAILED_STATE_NAME
    assert f"{REPLIES} of {REPLIES} replies anomalous" in (failed.state.message or "")
    clean = runs["clean: 3 endpoints"]
    assert clean.state.type.value == "COMPLETED" and clean.state.name == "Clean"
    assert clean.state.message == "a/fp8, b/fp8, c/fp8"
    steps = {r.task_key.rsplit("-", 1)[0] for r in runs.values()}
    assert len(runs) == 7 and {n for n in runs if n.startswith("probe ")} == {"probe 4 endpoints"}
    assert {
        "discover_endpoints",
        "pinned_probes",
        "majority_vote",
        "policy_step",
        "apply_report",
    } <= steps
    async with get_client() as client:
        flow_run = await client.read_flow_run(run_id)
    assert flow_run.state is not None and flow_run.state.is_completed()


async def test_o1_o3_round_run_is_named_tagged_and_leaves_artifacts(world: World) -> None:
    """The flow run says model and time in its name, model and mode in its tags, and leaves
    the endpoint x contract table and a markdown summary explaining each decision (the
    suspending round of the round world)."""
    from prefect import get_client
    from prefect.artifacts import Artifact

    from ground.slugs import model_slug

    model = world.model
    async with get_client() as client:
        run = await client.read_flow_run(world.run_ids[-1])
    assert run.name == f"{model} @ {world.times[-1]:%Y-%m-%d %H:%M}Z"
    assert {f"model:{model}", "mode:enforce"} <= set(run.tags)

    table = await Artifact.aget(f"canary-round-{model_slug(model)}")
    assert table is not None and table.flow_run_id == run.id
    data: Any = table.data  # the table's rows, as JSON text or already decoded
    rows = json.loads(data) if isinstance(data, str) else data
    assert {(r["endpoint"], r["contract"]) for r in rows} >= {
        ("bad/fp8", "start"),
        ("a/fp8", "language"),
    }
    assert any(r["endpoint"] == "bad/fp8" and r["outcome"] == "fail" for r in rows)
    summary = await Artifact.aget(f"canary-decisions-{model_slug(model)}")
    assert summary is not None and isinstance(summary.data, str)
    assert "| suspended | `bad/fp8` |" in summary.data and "start:stray_start" in summary.data


def test_o3_status_shows_state_layer_until_last_round_and_why(world: World) -> None:
    """After two failing rounds the stray-start host is suspended (until a full date), an
    endpoint under a runtime incident exclusion shows as `excluded (incident)` with its
    reason, and `canary exclude list` lists the entry (the round world; the exclusion is
    removed again at the end)."""
    model = world.model
    code, out = _run("exclude", "add", "a/fp8", "--model", model, "--reason", "incident 7")
    assert code == 0, out
    try:
        _status_and_exclusions(model)
    finally:
        code, out = _run("exclude", "remove", "a/fp8", "--model", model)
        assert code == 0, out


def _status_and_exclusions(model: str) -> None:
    """What the analyst reads while `a/fp8` is excluded by an incident."""
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


def test_o6_state_survives_across_processes(world: World, tmp_path: Path) -> None:
    """Rounds run in this process (the round world's) are visible to a separate `canary`
    process through the Prefect API (state block) and the ledger, as they are for cron,
    CLI and UI."""
    from prefect.settings import PREFECT_API_URL

    m = world.model
    env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value())}
    out = subprocess.run(
        [str(Path(sys.executable).parent / "canary"), "status", "--model", m, "--json"],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    status = json.loads(out.stdout)
    assert status["mode"] == "enforce"
    assert status["providers"]["bad/fp8"]["suspensions"] == 1
    probe = subprocess.run(
        [sys.executable, "-c",
         "import sys; from quarantine.adapters.ledger import Ledger; from ground.settings import load_settings;"
         "f = Ledger(load_settings().resolved_ledger_url).decisions_frame(sys.argv[1]);"
         "print(','.join(f.kind))", m],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr[-2000:]
    assert "suspended" in probe.stdout.strip().split(",")


def test_the_world_rounds_are_the_two_slots_before_now_on_one_day() -> None:
    """The world's two rounds are the half-hour slots before now, moved back one slot where
    they would straddle midnight (the day's bill must count both)."""
    at = datetime(2026, 11, 4, 10, 47, 13, tzinfo=UTC)
    assert world_slots(at) == (
        at.replace(hour=9, minute=30, second=0),
        at.replace(minute=0, second=0),
    )
    just_after = datetime(2026, 11, 4, 0, 40, tzinfo=UTC)
    first, second = world_slots(just_after)
    assert (first, second) == (
        datetime(2026, 11, 3, 23, 0, tzinfo=UTC),
        datetime(2026, 11, 3, 23, 30, tzinfo=UTC),
    )
    assert second + timedelta(days=1) > just_after  # the suspension is in force at now
