"""Smoke: the router answers over the fleet (R1, R6, R7)."""

from __future__ import annotations

from tests.fixtures.fleet import FleetHandle
from tests.fixtures.routing import chat_body, make_router, routing_scenario, served_tags


async def test_r6_r7_plain_chat_accepted_on_first_route(fleet: FleetHandle) -> None:
    """A clean request is accepted on the first-ranked route with one attempt (R6, R7)."""
    fleet.load(routing_scenario())
    router = make_router(fleet.base_url, fleet.key)
    result = await router.complete(chat_body(), workload="chat")
    assert result.route.id == "alpha"
    assert result.accepted is not None and result.accepted.content
    assert served_tags(fleet.requests()) == ["alpha-a"]
    await router.upstream.aclose()
