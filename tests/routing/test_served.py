"""Which provider served me? (SPEC O7): `canary served` finds the provider of a request made
through the gateway, by the model and the time a user reports and by the request id the
gateway returned, with the canary's standing of that endpoint then. Real HTTP to the fleet,
the gateway's events and the canary's ledger in real SQLite; the same queries on a throwaway
PostgreSQL (the scale path) when its server binaries and the driver are installed.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from canary.cli import app as cli
from ground.settings import GatewayConfig
from quarantine.adapters.ledger import Ledger
from quarantine.models import Decision, DecisionKind, Mode
from routing.events import EventLog
from routing.gateway import create_app
from routing.served import request_trail, served_around
from tests.fixtures.fleet import FleetHandle
from tests.fixtures.quarantine_support import C, F, report
from tests.fixtures.routing import (
    FAST,
    ServedApp,
    chat_body,
    make_router,
    routing_catalog,
    routing_scenario,
)
from tests.routing.test_midstream_continue import ASK
from tests.routing.test_midstream_continue import KEY as CONTINUE_KEY
from tests.routing.test_midstream_continue import _router as continue_router
from tests.routing.test_midstream_continue import _scenario as continue_scenario

KEY = "gw-served-key"
MODEL = "acme/alpha"
runner = CliRunner()


def _scenario() -> dict[str, Any]:
    scenario = routing_scenario(defects={"alpha-a": [{"kind": "stray_start", "rate": 1.0}]})
    scenario["models"][0]["endpoints"].append(
        {"tag": "alpha-c", "provider_name": "AlphaC", "timing": dict(FAST), "faults": [],
         "defects": [], "pricing": {"prompt": "0.0000003", "completion": "0.0000004"}}
    )  # fmt: skip
    return scenario


def _canary_then(url: str, at: datetime) -> None:
    """The canary judged alpha-a failed (observe mode: would suspend) ten minutes before."""
    rnd = report("r-1", at, {"alpha-a": F, "alpha-b": C, "alpha-c": C}, mode=Mode.OBSERVE,
                 model=MODEL)  # fmt: skip
    decision = Decision(model=MODEL, kind=DecisionKind.WOULD_SUSPEND, tag="alpha-a", at=at,
                        mode=Mode.OBSERVE, reason="start:stray_prefix", until=at + timedelta(days=1))  # fmt: skip
    ledger = Ledger(url)
    ledger.record(rnd, decisions=[decision])
    ledger.close()


async def _one_request_through_the_gateway(fleet: FleetHandle, url: str) -> str:
    """One streamed chat request; its first attempt (AlphaA) fails its start, AlphaB answers."""
    fleet.load(_scenario())
    events = EventLog(url)
    router = make_router(fleet.base_url, fleet.key, events=events, listed=True,
                         catalog=routing_catalog(chat={"route_groups": ["text"]}))  # fmt: skip
    app = create_app(router, GatewayConfig(keys=[KEY], events_flush_s=0.05))
    headers = {"Authorization": f"Bearer {KEY}"}
    async with (
        ServedApp(app) as s,
        httpx.AsyncClient(base_url=s.url) as http,
        http.stream(
            "POST", "/v1/chat/completions", json=chat_body(stream=True), headers=headers
        ) as resp,
    ):
        assert resp.status_code == 200
        async for _ in resp.aiter_bytes():
            pass
        request_id = resp.headers["x-request-id"]
    events.close()
    return request_id


def _check(url: str, request_id: str, around: datetime) -> None:
    """What both databases must answer: AlphaA rejected (stray start) with its standing,
    AlphaB accepted; the request's two attempts by its id."""
    by = {s.provider: s for s in served_around(url, MODEL, around, timedelta(minutes=15))}
    assert set(by) == {"AlphaA", "AlphaB"}
    bad, good = by["AlphaA"], by["AlphaB"]
    assert (bad.tag, bad.requests, bad.accepted, bad.rejected) == (
        "alpha-a",
        1,
        0,
        {"stray_start": 1},
    )
    assert (good.tag, good.accepted) == ("alpha-b", 1) and good.median_ttft_ms is not None
    assert bad.standing is not None and bad.standing.verdict == "failed"
    assert bad.standing.decision == "would_suspend" and bad.standing.until is not None
    assert good.standing is not None and good.standing.verdict == "clean"
    assert served_around(url, MODEL, around + timedelta(hours=2), timedelta(minutes=15)) == []
    trail = request_trail(url, request_id)
    assert trail is not None and trail.request is not None
    assert trail.request["final_provider"] == "AlphaB"
    assert [(a["provider"], a["reason"], a["excluded"]) for a in trail.attempts] == [
        ("AlphaA", "stray_start", None),
        ("AlphaB", None, "alpha-a"),
    ]
    first, fallback = trail.attempts
    assert first["note"] is None and fallback["fallback_reason"], trail.attempts
    assert fallback["note"] == f"fallback reason: {fallback['fallback_reason']}", fallback


