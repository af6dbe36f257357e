"""The router's own report (SPEC R11): `canary gateway report` prints the figures from the
ledger and warns in words when HTTP success holds or rises while validation rejection rises;
/metrics carries the same figures. Real HTTP to the fleet through the gateway, real SQLite.

The scenario built to trigger the warning: first alpha answers 502 (an HTTP failure, nothing
rejected), then alpha answers 200 with replies that miss a required field (HTTP success,
rejected); beta answers both phases' fallbacks, and after its first failure alpha ranks
below beta (route health), so each phase has one fallback in twelve requests. The first
phase's events are moved 40 minutes back, into the earlier half of the report's hour (the
halves are of wall-clock time).
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from canary.cli import app as cli
from ground.settings import GatewayConfig, RoutingConfig
from routing.events import EventLog
from routing.gateway import create_app
from routing.masking import MaskingWatch, Rates, masking_warning
from tests.fixtures.fleet import FleetHandle
from tests.fixtures.routing import (
    ServedApp,
    chat_body,
    make_router,
    routing_catalog,
    routing_scenario,
)

KEY = "gw-report-key"
HEADERS = {"Authorization": f"Bearer {KEY}", "X-Workload": "classify"}
runner = CliRunner()


async def _phase(fleet: FleetHandle, url: str, scenario: dict[str, object], n: int) -> str:
    """`n` classify requests through a gateway on `scenario`; the /metrics text after them."""
    fleet.load(scenario)
    events = EventLog(url)
    router = make_router(fleet.base_url, fleet.key, events=events,
                         catalog=routing_catalog(classify={"hedge_after_ms": None, "semantic": None}))  # fmt: skip
    app = create_app(router, GatewayConfig(keys=[KEY], events_flush_s=0.05))
    async with ServedApp(app) as s, httpx.AsyncClient(base_url=s.url) as http:
        for _ in range(n):
            r = await http.post("/v1/chat/completions", json=chat_body("Classify: refund"),
                                headers=HEADERS)  # fmt: skip
            assert r.status_code == 200, r.text
        text = (await http.get("/metrics")).text
    events.close()
    return text


def _move_back(path: Path, minutes: int) -> None:
    with sqlite3.connect(path) as db:
        for table in ("routing_attempts", "routing_requests"):
            db.execute(f"UPDATE {table} SET at = datetime(at, '-{minutes} minutes')")


async def test_r11_gateway_report_prints_the_table_and_warns_when_success_masks_rejections(
    fleet: FleetHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HTTP success rose (92% -> 100% of attempts) while validation rejection rose (0% -> 8%):
    the report prints every R11 figure and the warning in words; --json carries the same; the
    later phase alone has no earlier half to rise from (R11)."""
    path = tmp_path / "ledger.db"
    url = f"sqlite:///{path}"
    bad_gateway = routing_scenario(
        faults={"alpha-a": [{"kind": "http_error", "status": 502, "rate": 1.0}]}
    )
    missing = routing_scenario(defects={"alpha-a": [{"kind": "schema_break", "modes": ["missing_field"], "rate": 1.0}]})  # fmt: skip
    await _phase(fleet, url, bad_gateway, 12)
    _move_back(path, 40)
    metrics = await _phase(fleet, url, missing, 12)
    monkeypatch.setenv("CANARY_LEDGER_URL", url)
    monkeypatch.setenv("CANARY_HOME", str(tmp_path / "home"))
    out = runner.invoke(cli, ["gateway", "report", "--since", "1h"], terminal_width=100)
    assert out.exit_code == 0, out.output
    text = out.output
    for line in ("24 requests, 24 accepted", "fallback rate                   8.3%",
                 "attempts per completed request  1.08", "deadline exhaustion             0.0%",
                 "HTTP success                    96.2% of attempts",
                 "validation rejection            4.0% of HTTP-successful attempts",
                 "ambiguous outcomes              0", "cost per accepted answer        $0.0",
                 "latency by final route", "    beta "):  # fmt: skip
        assert line in text, (line, text)
    assert "warning: HTTP success rose (92% -> 100% of attempts) while validation rejection" in text
    assert "rose (0% -> 8% of HTTP-successful attempts)" in text
    out = runner.invoke(cli, ["gateway", "report", "--since", "1h", "--json"])
    figures = json.loads(out.output)
    assert figures["halves"]["earlier"]["attempts"] == 13 and figures["warning"]
    out = runner.invoke(cli, ["gateway", "report", "--since", "10m"])
    assert out.exit_code == 0 and "warning" not in out.output  # the later phase alone
    assert "canary_router_validation_rejection_rate 0.0769" in metrics  # 1 of 13, this process
    assert (
        "canary_router_fallback_rate 0.0833" in metrics
        and "canary_router_masking_warning 0.0" in metrics
    )
    out = runner.invoke(cli, ["gateway", "report", "--since", "soon"])
    assert out.exit_code == 2


def test_r11_the_warning_needs_both_rates_and_enough_attempts() -> None:
    """Rejection must rise by masking_min_rise while HTTP success does not fall, each half
    with masking_min_attempts attempts; the /metrics watch keeps the same halves over its
    window from the attempts it observed (R11)."""
    config = RoutingConfig(masking_min_rise=0.1, masking_min_attempts=4, masking_window_s=120)
    steady = Rates(attempts=10, http_ok=10, rejected=0)
    assert masking_warning(steady, Rates(10, 10, 5), config) is not None  # held, rejection up
    assert masking_warning(steady, Rates(10, 8, 5), config) is None  # HTTP success fell
    assert masking_warning(steady, Rates(10, 10, 0), config) is None
    assert masking_warning(Rates(2, 2, 0), Rates(10, 10, 5), config) is None  # too few
    watch = MaskingWatch(config)
    for i in range(6):
        watch.observe(http_ok=i % 2 == 0, rejected=False, now=1000.0 + i)
    for i in range(6):
        watch.observe(http_ok=True, rejected=i % 2 == 0, now=1070.0 + i)
    earlier, later = watch.halves(1080.0)
    assert (earlier, later) == (Rates(6, 3, 0), Rates(6, 6, 3))
    assert watch.warning(1080.0) is not None
    assert watch.halves(1300.0) == (Rates(), Rates())  # the window moved past both


def test_r11_report_on_an_empty_window_is_all_zeros(tmp_path: Path) -> None:
    """No traffic: every figure 0, no warning, no route (R11)."""
    from routing.report import router_report

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    EventLog(url).close()
    r = router_report(url, since=datetime.now(UTC) - timedelta(hours=1))
    assert (r["requests"], r["fallback_rate"], r["warning"], r["latency_ms_by_final_route"]) == (
        0, 0.0, None, {},
    )  # fmt: skip
