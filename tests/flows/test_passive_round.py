"""Production evidence in the next round and in `canary status` (SPEC O8): what the gateway
wrote to the ledger (each attempt's verdict as evidence, its suspects and ejections) is read
back by portable queries (real SQLite; a throwaway PostgreSQL when its server is here), shown
in the round's decisions artifact beside the probes' evidence (never a verdict of its own),
and by `canary status` as the gateways' ejections in force."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import pytest
from prefect import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
from prefect.client.schemas.sorting import ArtifactSort
from typer.testing import CliRunner

from canary.cli import app as cli
from flows.canary_round import RoundSummary, canary_round
from flows.production import production_lines, production_markdown
from ground.settings import load_settings
from ground.slugs import model_slug
from routing.events import EventLog
from routing.passive_ledger import (
    ProviderFigures,
    active_ejections,
    production_figures,
    suspects,
)
from routing.records import AttemptRecord, SuspectRecord
from tests.fixtures.canary_env import STRAY, endpoint, load_model
from tests.fixtures.fleet import FleetHandle

T0 = datetime(2026, 11, 5, 12, 0, tzinfo=UTC)
MODEL = "test/production"
runner = CliRunner()


def test_o8_production_lines_against_the_peers() -> None:
    """Each provider's failures by reason against the pooled others, highest share first."""
    figures = [
        ProviderFigures("StartCorrupt", "startcorrupt/fp8", 120, {"start": 14}),
        ProviderFigures("A", "a/fp8", 500, {}),
        ProviderFigures("B", "b/fp8", 400, {"schema": 1}),
    ]
    assert production_lines(figures) == [
        "- `startcorrupt/fp8`: production: 14 of 120 replies rejected for a stray start,"
        " peers 0 of 900",
        "- `b/fp8`: production: 1 of 400 replies rejected by the schema, peers 0 of 620",
    ]
    md = production_markdown(figures, [], timedelta(minutes=30))
    assert "## Production evidence (gateway, 30 min before this round)" in md
    assert "never suspend" in md
    assert "No gateway traffic" in production_markdown([], [], timedelta(minutes=30))


