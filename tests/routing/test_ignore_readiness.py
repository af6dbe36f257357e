"""The quarantine from the first request (SPEC R14, Q7; issue 31 item 2): a gateway built by
`build_router` with the quarantine's own source (Prefect's API of the test harness, reached
through a loopback TCP proxy the test makes slow or stops) loads the provider.ignore list of
every workload's models before it says it is ready, never routes a request without them,
keeps the last list when the source goes away (a log line, the `canary_router_ignore_*`
gauges) and keeps it in a file a restart with the source down uses.

    acme/q<id>   x-a (cheapest: the fleet serves it first; an operator's runtime exclusion)
                 x-b (next; a canary suspension, enforce mode), x-c (healthy)
    acme/r<id>   y-a            (the other workloads' route)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import shutil
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import yaml

from ground.settings import Settings, load_settings
from quarantine.adapters.incidents import aadd_runtime_exclusion, aremove_runtime_exclusion
from quarantine.adapters.store import aupdate_state
from quarantine.models import Mode, ModelState, ProviderState
from routing.compose import build_router
from routing.gateway import create_app
from routing.ignore_lists import (
    IgnoreFileError,
    KnownList,
    ListStatus,
    decode_lists,
    encode_lists,
    not_ready,
)
from routing.routes import DEFAULT_DIR
from tests.fixtures.fleet import FleetHandle
from tests.fixtures.routing import FAST, ServedApp, chat_body
from tests.fixtures.tcp_proxy import TcpProxy

KEY = "gw-ignore-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
EXCLUDED = {"x-a", "x-b"}


@dataclass
class World:
    mx: str  # the chat model, with the exclusions
    my: str  # the other workloads' model
    proxy: TcpProxy
    overrides: dict[str, Any]  # the gateway's settings: home, upstream, keys, contracts

    @property
    def settings(self) -> Settings:
        return self.with_routing()

    def with_routing(self, **routing: Any) -> Settings:
        o = self.overrides
        return load_settings(**{**o, "routing": {**o["routing"], **routing}})


def _endpoint(tag: str, price: str) -> dict[str, Any]:
    return {"tag": tag, "provider_name": tag.upper().replace("-", ""), "timing": dict(FAST),
            "faults": [], "defects": [], "pricing": {"prompt": price, "completion": "0.0000004"}}  # fmt: skip


def _contracts(tmp: Path, mx: str, my: str) -> Path:
    """The shipped contracts over two routes: chat on qx (mx), the others on qy (my)."""
    root = tmp / "contracts"
    shutil.copytree(DEFAULT_DIR, root)
    common = {"modalities": ["text", "image"], "context_length": 131072, "tools": True,
              "schema_modes": ["json_schema"], "model_class": "general",
              "pricing": {"prompt": 1e-7, "completion": 4e-7}}  # fmt: skip
    routes = {
        "version": 1,
        "routes": [
            {"id": "qx", "model": mx, "latency_p50_ms": 100, **common},
            {"id": "qy", "model": my, "latency_p50_ms": 300, **common},
        ],
        "groups": {
            "text": ["qx"],
            "schema": ["qy"],
            "tools": ["qy"],
            "vision": ["qy"],
            "long_context": ["qy"],
        },
    }
    (root / "routes.yaml").write_text(yaml.safe_dump(routes))
    return root


def _suspended(tag: str, now: datetime) -> Callable[[ModelState], tuple[ModelState, list[Any]]]:
    def update(state: ModelState) -> tuple[ModelState, list[Any]]:
        ps = ProviderState(suspended_at=now, suspended_until=now + timedelta(days=1),
                           suspensions=1, last_reasons=["stray_start"])  # fmt: skip
        return state.model_copy(update={"mode": Mode.ENFORCE, "providers": {tag: ps}}), []

    return update


@pytest.fixture
async def world(fleet: FleetHandle, prefect_api: None, tmp_path: Path) -> AsyncIterator[World]:
    """Fresh models with a canary suspension (x-b) and a runtime exclusion (x-a) in the
    harness's Prefect, the fleet serving them, and a proxy in front of that Prefect API."""
    from prefect.settings import PREFECT_API_URL

    tag = uuid.uuid4().hex[:8]
    mx, my = f"acme/q{tag}", f"acme/r{tag}"
    fleet.load({"name": "ignore-readiness", "seed": 1, "time_scale": 0.1, "models": [
        {"id": mx, "context_length": 131072, "endpoints": [
            _endpoint("x-a", "0.0000001"), _endpoint("x-b", "0.0000002"),
            _endpoint("x-c", "0.0000003")]},
        {"id": my, "context_length": 131072, "endpoints": [_endpoint("y-a", "0.0000001")]},
    ]})  # fmt: skip
    now = datetime.now(UTC)
    await aupdate_state(mx, _suspended("x-b", now))
    await aadd_runtime_exclusion(mx, "x-a", reason="test: incident", author="i31", now=now)
    proxy = TcpProxy(str(PREFECT_API_URL.value()))  # started by the test, in its own loop
    overrides = {
        "home": tmp_path / "home", "base_url": fleet.base_url, "api_key": fleet.key,
        "gateway": {"keys": [KEY]}, "routing": {"contracts_dir": _contracts(tmp_path, mx, my)},
    }  # fmt: skip
    try:
        yield World(mx, my, proxy, overrides)
    finally:
        await aremove_runtime_exclusion(mx, "x-a", actor="i31", now=datetime.now(UTC))


