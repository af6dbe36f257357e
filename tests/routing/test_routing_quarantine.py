"""The quarantine's provider.ignore reaches every upstream request (SPEC R6, Q7), with the
real exclusion source under Prefect's test harness."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

from ground.settings import RoutingConfig
from quarantine.adapters.incidents import aadd_runtime_exclusion, aremove_runtime_exclusion
from routing.exclusions import CachedIgnoreSource, quarantine_source
from routing.routes import Catalog
from tests.fixtures.fleet import FleetHandle
from tests.fixtures.routing import (
    chat_body,
    make_router,
    routes_table,
    routing_catalog,
    routing_scenario,
)


def _catalog() -> Catalog:
    """Chat on alpha only, so every request reaches acme/alpha (ranking cannot move it)."""
    groups = {
        "text": ["alpha"],
        "schema": ["beta"],
        "tools": ["beta"],
        "vision": ["vision"],
        "long_context": ["vision"],
    }
    return routing_catalog(routes_table(groups=groups), chat={"route_groups": ["text"]})


async def test_r6_q7_quarantined_endpoint_is_never_chosen(
    fleet: FleetHandle, prefect_api: None
) -> None:
    """A runtime exclusion of alpha-a is passed as provider.ignore on every request; alpha-a never serves (R6, Q7)."""
    fleet.load(routing_scenario())
    now = datetime.now(UTC)
    await aadd_runtime_exclusion(
        "acme/alpha", "alpha-a", reason="test: stray starts", author="h5-test", now=now
    )
    try:
        source = CachedIgnoreSource(
            quarantine_source(), RoutingConfig(ignore_ttl_s=5.0, ignore_fetch_timeout_s=10.0)
        )
        router = make_router(fleet.base_url, fleet.key, catalog=_catalog(), ignore_source=source)
        for _ in range(5):
            result = await router.complete(chat_body(), workload="chat")
            assert result.route.id == "alpha" and result.completion.provider == "AlphaB", (
                result.attempts,
                fleet.requests()[-1]["body"].get("provider"),
            )
        log = fleet.requests()
        assert [r["tag"] for r in log] == ["alpha-b"] * 5
        assert all("alpha-a" in r["body"]["provider"]["ignore"] for r in log)
        assert all(
            r["body"]["provider"]["allow_fallbacks"] is False for r in log
        )  # R3: no aggregator retries
    finally:
        await aremove_runtime_exclusion(
            "acme/alpha", "alpha-a", actor="h5-test", now=datetime.now(UTC)
        )


async def test_r6_runtime_exclusion_reaches_the_router_within_seconds(
    fleet: FleetHandle, prefect_api: None
) -> None:
    """An exclusion added while the router runs takes effect within ~TTL, without a restart (R6, Q7)."""
    fleet.load(routing_scenario())
    tag = "alpha-a"
    source = CachedIgnoreSource(
        quarantine_source(), RoutingConfig(ignore_ttl_s=0.5, ignore_fetch_timeout_s=10.0)
    )
    router = make_router(fleet.base_url, fleet.key, catalog=_catalog(), ignore_source=source)
    assert (await router.complete(chat_body(), workload="chat")).completion.provider == "AlphaA"
    await aadd_runtime_exclusion(
        "acme/alpha",
        tag,
        reason=f"incident {uuid.uuid4().hex[:6]}",
        author="h5-test",
        now=datetime.now(UTC),
    )
    try:
        added = time.monotonic()
        while True:
            result = await router.complete(chat_body(), workload="chat")
            if result.completion.provider == "AlphaB":
                break
            assert time.monotonic() - added < 5.0, (
                "the exclusion did not reach the router within 5 s"
            )
        assert time.monotonic() - added < 3.0
    finally:
        await aremove_runtime_exclusion("acme/alpha", tag, actor="h5-test", now=datetime.now(UTC))