def _write(url: str, model: str, at: datetime) -> None:
    """What a gateway wrote: 40 judged replies (AlphaB: 8 stray starts), one client-shaped
    attempt (no evidence), and AlphaB's ejection until `at` + 1 minute."""
    log = EventLog(url)
    for i in range(40):
        provider = ("AlphaA", "AlphaB")[i % 2]
        verdict = "start" if provider == "AlphaB" and (i // 2) % 5 < 2 else "ok"
        log.emit(AttemptRecord(
            operation_id=f"op-{i}", attempt_id=f"op-{i}.0", attempt_index=0, workload="chat",
            route_id="alpha", model=model, provider=provider, passive=verdict,
            provider_tag=f"{provider.lower()[:5]}-{provider[-1].lower()}/fp8",
            at=at - timedelta(minutes=5),
        ))  # fmt: skip
    log.emit(AttemptRecord(operation_id="op-x", attempt_id="op-x.0", attempt_index=0,
                           workload="chat", route_id="alpha", model=model, provider="AlphaB",
                           passive=None, at=at - timedelta(minutes=5)))  # fmt: skip
    log.emit(SuspectRecord(
        model=model, provider="AlphaB", reason="start", action="ejected", host_k=8, host_n=20,
        peers_k=0, peers_n=20, p_adjusted=0.001, provider_tag="alpha-b/fp8", times=1,
        until=at + timedelta(minutes=1), evidence="8 of 20 replies rejected for a stray start,"
        " peers 0 of 20", gateway="gw-host:1", at=at - timedelta(minutes=2),
    ))  # fmt: skip
    log.close()


def _check_ledger(url: str) -> None:
    figures = production_figures(url, MODEL, T0 - timedelta(minutes=30), T0)
    assert [(f.provider, f.tag, f.replies, f.failures) for f in figures] == [
        ("AlphaA", "alpha-a/fp8", 20, {}),
        ("AlphaB", "alpha-b/fp8", 20, {"start": 8}),
    ]
    assert production_figures(url, MODEL, T0 - timedelta(minutes=2), T0) == []
    [row] = suspects(url, MODEL, T0 - timedelta(minutes=30), T0)
    assert (row.tag, row.action, row.times, row.gateway) == (
        "alpha-b/fp8",
        "ejected",
        1,
        "gw-host:1",
    )
    assert [r.provider for r in active_ejections(url, MODEL, T0)] == ["AlphaB"]
    assert active_ejections(url, MODEL, T0 + timedelta(minutes=2)) == []  # it ended


def test_o8_the_ledger_holds_the_gateways_figures_sqlite(tmp_path: object) -> None:
    """Written by the gateway's event log, read back by the round's and status's queries."""
    url = f"sqlite:///{tmp_path}/ledger.db"
    _write(url, MODEL, T0)
    _check_ledger(url)


@pytest.mark.slow
def test_o8_the_ledger_holds_the_gateways_figures_postgresql(pg_ledger_url: str) -> None:
    """The same on a throwaway PostgreSQL cluster (the scale path)."""
    _write(pg_ledger_url, MODEL, T0)
    _check_ledger(pg_ledger_url)


async def test_o8_the_next_round_and_status_show_the_production_evidence(
    canary_env: FleetHandle,
) -> None:
    """The gateway's figures of the half hour before a round appear in its decisions
    artifact beside the probes' evidence; the round's verdicts are the probes' alone (the
    production-suspect provider is clean in the probes and stays active); `canary status`
    then shows a gateway's ejection in force."""
    load_model(canary_env, MODEL, [endpoint("alpha-a/fp8"), endpoint("alpha-b/fp8"),
                                   endpoint("c/fp8"), endpoint("bad/fp8", defects=STRAY)])  # fmt: skip
    _write(load_settings().resolved_ledger_url, MODEL, T0)
    state = await canary_round(model=MODEL, mode="enforce", at=T0, return_state=True)
    summary = await state.aresult()
    assert isinstance(summary, RoundSummary)
    verdicts = {tag: verdict for tag, _, verdict, _ in summary.endpoints}
    assert verdicts["alpha-b/fp8"] == "clean" and verdicts["bad/fp8"] == "failed"
    async with get_client() as client:
        [artifact, *_] = await client.read_artifacts(
            artifact_filter=ArtifactFilter(
                key=ArtifactFilterKey(any_=[f"canary-decisions-{model_slug(MODEL)}"])
            ),
            sort=ArtifactSort.CREATED_DESC,
        )
    md = str(artifact.data)
    assert "## Production evidence (gateway, 30 min before this round)" in md
    assert (
        "- `alpha-b/fp8`: production: 8 of 20 replies rejected for a stray start, peers 0 of 20"
        in md
    )
    assert "suspect (start: 8 of 20 replies" in md and "ejected by the gateway for 180 s" in md
    assert md.index("## Failing endpoints") < md.index("## Production evidence")
    await asyncio.to_thread(_status_shows_the_ejection, MODEL)  # the CLI runs its own loop


def _status_shows_the_ejection(model: str) -> None:
    """`canary status` lists an ejection in force, as a gateway recorded it, within 80
    columns; `--json` has it under `gateway_ejections`."""
    _write(load_settings().resolved_ledger_url, model, datetime.now(UTC))
    result = runner.invoke(cli, ["status", "--model", model], terminal_width=80)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "ejected by a gateway" in out and "alpha-b/fp8  until" in out
    assert "8 of 20 replies rejected for a stray start" in out
    assert all(len(line) <= 80 for line in out.splitlines()), out
    result = runner.invoke(cli, ["status", "--model", model, "--json"])
    [row] = json.loads(result.output)["gateway_ejections"]
    assert (row["tag"], row["reason"], row["times"]) == ("alpha-b/fp8", "start", 1)
