"""The OpenAI-compatible gateway over real HTTP: the `openai` client -> gateway -> fleet (SPEC R7, R10, R11)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from ground.settings import GatewayConfig
from routing.events import EventLog
from routing.gateway import GatewayApp, create_app
from routing.records import sha256_text
from routing.report import router_report
from routing.router import Router
from tests.fixtures.fleet import FleetHandle
from tests.fixtures.routing import (
    ServedApp,
    chat_body,
    make_router,
    routing_catalog,
    routing_scenario,
    served_tags,
)

KEY = "gw-test-key"


def _app(fleet: FleetHandle, ledger_url: str | None = None, **kw: Any) -> tuple[GatewayApp, Router]:
    events = EventLog(ledger_url) if ledger_url else None
    router = make_router(fleet.base_url, fleet.key, events=events, **kw)
    return create_app(router, GatewayConfig(keys=[KEY], events_flush_s=0.05)), router


async def test_r7_openai_client_non_stream_and_stream(fleet: FleetHandle) -> None:
    """The official openai client gets an accepted answer, streamed and not, with the operation id echoed (R7)."""
    fleet.load(routing_scenario())
    app, _ = _app(fleet)
    async with ServedApp(app) as s:
        client = openai.AsyncOpenAI(base_url=f"{s.url}/v1", api_key=KEY, max_retries=0)
        raw = await client.chat.completions.with_raw_response.create(
            model="chat",
            messages=[{"role": "user", "content": "Continue the scene, please."}],
            extra_headers={"Idempotency-Key": "op-client-1"},
        )
        reply = raw.parse()
        assert raw.headers["x-operation-id"] == "op-client-1" and raw.headers["x-route"] == "alpha"
        assert reply.choices[0].message.content and reply.model == "acme/alpha"
        stream = await client.chat.completions.create(
            model="chat", messages=[{"role": "user", "content": "Go on."}], stream=True
        )
        pieces = [c.choices[0].delta.content or "" async for c in stream if c.choices]
        assert pieces and "".join(pieces).strip()  # piece by piece: test_gateway_stream
        await client.close()
    assert [r["stream"] for r in fleet.requests()] == [
        True,
        True,
    ]  # the upstream is always streamed


async def test_r7_stray_start_client_never_sees_the_stray_bytes(fleet: FleetHandle) -> None:
    """Streaming chat whose primary starts with a stray byte: the client's first byte comes from the fallback (R7, C9)."""
    fleet.load(routing_scenario(defects={"alpha-a": [{"kind": "stray_start", "rate": 1.0}]}))
    app, _ = _app(fleet)
    async with (
        ServedApp(app) as s,
        httpx.AsyncClient(base_url=s.url) as http,
        http.stream(
            "POST",
            "/v1/chat/completions",
            json=chat_body(stream=True),
            headers={"Authorization": f"Bearer {KEY}"},
        ) as resp,
    ):
        assert resp.headers["x-route"] == "beta"
        lines = [line async for line in resp.aiter_lines() if line.startswith("data: {")]
    first = json.loads(lines[0][6:])["choices"][0]["delta"]["content"]
    assert first.strip() and first.lstrip()[0] not in ",;:)]}.!?|"
    assert served_tags(fleet.requests()) == ["alpha-a", "beta-a"]


async def test_r7_failure_after_release_ends_the_stream_with_an_in_band_error(
    fleet: FleetHandle, ledger_url: str
) -> None:
    """A cut after the checked head reached the client ends the SSE with finish_reason error; the request is recorded ambiguous (R7, R10)."""
    fleet.load(
        routing_scenario(
            faults={"alpha-a": [{"kind": "stream_cut", "after_fraction": 0.9, "rate": 1.0}]}
        )
    )
    app, router = _app(fleet, ledger_url)
    async with ServedApp(app) as s, httpx.AsyncClient(base_url=s.url) as http:
        resp = await http.post(
            "/v1/chat/completions",
            json=chat_body(stream=True),
            headers={"Authorization": f"Bearer {KEY}"},
        )
    chunks = [json.loads(line[6:]) for line in resp.text.splitlines() if line.startswith("data: {")]
    assert chunks[-1]["choices"][0]["finish_reason"] == "error" and "[DONE]" not in resp.text
    assert chunks[-1]["error"]["metadata"]["error_type"] == "ambiguous_completion"
    await router.events.aflush()  # type: ignore[union-attr]
    with sqlite3.connect(ledger_url.removeprefix("sqlite:///")) as db:
        assert db.execute("select outcome, reason from routing_requests").fetchall() == [
            ("ambiguous_completion", "stream_cut")
        ]


