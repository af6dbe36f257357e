"""How a streamed reply ends (issue 32 items 2-4, SPEC R15), over real HTTP: the OpenAI SDK
(or raw httpx, to see the in-band error and its timing) -> the gateway -> the fleet.

- a clean end after a finish reason is a complete reply without `[DONE]`; an end without a
  finish reason is a cut;
- a `data:` event that is not JSON is skipped and counted (the attempt event, the metric),
  up to `max_malformed_events`; one more is a malformed stream, a cut;
- the stall cut holds after release: a silent upstream ends the stream with an in-band
  error naming `stream_stalled` within `stall_timeout_s`, not at the attempt's budget.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import openai
import pytest

from ground.settings import GatewayConfig, RoutingConfig
from routing.events import EventLog
from routing.gateway import create_app
from routing.router import Router
from tests.fixtures.fleet import FleetHandle
from tests.fixtures.routing import (
    ServedApp,
    chat_body,
    ledger_rows,
    make_router,
    routing_catalog,
    routing_scenario,
)
from tests.fixtures.routing import (
    paced as slowed,
)

KEY = "gw-ends-key"
LONG = "Write a long scene: the lantern flickers as Mara opens the door to the archive."
ATTEMPTS = "select failure_class, reason, validation, malformed_events from routing_attempts"


def _scenario(*faults: dict[str, Any], paced: bool = True) -> dict[str, Any]:
    """The routing scenario with `faults` on alpha-a (the provider a chat goes to first);
    `paced`: at a pace whose start settles before the reply ends, so it is released first."""
    scenario = routing_scenario(faults={"alpha-a": list(faults)})
    return slowed(scenario) if paced else scenario


def _router(fleet: FleetHandle, ledger_url: str, config: RoutingConfig | None = None) -> Router:
    """alpha alone serves chat: a failure shows, it is not answered by another route."""
    return make_router(
        fleet.base_url,
        fleet.key,
        catalog=routing_catalog(chat={"route_groups": ["text"]}),
        events=EventLog(ledger_url),
        config=config,
    )


async def _sdk_reply(router: Router) -> tuple[str, str | None]:
    """The OpenAI SDK's streaming client through the gateway: the text and finish reason."""
    async with ServedApp(create_app(router, GatewayConfig(keys=[KEY]))) as s:
        client = openai.AsyncOpenAI(base_url=f"{s.url}/v1", api_key=KEY, max_retries=0)
        stream = await client.chat.completions.create(
            model="chat", messages=[{"role": "user", "content": LONG}], stream=True
        )
        text, finish = "", None
        async for chunk in stream:
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
                finish = chunk.choices[0].finish_reason or finish
        await client.close()
    await router.events.aflush()  # type: ignore[union-attr]
    return text, finish


async def _raw_frames(router: Router) -> list[tuple[float, dict[str, Any]]]:
    """The gateway's SSE chunks with the time each arrived (raw httpx)."""
    frames: list[tuple[float, dict[str, Any]]] = []
    async with (
        ServedApp(create_app(router, GatewayConfig(keys=[KEY]))) as s,
        httpx.AsyncClient(base_url=s.url, timeout=30) as http,
        http.stream(
            "POST", "/v1/chat/completions", json=chat_body(LONG, stream=True),
            headers={"Authorization": f"Bearer {KEY}"},
        ) as resp,
    ):  # fmt: skip
        async for line in resp.aiter_lines():
            if line.startswith("data: {"):
                frames.append((time.monotonic(), json.loads(line[6:])))
    await router.events.aflush()  # type: ignore[union-attr]
    return frames


def _errors(frames: list[tuple[float, dict[str, Any]]]) -> list[dict[str, Any]]:
    return [f["error"] for _, f in frames if "error" in f]


def _text(frames: list[tuple[float, dict[str, Any]]]) -> str:
    return "".join(f["choices"][0]["delta"].get("content") or "" for _, f in frames if f["choices"])


@pytest.mark.parametrize("paced", [True, False], ids=["paced", "fast"])
async def test_issue32_a_complete_stream_without_done_is_complete(
    fleet: FleetHandle, ledger_url: str, paced: bool
) -> None:
    """An upstream that sends the whole reply, its finish reason and usage, then ends its
    body cleanly without `[DONE]`: the client (OpenAI SDK) gets the complete reply with
    finish reason stop and no error, and the ledger's one attempt is accepted, released
    before its end or judged whole (R15)."""
    fleet.load(_scenario({"kind": "no_done", "rate": 1.0}, paced=paced))
    router = _router(fleet, ledger_url)
    text, finish = await _sdk_reply(router)
    assert [e["outcome"] for e in fleet.requests()] == ["no_done"], "the fleet sent no [DONE]"
    assert finish == "stop" and len(text) > 100, (finish, text)
    assert ledger_rows(ledger_url, ATTEMPTS) == [(None, None, "accepted", 0)]
    assert ledger_rows(ledger_url, "select outcome from routing_requests") == [("accepted",)]


