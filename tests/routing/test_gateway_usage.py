"""Usage always (issue 32 item 5, SPEC R10): the gateway asks every upstream for the usage,
tells a client that asked for it, and bills the attempt by it; over real HTTP, the OpenAI
client -> gateway -> a fleet whose endpoints send the usage only when asked (as a plain
OpenAI-compatible server does)."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from ground.settings import GatewayConfig
from routing.events import EventLog
from routing.gateway import create_app
from tests.fixtures.fleet import FleetHandle
from tests.fixtures.routing import (
    ServedApp,
    chat_body,
    ledger_rows,
    make_router,
    routing_catalog,
    routing_scenario,
)

KEY = "gw-usage-key"
LONG = "Write a long scene: the lantern flickers as Mara opens the door to the archive."


def _when_asked() -> dict[str, Any]:
    """The test scenario with every endpoint sending the usage only when asked."""
    scenario = routing_scenario()
    for model in scenario["models"]:
        for ep in model["endpoints"]:
            ep["usage"] = "when_asked"
    return scenario


def _billed(ledger_url: str) -> list[tuple[Any, ...]]:
    return ledger_rows(
        ledger_url,
        "select route_id, prompt_tokens, completion_tokens, cost_usd, validation"
        " from routing_attempts",
    )


@pytest.mark.parametrize("stream", [True, False])
async def test_issue32_usage_reaches_a_client_that_asked_from_an_upstream_that_sends_it_when_asked(
    fleet: FleetHandle, ledger_url: str, stream: bool
) -> None:
    """Streaming with `stream_options.include_usage`: the last chunk carries the usage
    (`choices: []`); not streaming: `usage` has its three counts. They are the upstream's
    (the gateway asked it: `stream_options.include_usage` on the upstream request), and the
    ledger bills the attempt by the same tokens at the upstream's reported cost (R10)."""
    fleet.load(_when_asked())
    router = make_router(
        fleet.base_url, fleet.key, events=EventLog(ledger_url),
        catalog=routing_catalog(chat={"route_groups": ["text"]}),
    )  # fmt: skip
    app = create_app(router, GatewayConfig(keys=[KEY], events_flush_s=0.05))
    messages = chat_body(LONG)["messages"]
    async with ServedApp(app) as s:
        client = openai.AsyncOpenAI(base_url=f"{s.url}/v1", api_key=KEY, max_retries=0)
        if stream:
            chunks = [c async for c in await client.chat.completions.create(
                model="chat", messages=messages, stream=True,
                stream_options={"include_usage": True},
            )]  # fmt: skip
            assert chunks[-1].choices == [], "the usage chunk is the last one, no choices"
            usage = chunks[-1].usage
        else:
            reply = await client.chat.completions.create(model="chat", messages=messages)
            usage = reply.usage
        await client.close()
    assert usage is not None, "the client asked for the usage and got none"
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0, usage
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    sent = fleet.requests()[-1]["body"]
    assert sent["stream_options"] == {"include_usage": True} and sent["stream"] is True
    await router.events.aflush()  # type: ignore[union-attr]
    [(route, prompt_t, completion_t, cost, validation)] = _billed(ledger_url)
    assert (route, validation) == ("alpha", "accepted")
    assert (prompt_t, completion_t) == (usage.prompt_tokens, usage.completion_tokens)
    reported = (usage.model_extra or {}).get("cost")
    assert reported is not None and cost == pytest.approx(reported), (cost, reported)


async def test_issue32_a_streaming_client_that_did_not_ask_gets_no_usage_chunk(
    fleet: FleetHandle,
) -> None:
    """The upstream always reports the usage (OpenRouter's way, and every upstream now that
    the gateway always asks), yet a streaming client that did not ask gets no usage chunk, as
    from OpenAI: no chunk without choices (a client reading `choices[0]` never breaks)."""
    fleet.load(routing_scenario())
    router = make_router(
        fleet.base_url, fleet.key, catalog=routing_catalog(chat={"route_groups": ["text"]})
    )
    async with ServedApp(create_app(router, GatewayConfig(keys=[KEY]))) as s:
        client = openai.AsyncOpenAI(base_url=f"{s.url}/v1", api_key=KEY, max_retries=0)
        chunks = [c async for c in await client.chat.completions.create(
            model="chat", messages=chat_body(LONG)["messages"], stream=True)]  # fmt: skip
        await client.close()
    assert chunks and all(c.choices for c in chunks), [c for c in chunks if not c.choices]