async def test_r2_errors_in_openai_shape_with_failure_class_and_operation_id(
    fleet: FleetHandle,
) -> None:
    """Exhausted routes give an OpenAI-shaped error carrying our failure class and the echoed operation id (R2)."""
    fleet.load(
        routing_scenario(
            faults={
                t: [{"kind": "http_error", "status": 502, "rate": 1.0}]
                for t in ("alpha-a", "beta-a")
            }
        )
    )
    app, _ = _app(fleet, catalog=routing_catalog(chat={"route_groups": ["text"]}))
    async with ServedApp(app) as s:
        client = openai.AsyncOpenAI(base_url=f"{s.url}/v1", api_key=KEY, max_retries=0)
        with pytest.raises(openai.APIStatusError) as err:
            await client.chat.completions.create(
                model="chat",
                messages=[{"role": "user", "content": "hi"}],
                extra_headers={"X-Operation-Id": "op-fail-7"},
            )
        await client.close()
    assert err.value.status_code == 503
    body = err.value.response.json()["error"]
    assert (
        body["failure_class"] == "capacity"
        and body["operation_id"] == "op-fail-7"
        and body["attempts"] == 2
    )
    assert err.value.response.headers["x-operation-id"] == "op-fail-7"
    assert len(fleet.requests()) == 2


async def test_gateway_auth_uses_its_own_keys_never_the_upstream_key(fleet: FleetHandle) -> None:
    """Only the gateway's keys pass; the upstream key is refused; bad bodies and workloads are explicit 400s."""
    fleet.load(routing_scenario())
    app, _ = _app(fleet)
    async with ServedApp(app) as s, httpx.AsyncClient(base_url=s.url) as http:
        for headers in (
            {},
            {"Authorization": "Bearer nope"},
            {"Authorization": f"Bearer {fleet.key}"},
        ):
            r = await http.post(
                "/v1/chat/completions",
                json=chat_body(),
                headers=headers,
            )
            assert (
                r.status_code == 401 and r.json()["error"]["failure_class"] == "permanent_request"
            )
            assert r.headers["x-operation-id"].startswith("op-")
        auth = {"Authorization": f"Bearer {KEY}"}
        r = await http.post("/v1/chat/completions", content=b"{nope", headers=auth)
        assert r.status_code == 400 and r.json()["error"]["reason"] == "invalid_request"
        r = await http.post(
            "/v1/chat/completions", json=chat_body(), headers={**auth, "X-Workload": "poetry"}
        )
        assert r.status_code == 400 and r.json()["error"]["reason"] == "unknown_workload"
        r = await http.post(
            "/v1/chat/completions",
            json=chat_body(),
            headers={**auth, "Idempotency-Key": "bad key with spaces"},
        )
        assert r.status_code == 400 and r.json()["error"]["reason"] == "invalid_operation_id"
        assert (await http.get("/healthz")).json()["status"] == "ok"
    assert fleet.requests() == []


async def test_r10_r11_events_hashed_metrics_and_report(
    fleet: FleetHandle, ledger_url: str
) -> None:
    """Events land in the ledger hashed and key-free; /metrics and the pandas report show HTTP success vs validation rejection (R10, R11)."""
    fleet.load(
        routing_scenario(
            defects={"alpha-a": [{"kind": "schema_break", "modes": ["missing_field"], "rate": 1.0}]}
        )
    )
    app, router = _app(
        fleet,
        ledger_url,
        catalog=routing_catalog(classify={"semantic": None, "hedge_after_ms": None}),
    )
    prompt = "Secret customer text: my card 4111 was charged twice."
    async with ServedApp(app) as s, httpx.AsyncClient(base_url=s.url) as http:
        for _ in range(2):
            r = await http.post(
                "/v1/chat/completions",
                json={"messages": [{"role": "user", "content": prompt}]},
                headers={"Authorization": f"Bearer {KEY}", "X-Workload": "classify"},
            )
            assert r.status_code == 200 and r.headers["x-route"] == "beta"
        metrics = (await http.get("/metrics")).text
    assert (
        'canary_router_validation_rejections_total{reason="missing_field",route="alpha",workload="classify"} 1.0'
        in metrics
    )
    assert 'canary_router_http_success_total{route="alpha",workload="classify"} 1.0' in metrics
    with sqlite3.connect(ledger_url.removeprefix("sqlite:///")) as db:
        rows = (
            db.execute("select * from routing_requests").fetchall()
            + db.execute("select * from routing_attempts").fetchall()
        )
        reqs = db.execute(
            "select outcome, attempts, fallbacks, prompt_sha256 from routing_requests"
        ).fetchall()
    dump = json.dumps(rows, default=str)
    # no key and no prompt text: words, not the card digits, which a latency float can hold
    assert fleet.key not in dump and KEY not in dump
    assert "customer" not in dump and "card 4111" not in dump and "charged" not in dump
    digest = sha256_text([{"role": "user", "content": prompt}])
    # the first request is rejected on alpha and falls back; health ranking sends the second to beta
    assert reqs == [("accepted", 2, 1, digest), ("accepted", 1, 0, digest)]
    assert len(sha256_text("x")) == len(hashlib.sha256(b"x").hexdigest())
    report = router_report(ledger_url, since=datetime.now(UTC) - timedelta(minutes=5))
    assert report["requests"] == 2 and report["fallback_rate"] == 0.5
    assert report["http_success_rate"] == 1.0 and report[
        "validation_rejection_rate"
    ] == pytest.approx(1 / 3)
    assert report["attempts_per_completed_request"] == 1.5 and report["cost_per_accepted_usd"] > 0
    assert router.metrics.snapshot()["validation_rejection_rate"] == pytest.approx(1 / 3)
    assert (
        router_report(ledger_url, since=datetime.now(UTC) + timedelta(minutes=5))["requests"] == 0
    )