async def test_issue32_a_body_ending_without_a_finish_reason_is_still_a_cut(
    fleet: FleetHandle, ledger_url: str
) -> None:
    """The same clean end of the body, but before any finish reason: a cut, told in-band
    (`stream_cut`), never a complete reply (R15's other half)."""
    fleet.load(_scenario({"kind": "stream_cut", "after_fraction": 0.9, "rate": 1.0}))
    router = _router(fleet, ledger_url)
    frames = await _raw_frames(router)
    assert [e["outcome"] for e in fleet.requests()] == ["cut"]
    errors = _errors(frames)
    assert len(errors) == 1 and "stream_cut" in errors[0]["message"], errors
    assert frames[-1][1]["choices"][0]["finish_reason"] == "error"
    assert ledger_rows(ledger_url, ATTEMPTS) == [
        ("ambiguous_completion", "stream_cut", "stream_cut", 0)
    ]


@pytest.mark.parametrize("count", [1, 3])
async def test_issue32_malformed_events_within_the_bound_are_skipped_and_counted(
    fleet: FleetHandle, ledger_url: str, count: int
) -> None:
    """`count` `data:` events that are not JSON in the middle of a good stream (up to
    `max_malformed_events`, 3): skipped, the client (OpenAI SDK) gets the whole reply (the
    same text as without them), and they are counted on the ledger's attempt row and in
    `canary_router_malformed_events_total` (R15)."""
    fleet.load(_scenario())
    clean, _ = await _sdk_reply(_router(fleet, ledger_url + ".clean"))
    fleet.clear_requests()
    fleet.load(_scenario({"kind": "malformed_event", "after_fraction": 0.5, "count": count,
                          "rate": 1.0}))  # fmt: skip
    router = _router(fleet, ledger_url)
    text, finish = await _sdk_reply(router)
    assert [e["fault"] for e in fleet.requests()] == ["malformed_event"]
    assert finish == "stop" and text == clean and len(text) > 100, (text, clean)
    assert ledger_rows(ledger_url, ATTEMPTS) == [(None, None, "accepted", count)]
    sample = router.metrics.registry.get_sample_value(
        "canary_router_malformed_events_total", {"workload": "chat", "route": "alpha"}
    )
    assert sample == count, f"malformed events counted {sample}, expected {count}"


async def test_issue32_garbage_beyond_the_bound_is_a_malformed_stream(
    fleet: FleetHandle, ledger_url: str
) -> None:
    """Four non-JSON events in one reply (one more than `max_malformed_events`): the stream
    is cut, told in-band as `malformed_stream`, and the attempt counts the four (R15)."""
    fleet.load(_scenario({"kind": "malformed_event", "after_fraction": 0.5, "count": 4,
                          "rate": 1.0}))  # fmt: skip
    router = _router(fleet, ledger_url)
    frames = await _raw_frames(router)
    errors = _errors(frames)
    assert len(errors) == 1 and "malformed_stream" in errors[0]["message"], errors
    assert frames[-1][1]["choices"][0]["finish_reason"] == "error"
    assert ledger_rows(ledger_url, ATTEMPTS) == [
        ("invalid_response", "malformed_stream", "malformed_stream", 4)
    ]


async def test_issue32_a_stall_after_release_is_cut_within_the_stall_bound(
    fleet: FleetHandle, ledger_url: str
) -> None:
    """An upstream that goes silent for 3 s after 15 chunks, long after its release: the
    gateway ends the stream with an in-band error naming `stream_stalled` within the
    0.3 s stall cut (1.2 s at 4x), not when the upstream resumes or the attempt's budget
    ends (R15, issue 32 item 2)."""
    stall_s = 0.3
    fleet.load(_scenario({"kind": "stall", "after_chunks": 15, "stall_s": 30.0, "rate": 1.0}))
    router = _router(fleet, ledger_url, RoutingConfig(stall_timeout_s=stall_s))
    frames = await _raw_frames(router)
    errors = _errors(frames)
    assert len(errors) == 1 and "stream_stalled" in errors[0]["message"], (errors, frames[-1])
    sent = [t for t, f in frames if f["choices"] and f["choices"][0]["delta"].get("content")]
    assert sent and _text(frames), "nothing was released before the stall"
    waited = frames[-1][0] - sent[-1]
    assert waited < 4 * stall_s, f"the stall was cut after {waited:.2f} s, bound {stall_s} s"
    assert ledger_rows(ledger_url, ATTEMPTS) == [
        ("ambiguous_completion", "stream_stalled", "stream_stalled", 0)
    ]