async def test_o7_served_finds_the_provider_by_time_and_by_request_id(
    fleet: FleetHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user reports the model and about the time: `canary served` names AlphaA (its start
    rejected, the canary had judged it failed and would suspend it) and AlphaB (accepted);
    `--request` with the X-Request-Id lists the request's attempts (O7)."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    now = datetime.now(UTC)
    _canary_then(url, now - timedelta(minutes=10))
    request_id = await _one_request_through_the_gateway(fleet, url)
    _check(url, request_id, now + timedelta(minutes=3))
    monkeypatch.setenv("CANARY_LEDGER_URL", url)
    monkeypatch.setenv("CANARY_HOME", str(tmp_path / "home"))
    around = (now + timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%MZ")
    out = runner.invoke(cli, ["served", "--model", MODEL, "--around", around])
    assert out.exit_code == 0, out.output
    assert (
        "AlphaA [alpha-a]: 1 requests, 1 attempts, 0 accepted, rejected: stray_start 1"
        in out.output
    )
    assert "canary then: round failed" in out.output and "would_suspend" in out.output
    assert "AlphaB [alpha-b]: 1 requests, 1 attempts, 1 accepted" in out.output
    out = runner.invoke(cli, ["served", "--request", request_id, "--json"])
    assert out.exit_code == 0, out.output
    trail = json.loads(out.output)
    assert [a["provider_tag"] for a in trail["attempts"]] == ["alpha-a", "alpha-b"]
    assert all(a["budget_ms"] for a in trail["attempts"])
    out = runner.invoke(cli, ["served", "--request", "req-nope"])
    assert out.exit_code == 1 and "no request or operation 'req-nope'" in out.output
    out = runner.invoke(cli, ["served", "--model", MODEL, "--around", "yesterday"])
    assert out.exit_code == 2


@pytest.mark.slow
async def test_o7_served_on_postgresql(fleet: FleetHandle, pg_ledger_url: str) -> None:
    """The same request found in the scale path's database: a throwaway PostgreSQL cluster
    (`scale/postgres.py`) holding the gateway's events and the canary's ledger (O6, O7)."""
    now = datetime.now(UTC)
    _canary_then(pg_ledger_url, now - timedelta(minutes=10))
    request_id = await _one_request_through_the_gateway(fleet, pg_ledger_url)
    _check(pg_ledger_url, request_id, now + timedelta(minutes=3))


async def _continued_request(fleet: FleetHandle, url: str, beta_prefill: str) -> tuple[str, str]:
    """One streamed chat request through the gateway: alpha cuts the released stream and
    beta is asked to continue it (`beta_prefill`: its endpoint's prefill mode); the client's
    text and the request id the gateway returned."""
    fleet.load(continue_scenario(beta_prefill))
    router = continue_router(fleet, url)
    app = create_app(router, GatewayConfig(keys=[CONTINUE_KEY], events_flush_s=0.05))
    body = {"model": "chat", "messages": ASK, "stream": True}
    text = ""
    async with (
        ServedApp(app) as s,
        httpx.AsyncClient(base_url=s.url, timeout=30.0) as http,
        http.stream(
            "POST", "/v1/chat/completions", json=body,
            headers={"Authorization": f"Bearer {CONTINUE_KEY}"},
        ) as resp,
    ):  # fmt: skip
        assert resp.status_code == 200, resp.status_code
        async for line in resp.aiter_lines():
            if line.startswith("data: {"):
                for choice in json.loads(line[6:]).get("choices") or []:
                    text += (choice.get("delta") or {}).get("content") or ""
        request_id = resp.headers["x-request-id"]
    await router.events.aflush()  # type: ignore[union-attr]
    router.events.close()  # type: ignore[union-attr]
    return text, request_id


def _attempt_lines(output: str) -> list[str]:
    return [line.strip() for line in output.splitlines() if line.strip().startswith("#")]


@pytest.mark.parametrize(
    ("beta_prefill", "verb"), [("continue", "continued"), ("reject", "tried to continue")]
)
async def test_r15_served_shows_the_continuation_of_a_cut_stream(
    fleet: FleetHandle,
    ledger_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    beta_prefill: str,
    verb: str,
) -> None:
    """A stream alpha cut after release, continued on beta through the real gateway (or
    beta refusing the prefill): `canary served --request ID` lists both attempts and says in
    words which one continued the answer after which cut, on which model (text and JSON);
    `--model acme/beta --around` counts the request beta continued (R15, O7)."""
    now = datetime.now(UTC)
    text, request_id = await _continued_request(fleet, ledger_url, beta_prefill)
    assert len(text) > 40, text
    monkeypatch.setenv("CANARY_LEDGER_URL", ledger_url)
    monkeypatch.setenv("CANARY_HOME", str(tmp_path / "home"))
    out = runner.invoke(cli, ["served", "--request", request_id])
    assert out.exit_code == 0, out.output
    first, second = _attempt_lines(out.output)
    assert first.startswith("#0 alpha acme/alpha") and "(stream_cut)" in first, out.output
    assert "continue" not in first and "fallback reason" not in first, out.output
    assert second.startswith("#1 beta acme/beta"), out.output
    assert second.endswith(f"; {verb} the answer after stream_cut on acme/alpha (#0)"), out.output
    assert (": accepted," in second) == (beta_prefill == "continue"), out.output
    out = runner.invoke(cli, ["served", "--request", request_id, "--json"])
    assert out.exit_code == 0, out.output
    attempts = json.loads(out.output)["attempts"]
    assert [(a["route_id"], a["fallback_reason"], a["note"]) for a in attempts] == [
        ("alpha", None, None),
        ("beta", "midstream_continue:stream_cut",
         f"{verb} the answer after stream_cut on acme/alpha (#0)"),
    ], attempts  # fmt: skip
    assert attempts[0]["continues"] is None, attempts[0]
    assert attempts[1]["continues"] == {
        "attempt_index": 0, "route_id": "alpha", "model": "acme/alpha",
        "provider": attempts[0]["provider"],
    }, attempts[1]  # fmt: skip
    around = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    out = runner.invoke(cli, ["served", "--model", "acme/beta", "--around", around])
    assert out.exit_code == 0, out.output
    counted = "1 accepted (1 continuing a cut stream)" in out.output
    assert counted == (beta_prefill == "continue"), out.output