def test_gateway_serve_refuses_without_keys_or_with_a_bad_contract_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`canary gateway serve` exits 2 with a clear message: no client keys, or a contract error naming file and field (R1)."""
    from typer.testing import CliRunner

    from canary.cli import app

    monkeypatch.delenv("CANARY_GATEWAY__KEYS", raising=False)
    result = CliRunner().invoke(app, ["gateway", "serve", "--port", "0"])
    assert result.exit_code == 2 and "CANARY_GATEWAY__KEYS" in result.output
    bad = tmp_path / "contracts"
    bad.mkdir()
    (bad / "routes.yaml").write_text("version: 1\nroutes: []\ngroups: {}\n")
    (bad / "chat.yaml").write_text("workload: chat\n")
    monkeypatch.setenv("CANARY_GATEWAY__KEYS", "k1,k2")
    result = CliRunner().invoke(
        app, ["gateway", "serve", "--port", "0", "--contracts", str(bad), "--no-quarantine"]
    )
    assert result.exit_code == 2 and "chat.yaml: version: Field required" in result.output


async def test_r1_openai_sdk_lists_the_workloads_and_selects_one_by_model(
    fleet: FleetHandle,
) -> None:
    """An off-the-shelf OpenAI client, no custom header: `models.list()` shows the workloads
    (OpenAI's list shape) and `model="classify"` is served by the classify contract (its
    schema-valid label); the X-Workload header still wins over `model`; a name that is no
    workload is a 400 naming the known ones, with the request id (R1)."""
    fleet.load(routing_scenario())
    app, _ = _app(fleet, catalog=routing_catalog(classify={"hedge_after_ms": None}))
    async with ServedApp(app) as s:
        client = openai.AsyncOpenAI(base_url=f"{s.url}/v1", api_key=KEY, max_retries=0)
        listed = await client.models.list()
        assert [m.id for m in listed.data] == [
            "chat",
            "classify",
            "invoice_extraction",
            "tool_agent",
        ]
        assert all(m.object == "model" and m.owned_by == "provider-canary" for m in listed.data)
        msg = [{"role": "user", "content": "My card was charged twice, please help."}]
        raw = await client.chat.completions.with_raw_response.create(model="classify", messages=msg)
        label = json.loads(raw.parse().choices[0].message.content or "{}")["label"]
        assert label in {"billing", "technical", "account", "other"}
        assert raw.headers["x-request-id"].startswith("req-")
        headed = await client.chat.completions.create(
            model="classify", messages=msg, extra_headers={"X-Workload": "chat"}
        )
        assert not headed.choices[0].message.content.lstrip().startswith("{")
        with pytest.raises(openai.BadRequestError) as err:
            await client.chat.completions.create(model="gpt-4o", messages=msg)
        await client.close()
    error = err.value.response.json()["error"]
    assert error["reason"] == "unknown_workload" and "'invoice_extraction'" in error["message"]
    assert error["request_id"] == err.value.response.headers["x-request-id"]
    assert [r["body"].get("response_format") is not None for r in fleet.requests()] == [True, False]
