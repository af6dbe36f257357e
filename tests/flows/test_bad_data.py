"""Bad data never makes the canary quiet or blind: a hand-edited runtime-exclusions
Variable with an invalid entry still lets the other entries and the canary's suspensions
apply (in `canary ignore`, `canary status` and the gateway), naming the bad entry; a
ledger that cannot be written leaves the round "Completed with warnings", alerts, and the
CLI says so. Real fleet, Prefect's real local API, real SQLite."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from prefect import get_client
from prefect.variables import Variable
from typer.testing import CliRunner

from canary.cli import app
from flows.canary_round import RoundSummary, canary_round
from ground.settings import RoutingConfig
from ground.slugs import model_slug
from quarantine.adapters.incidents import variable_name
from quarantine.adapters.store import BLOCK_TYPE_SLUG, aupdate_state
from quarantine.exclusions import RuntimeExclusion
from routing.exclusions import CachedIgnoreSource, quarantine_source
from tests.fixtures.canary_env import STRAY, endpoint, load_model
from tests.fixtures.fleet import FleetHandle
from tests.fixtures.quarantine_support import F, run
from tests.fixtures.routing import chat_body, make_router, routing_scenario
from tests.routing.test_routing_quarantine import _catalog

HALF_HOUR = timedelta(minutes=30)


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def _entries(now: datetime) -> list[Any]:
    good = RuntimeExclusion(tag="b", reason="outage", author="ops", added_at=now)
    return [
        {"tag": "typo/fp8", "reason": "", "author": "ops", "added_at": "yesterday"},
        json.loads(good.model_dump_json()),
    ]


def test_invalid_runtime_entry_is_named_and_the_rest_apply_in_ignore_and_status(
    canary_env: FleetHandle,
) -> None:
    """A UI-edited entry that does not validate: `canary ignore` still prints the canary
    suspension and the valid incident (exit 0) and warns naming the entry; status too."""
    model = "test/bad-variable"
    load_model(
        canary_env,
        model,
        [endpoint("a/fp8"), endpoint("b/fp8"), endpoint("bad/fp8", defects=STRAY)],
    )
    now = datetime.now(UTC).replace(microsecond=0)
    for k in (2, 1):
        at = (now - k * HALF_HOUR).isoformat()
        code, out, err = _run("round", "--model", model, "--mode", "enforce", "--at", at)
        assert code == 0, out + err
    Variable.set(variable_name(model), {"version": 1, "entries": _entries(now)}, overwrite=True)

    code, out, err = _run("ignore", "--model", model)
    assert code == 0, out + err
    assert json.loads(out) == ["b", "bad/fp8"]
    assert "entry 0 ('typo/fp8') skipped" in err and variable_name(model) in err

    code, out, err = _run("status", "--model", model, "--json")
    assert code == 0, out + err
    status = json.loads(out)
    assert status["ignore"] == ["b", "bad/fp8"]
    assert any("typo/fp8" in w for w in status["warnings"])


async def test_the_gateway_keeps_the_canary_layer_when_the_variable_is_bad(
    fleet: FleetHandle, prefect_api: None
) -> None:
    """A gateway starting while the Variable has an invalid entry still sends the canary's
    suspension and the valid incident entry in provider.ignore (not just the built-ins)."""
    fleet.load(routing_scenario())
    model = "acme/alpha"
    now = datetime.now(UTC)
    await aupdate_state(model, lambda s: run([{"alpha-zz": F}] * 2, state=s, start=now - HALF_HOUR))
    entries = _entries(now)
    entries[1]["tag"] = "alpha-yy"
    await Variable.aset(variable_name(model), {"version": 1, "entries": entries}, overwrite=True)
    try:
        # a generous fetch bound: this test is about a bad entry, not a slow store
        limits = RoutingConfig(ignore_ttl_s=60.0, ignore_fetch_timeout_s=10.0)
        source = CachedIgnoreSource(quarantine_source(), limits)
        router = make_router(fleet.base_url, fleet.key, catalog=_catalog(), ignore_source=source)
        await router.complete(chat_body(), workload="chat")
        ignore = fleet.requests()[-1]["body"]["provider"]["ignore"]
        assert {"alpha-zz", "alpha-yy"} <= set(ignore), ignore
        assert "typo/fp8" not in ignore
    finally:
        await Variable.aunset(variable_name(model))
        async with get_client() as client:
            doc = await client.read_block_document_by_name(model_slug(model), BLOCK_TYPE_SLUG)
            await client.delete_block_document(doc.id)


async def test_a_ledger_that_cannot_be_written_makes_the_round_say_so(
    canary_env: FleetHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A corrupt ledger file: the round still applies, but its state is "Completed with
    warnings" naming the ledger, the summary carries the warning, and state is written."""
    ledger = tmp_path / "corrupt.db"
    ledger.write_bytes(b"this is not an SQLite database\n" * 100)
    monkeypatch.setenv("CANARY_LEDGER_URL", f"sqlite:///{ledger}")
    model = "test/bad-ledger"
    load_model(canary_env, model, [endpoint("a/fp8"), endpoint("b/fp8")])
    at = datetime(2026, 11, 8, tzinfo=UTC)
    state = await canary_round(model=model, at=at, return_state=True)
    assert state.is_completed() and state.name == "Completed with warnings", state
    assert "ledger write failed" in (state.message or "")
    summary = await state.aresult()
    assert isinstance(summary, RoundSummary) and summary.round_id
    assert summary.warnings and "DatabaseError" in summary.warnings[0]
    async with get_client() as client:
        assert state.state_details.flow_run_id is not None
        run_ = await client.read_flow_run(state.state_details.flow_run_id)
    assert run_.state is not None and run_.state.name == "Completed with warnings"


def test_the_cli_prints_the_ledger_warning(
    canary_env: FleetHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`canary round` prints the table and a `warning: ledger write failed` line."""
    ledger = tmp_path / "corrupt.db"
    ledger.write_bytes(b"garbage" * 500)
    monkeypatch.setenv("CANARY_LEDGER_URL", f"sqlite:///{ledger}")
    model = "test/bad-ledger-cli"
    load_model(canary_env, model, [endpoint("a/fp8"), endpoint("b/fp8")])
    code, out, err = _run("round", "--model", model, "--at", "2026-11-08T00:00:00Z")
    assert code == 0, out + err
    assert "a/fp8" in out
    assert err.startswith("warning: ledger write failed"), err
    assert asyncio.run(_completed_with_warnings(model))


async def _completed_with_warnings(model: str) -> bool:
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName

    async with get_client() as client:
        runs = await client.read_flow_runs(
            flow_run_filter=FlowRunFilter(name=FlowRunFilterName(like_=model))
        )
    return [r.state.name for r in runs if r.state] == ["Completed with warnings"]