def _gateway(w: World, **routing: Any) -> ServedApp:
    """`canary gateway serve`'s composition: build_router with the quarantine's own source
    (through the proxy: the caller enters `_through(w.proxy)`)."""
    settings = w.with_routing(**routing)
    router = build_router(settings, events=False, suspect_events=False)
    return ServedApp(create_app(router, settings.gateway))


@contextlib.asynccontextmanager
async def _through(proxy: TcpProxy) -> AsyncIterator[TcpProxy]:
    """The proxy started, and Prefect's client settings pointing at it (the gateway's tasks
    inherit them); stopped at the end."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    await proxy.start()
    try:
        with temporary_settings({PREFECT_API_URL: proxy.url}):
            yield proxy
    finally:
        await proxy.stop()


def _served(fleet: FleetHandle, model: str) -> list[tuple[str | None, list[str]]]:
    """(tag, provider.ignore) of each upstream request for `model`."""
    return [
        (r.get("tag"), list((r["body"].get("provider") or {}).get("ignore", [])))
        for r in fleet.requests()
        if (r.get("body") or {}).get("model") == model
    ]


def _assert_quarantined(fleet: FleetHandle, model: str, at_least: int) -> None:
    served = _served(fleet, model)
    assert len(served) >= at_least, f"only {len(served)} upstream requests for {model}"
    leaked = [(tag, ignore) for tag, ignore in served if tag in EXCLUDED]
    assert not leaked, (
        f"{len(leaked)} of {len(served)} requests served by an excluded provider: {leaked[:3]}"
    )
    bare = [ignore for _, ignore in served if not set(ignore) >= EXCLUDED]
    assert not bare, f"{len(bare)} requests sent without the quarantine's exclusions: {bare[:3]}"


async def _burst(url: str, n: int) -> list[str]:
    """`n` concurrent chat requests through the OpenAI SDK (half streamed): their replies."""
    client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)
    messages: Any = chat_body()["messages"]

    async def one(i: int) -> str:
        if i % 2:
            stream = await client.chat.completions.create(
                model="chat", messages=messages, stream=True
            )
            return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        reply = await client.chat.completions.create(model="chat", messages=messages)
        return reply.choices[0].message.content or ""

    try:
        return await asyncio.gather(*(one(i) for i in range(n)))
    finally:
        await client.close()


async def _until(what: str, check: Any, within_s: float = 20.0) -> Any:
    """Poll `check()` (async) until it returns something truthy; fail naming `what`."""
    start = time.monotonic()
    while time.monotonic() - start < within_s:
        got = await check()
        if got:
            return got
        await asyncio.sleep(0.1)
    raise AssertionError(f"{what}: not within {within_s} s")


async def test_r14_q7_no_request_reaches_an_excluded_provider_from_the_first_one(
    world: World, fleet: FleetHandle
) -> None:
    """A gateway started while the ignore source takes 0.5 s per connection answers a
    burst of 40 concurrent SDK requests sent the moment it listens: every one is served,
    none by the runtime-excluded or the canary-suspended provider, each upstream request
    carrying both in provider.ignore (today the first fetch's 0.25 s bound ran out and the
    requests went out with the built-in layer alone)."""
    world.proxy.delay_s = 0.5
    async with _through(world.proxy), _gateway(world) as gw:
        replies = await _burst(gw.url, 40)
    assert len(replies) == 40 and all(replies), "a request of the burst got no reply"
    _assert_quarantined(fleet, world.mx, at_least=40)


async def test_r14_healthz_says_not_ready_until_every_list_is_loaded(
    world: World, fleet: FleetHandle
) -> None:
    """While the first fetches are in flight /healthz answers 503 not_ready naming each
    workload model still loading; once both lists are in it answers 200 with them."""
    world.proxy.delay_s = 1.0
    async with (
        _through(world.proxy),
        _gateway(world) as gw,
        httpx.AsyncClient(base_url=gw.url) as http,
    ):
        first = await http.get("/healthz")
        assert first.status_code == 503, f"ready before any list was loaded: {first.text}"
        body = first.json()
        assert body["status"] == "not_ready", body
        assert world.mx in body["reason"] and world.my in body["reason"], body["reason"]
        assert "first fetch in progress" in body["reason"], body["reason"]

        async def ready() -> Any:
            resp = await http.get("/healthz")
            return resp.json() if resp.status_code == 200 else None

        ok = await _until("/healthz ready", ready)
    lists = ok["ignore_lists"]
    assert {world.mx, world.my} <= set(lists), lists
    assert lists[world.mx]["loaded"] and lists[world.mx]["origin"] == "fetched", lists
    assert lists[world.mx]["source"] == "ok", lists


async def _metric(http: httpx.AsyncClient, name: str, model: str) -> float | None:
    text = (await http.get("/metrics")).text
    for line in text.splitlines():
        if line.startswith(f'{name}{{model="{model}"}}'):
            return float(line.rsplit(" ", 1)[1])
    return None


async def test_r14_the_source_stopped_mid_run_leaves_the_last_list_in_force(
    world: World, fleet: FleetHandle, caplog: pytest.LogCaptureFixture
) -> None:
    """The ignore source goes away while the gateway serves: the lists it had stay in force
    (no request to an excluded provider), `canary_router_ignore_source_failing` says so per
    model and counts the failed fetches, one log line says which list is kept, and neither
    the log nor the kept file holds the upstream key."""
    caplog.set_level(logging.WARNING, logger="routing.exclusions")
    async with (
        _through(world.proxy),
        _gateway(world, ignore_ttl_s=0.3) as gw,
        httpx.AsyncClient(base_url=gw.url) as http,
    ):
        await _until("the first lists", lambda: _ready(http))
        await _burst(gw.url, 6)
        await world.proxy.stop()

        async def failing() -> bool:
            return await _metric(http, "canary_router_ignore_source_failing", world.mx) == 1

        await _until("canary_router_ignore_source_failing == 1", failing)
        fleet.clear_requests()
        replies = await _burst(gw.url, 20)
        failures = await _metric(http, "canary_router_ignore_fetch_failures_total", world.mx)
        age = await _metric(http, "canary_router_ignore_list_age_seconds", world.mx)
        health = (await http.get("/healthz")).json()
    assert all(replies) and len(replies) == 20
    _assert_quarantined(fleet, world.mx, at_least=20)
    assert failures is not None and failures >= 1, failures
    assert age is not None and age > 0, age
    assert health["status"] == "ok" and health["ignore_lists"][world.mx]["source"].startswith(
        "failing"
    ), health
    said = [r.getMessage() for r in caplog.records if world.mx in r.getMessage()]
    assert any("ignore source failed" in m and "keeping the last list" in m for m in said), said
    assert not any("built-in layer" in m and "using" in m for m in said), said
    kept = world.settings.resolved_ignore_file.read_text()
    assert world.settings.api_key is not None
    secret = world.settings.api_key.get_secret_value()
    assert secret not in caplog.text and secret not in kept


async def _ready(http: httpx.AsyncClient) -> bool:
    return (await http.get("/healthz")).status_code == 200


async def test_r14_a_restart_with_the_source_down_uses_the_kept_lists(
    world: World, fleet: FleetHandle, caplog: pytest.LogCaptureFixture
) -> None:
    """A gateway that loaded its lists keeps them in <home>/gateway/ignore-lists.json; started
    again with the source down it says it is ready on the kept lists (origin persisted)
    once the source has failed, and a burst reaches no excluded provider."""
    caplog.set_level(logging.WARNING, logger="routing.exclusions")
    path = world.settings.resolved_ignore_file
    async with _through(world.proxy):
        async with _gateway(world) as gw, httpx.AsyncClient(base_url=gw.url) as http:
            await _until("the first lists", lambda: _ready(http))

            async def written() -> bool:
                return path.is_file() and world.mx in json.loads(path.read_text())["lists"]

            await _until(f"the lists kept in {path}", written)
        kept = json.loads(path.read_text())["lists"][world.mx]
        assert set(kept["tags"]) >= EXCLUDED, kept
        await world.proxy.stop()
        fleet.clear_requests()
        async with _gateway(world) as gw, httpx.AsyncClient(base_url=gw.url) as http:
            replies = await _burst(gw.url, 20)
            health = (await http.get("/healthz")).json()
    assert len(replies) == 20 and all(replies)
    _assert_quarantined(fleet, world.mx, at_least=20)
    assert health["status"] == "ok", health
    assert health["ignore_lists"][world.mx]["origin"] == "persisted", health
    said = [r.getMessage() for r in caplog.records if world.mx in r.getMessage()]
    assert any("using the list kept in" in m and str(path) in m for m in said), said


async def test_r14_no_list_at_all_is_not_ready_and_refuses_with_the_reason(
    world: World, fleet: FleetHandle, caplog: pytest.LogCaptureFixture
) -> None:
    """Source down and a kept file that is not JSON: the file is not used (a log line naming
    it), /healthz answers 503 naming the failing source and the unusable file, and a request
    is refused 503 quarantine_not_loaded without any upstream request."""
    caplog.set_level(logging.WARNING, logger="routing.exclusions")
    path = world.settings.resolved_ignore_file
    path.parent.mkdir(parents=True)
    path.write_text('{"version": 1, "lists": {"acme/q": {"tags": ["x-a"]')  # cut short
    fleet.clear_requests()
    async with _through(world.proxy):
        await world.proxy.stop()
        async with _gateway(world) as gw, httpx.AsyncClient(base_url=gw.url) as http:

            async def failed() -> Any:
                body = (await http.get("/healthz")).json()
                return body if "ignore source failed" in body.get("reason", "") else None

            health = await _until("/healthz naming the failing source", failed)
            refused = await http.post("/v1/chat/completions", json=chat_body(), headers=AUTH)
            status = (await http.get("/healthz")).status_code
    assert status == 503 and health["status"] == "not_ready", health
    assert world.mx in health["reason"] and "file is not used" in health["reason"], health
    assert refused.status_code == 503, refused.text
    assert refused.json()["error"]["reason"] == "quarantine_not_loaded", refused.text
    assert _served(fleet, world.mx) == [], "a request went upstream without the quarantine"
    assert any("ignore-list file not used" in r.getMessage() and str(path) in r.getMessage()
               for r in caplog.records), caplog.text  # fmt: skip


T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("raw", "names"),
    [
        (b'{"version": 1, "lists": {', "not JSON"),
        (b'{"version": 2, "lists": {}}', "not a version 1 ignore-list document"),
        (b'{"version": 1, "lists": []}', "'lists' must be an object"),
        (
            b'{"version": 1, "lists": {"acme/q": {"tags": "x-a", "fetched_at": "2026-05-01T12:00:00+00:00"}}}',
            "lists['acme/q']",
        ),
        (
            b'{"version": 1, "lists": {"acme/q": {"tags": ["x-a"], "fetched_at": "2026-05-01T12:00:00"}}}',
            "with a zone",
        ),
        (
            b'{"version": 1, "lists": {"acme/q": {"tags": ["x-a"], "fetched_at": "yesterday"}}}',
            "lists['acme/q']",
        ),
    ],
)
def test_r14_a_kept_file_that_cannot_be_used_is_refused_naming_why(raw: bytes, names: str) -> None:
    """The kept lists are used whole or not at all: each defect is an IgnoreFileError naming
    the file and what is wrong (no partly read file is routed with)."""
    with pytest.raises(IgnoreFileError, match=re.escape(names)) as refused:
        decode_lists(raw, "/state/gateway/ignore-lists.json")
    assert "/state/gateway/ignore-lists.json" in str(refused.value)


def test_r14_kept_lists_round_trip_as_persisted_and_readiness_names_the_missing() -> None:
    """What the gateway writes it reads back (tags, time; origin persisted); readiness is
    None only when every model has a list, else names each missing one and why."""
    lists = {"acme/q": KnownList(("x-b", "x-a"), T0), "acme/r": KnownList((), T0)}
    back = decode_lists(encode_lists(lists), "f")
    assert back == {
        "acme/q": KnownList(("x-a", "x-b"), T0, "persisted"),
        "acme/r": KnownList((), T0, "persisted"),
    }
    loaded = ListStatus("acme/q", back["acme/q"], failing=True, error="ConnectError", failures=3)
    loading = ListStatus("acme/r", None, failing=False, error=None, failures=0)
    failed = ListStatus("acme/s", None, failing=True, error="TimeoutError", failures=1)
    assert not_ready([loaded]) is None
    why = not_ready([loaded, loading, failed], "f: not JSON")
    assert why is not None and "2 model(s)" in why and "acme/q" not in why, why
    assert "acme/r: first fetch in progress" in why, why
    assert "acme/s: ignore source failed (TimeoutError)" in why and "f: not JSON" in why, why
    view = loaded.view(T0 + timedelta(seconds=90))
    assert view == {"loaded": True, "origin": "persisted", "age_s": 90.0,
                    "source": "failing (ConnectError)", "failures": 3}  # fmt: skip
