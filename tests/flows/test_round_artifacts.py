"""What an analyst sees of real rounds in Prefect (O3, O4, Q8): the state block's readable
fields, the living status artifact, the round's artifacts with the numbers behind every
verdict, the failing transcripts, and a task graph whose verdict task runs say which
endpoint failed which contract. Real fleet over loopback, Prefect's test harness."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from prefect import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterFlowRunId,
    ArtifactFilterKey,
)
from prefect.client.schemas.sorting import ArtifactSort

from flows.canary_round import RoundSummary, canary_round
from flows.graph import FAILED_STATE_NAME
from flows.status_artifact import status_key

# replies judged for their start per endpoint and round: the start samples, the
# refusal and the language reply
from ground.settings import load_settings
from ground.slugs import model_slug
from quarantine.adapters.store import BLOCK_TYPE_SLUG, block_name
from tests.fixtures.canary_env import STRAY, endpoint, load_model
from tests.fixtures.fleet import FleetHandle
from tests.fixtures.prefect import final_task_runs

REPLIES = load_settings().probe.start_samples + 2

T0 = datetime(2026, 11, 4, 0, 0, tzinfo=UTC)
MODEL = "test/analyst"


async def _artifacts(**filters: Any) -> list[Any]:
    async with get_client() as client:
        return await client.read_artifacts(
            artifact_filter=ArtifactFilter(**filters), sort=ArtifactSort.CREATED_DESC
        )


TAGS = ("a/fp8", "b/fp8", "c/fp8", "bad/fp8")


async def test_o3_round_artifacts_status_block_and_graph_show_the_evidence(
    canary_env: FleetHandle,
) -> None:
    """Two enforce rounds suspend the stray-start host; the analyst then finds: the block's
    `suspended` and `endpoints` fields, a `canary-status` artifact with one version per
    round, the table (failures first, k/n evidence), the decisions markdown with the numbers,
    the failing transcripts (bounded, no key), and red verdict task runs named after the
    failed contract while the run itself completed."""
    load_model(
        canary_env,
        MODEL,
        [*(endpoint(t) for t in TAGS[:3]), endpoint("bad/fp8", defects=STRAY)],
    )
    states = []
    for n in range(2):
        state = await canary_round(
            model=MODEL, mode="enforce", at=T0 + timedelta(minutes=30 * n), return_state=True
        )
        assert state.is_completed(), state
        summary = await state.aresult()
        assert isinstance(summary, RoundSummary)
        states.append(state)
    assert [d["kind"] for d in summary.decisions] == ["suspended"]
    run_id = states[-1].state_details.flow_run_id
    assert run_id is not None
    slug = model_slug(MODEL)

    # the block page: structured fields, no JSON string
    async with get_client() as client:
        doc = await client.read_block_document_by_name(block_name(MODEL), BLOCK_TYPE_SLUG)
    data = dict(doc.data)
    assert data.get("state_json") is None and data["mode"] == "enforce"
    assert data["endpoints"]["bad/fp8"]["state"] == "suspended"
    assert data["endpoints"]["bad/fp8"]["last_reasons"] == ["start:stray_start"]
    assert data["endpoints"]["a/fp8"]["state"] == "active"
    assert data["suspended"] == [
        "bad/fp8: suspended until 2026-11-05 00:30Z, rung 1 (start:stray_start)"
    ]

    # the living status artifact: one version per round, the latest lists the suspension
    versions = await _artifacts(key=ArtifactFilterKey(any_=[status_key(MODEL)]))
    assert len(versions) == 2
    latest = versions[0].data
    suspended = latest.split("## Suspended")[1].split("## Shadow")[0]
    assert "`bad/fp8` until 2026-11-05 00:30Z, rung 1: start:stray_start" in suspended
    assert f"{REPLIES} of {REPLIES} replies anomalous" in suspended
    assert "| `a/fp8` | clean | clean | 0 / 2 | 0 |" in latest  # last round, why (C5)
    # the refusal contract's standing and the day's bill (C5, C13)
    assert "## Evidence and bill" in latest
    assert "refusal contract: unverified: no positive control for this model" in latest
    assert "- Spent on 2026-11-04: **$" in latest and "(2 rounds, " in latest
    assert "- Forecast for the day: **$" in latest and "at 48 rounds a day" in latest

    # the round's artifacts
    mine = await _artifacts(flow_run_id=ArtifactFilterFlowRunId(any_=[run_id]))
    by_key = {a.key: a for a in mine}
    assert set(by_key) == {
        f"canary-round-{slug}", f"canary-decisions-{slug}", f"canary-transcripts-{slug}",
        status_key(MODEL),
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
    assert "| suspended | `bad/fp8` | 2026-11-05 00:30Z | 1 |" in decisions
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
    assert canary_env.key not in transcripts

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
