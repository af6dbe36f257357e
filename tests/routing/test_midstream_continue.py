"""Mid-stream continuation (SPEC R15, issue 32 item 1), over real HTTP: the OpenAI SDK ->
gateway -> fleet. A stream released to its client and then cut is continued on a route that
takes an assistant prefill: the client reads one normal completion (one id, the exact answer,
no text twice), the ledger shows both attempts; a fallback that refuses the prefill never
masks the original cause; `midstream: error` keeps the in-band error; the pure decisions
(`routing/continuation.py`) and the contract's refusal of `continue` with side effects."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from ground.settings import GatewayConfig
from routing.continuation import PrefixStrip, continuable, why_not
from routing.contracts import parse_contract
from routing.errors import ContractError, FailureClass
from routing.events import EventLog
from routing.gateway import create_app
from routing.response import Completion, ToolCall
from routing.router import Router
from tests.fixtures.fleet import FleetHandle
from tests.fixtures.routing import (
    PACED,
    ServedApp,
    ledger_rows,
    make_router,
    routes_table,
    routing_catalog,
    routing_scenario,
)

KEY = "gw-continue-key"
ASK = [
    {"role": "user", "content": "Continue the scene: the lantern flickers as Mara opens the door."}
]
CUT = {"kind": "stream_cut", "after_chunks": 24, "rate": 1.0}


def _scenario(beta_prefill: str = "continue") -> dict[str, Any]:
    """alpha-a cuts every stream after 24 tokens; paced so the start is released long
    before (the first token after 50 ms, ~7 tokens a 50 ms write); beta-a's prefill mode."""
    scenario = routing_scenario(faults={"alpha-a": [CUT]})
    for model in scenario["models"]:
        for ep in model["endpoints"]:
            ep["timing"] = dict(PACED)
            if ep["tag"] == "beta-a":
                ep["prefill"] = beta_prefill
    return scenario


def _router(fleet: FleetHandle, ledger_url: str, **chat: Any) -> Router:
    """The chat workload over alpha then beta (beta declares it takes a prefill) and vision
    (which does not say)."""
    table = routes_table()
    for route in table["routes"]:
        if route["id"] == "beta":
            route["prefill"] = True
    catalog = routing_catalog(table, chat=chat) if chat else routing_catalog(table)
    return make_router(fleet.base_url, fleet.key, catalog=catalog, events=EventLog(ledger_url))


def _continued(fleet: FleetHandle) -> dict[str, Any]:
    """The fleet's last request to acme/beta: it carries the prefill, and the log entry what
    the fleet sent after it."""
    entries = [r for r in fleet.requests() if r["model"] == "acme/beta"]
    assert entries, [r["model"] for r in fleet.requests()]
    return entries[-1]


async def _attempt_rows(router: Router, ledger_url: str) -> list[tuple[Any, ...]]:
    await router.events.aflush()  # type: ignore[union-attr]
    return ledger_rows(
        ledger_url,
        "select attempt_index, route_id, failure_class, reason, fallback_reason, validation"
        " from routing_attempts order by id",
    )


async def _read(url: str, helper: bool) -> tuple[str, list[Any], Any]:
    """One streamed chat read by the OpenAI SDK: with its stream helper (`stream(...)`,
    `get_final_completion()`) or by `create(stream=True)`: (text, chunks, final)."""
    client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)
    chunks: list[Any] = []
    final = None
    if helper:
        async with client.chat.completions.stream(model="chat", messages=ASK) as stream:
            async for event in stream:
                if event.type == "chunk":
                    chunks.append(event.chunk)
            final = await stream.get_final_completion()
        text = final.choices[0].message.content or ""
    else:
        raw = await client.chat.completions.create(model="chat", messages=ASK, stream=True)
        chunks = [chunk async for chunk in raw]
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    await client.close()
    return text, chunks, final


@pytest.mark.parametrize(("mode", "helper"), [("continue", True), ("repeat", False)])
async def test_r15_a_cut_after_release_is_continued_on_a_prefill_route_as_one_completion(
    fleet: FleetHandle, ledger_url: str, mode: str, helper: bool
) -> None:
    """alpha cuts the released stream; beta continues it from the text the client has
    (`repeat`: beta sends that text again first, and the gateway drops the repeat). Read
    with the SDK's stream helper, and with `create(stream=True)`: one completion, one id,
    the exact text the client had plus beta's continuation, nothing twice, finish `stop`;
    the ledger has alpha's cut and beta's continuation as attempts of one accepted request."""
    fleet.load(_scenario(mode))
    router = _router(fleet, ledger_url)
    async with ServedApp(create_app(router, GatewayConfig(keys=[KEY], events_flush_s=0.05))) as s:
        text, chunks, final = await _read(s.url, helper)
    entry = _continued(fleet)
    prefill = entry["body"]["messages"][-1]
    assert prefill["role"] == "assistant" and len(prefill["content"]) > 40, prefill
    sent = entry["continuation"]
    after = sent[len(prefill["content"]) :] if mode == "repeat" else sent
    assert mode != "repeat" or sent.startswith(prefill["content"]), sent
    assert text == prefill["content"] + after, (text, prefill, sent)
    assert text.count(prefill["content"]) == 1 and len(after) > 40, text
    assert len({c.id for c in chunks}) == 1, {c.id for c in chunks}
    assert {c.model for c in chunks} == {"acme/alpha"}, {c.model for c in chunks}
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop", chunks[-2:]
    assert (chunks[-1].model_extra or {}).get("served_models") == ["acme/alpha", "acme/beta"]
    if final is not None:
        assert final.choices[0].finish_reason == "stop" and final.model == "acme/alpha", final
    assert await _attempt_rows(router, ledger_url) == [
        (0, "alpha", "ambiguous_completion", "stream_cut", None, "stream_cut"),
        (1, "beta", None, None, "midstream_continue:stream_cut", "accepted"),
    ]
    requests = ledger_rows(
        ledger_url, "select outcome, final_route, attempts from routing_requests"
    )
    assert requests == [("accepted", "beta", 2)], requests


async def test_r15_a_fallback_that_refuses_the_prefill_never_masks_the_original_cause(
    fleet: FleetHandle, ledger_url: str
) -> None:
    """beta says it takes a prefill but its endpoint refuses one with a 400; vision says
    nothing and is never asked. The client's stream ends with the in-band error of the
    original cause (the cut), not beta's refusal; the ledger has the refused attempt, and
    the request's outcome is the cut."""
    fleet.load(_scenario("reject"))
    router = _router(fleet, ledger_url)
    async with ServedApp(create_app(router, GatewayConfig(keys=[KEY], events_flush_s=0.05))) as s:
        client = openai.AsyncOpenAI(base_url=f"{s.url}/v1", api_key=KEY, max_retries=0)
        text = ""
        with pytest.raises(openai.APIError) as caught:
            async for chunk in await client.chat.completions.create(
                model="chat", messages=ASK, stream=True
            ):
                text += chunk.choices[0].delta.content or "" if chunk.choices else ""
        await client.close()
    assert text, "the stream was released before the cut"
    message = str(caught.value)
    assert "stream_cut" in message and "prefill" not in message, message
    assert caught.value.body["metadata"]["error_type"] == "ambiguous_completion", caught.value.body
    assert "acme/vision" not in [r["model"] for r in fleet.requests()]
    assert _continued(fleet)["status"] == 400
    rows = await _attempt_rows(router, ledger_url)
    assert [(r[1], r[2], r[4]) for r in rows] == [
        ("alpha", "ambiguous_completion", None),
        ("beta", "permanent_request", "midstream_continue:stream_cut"),
    ], rows
    assert ledger_rows(ledger_url, "select outcome, reason, attempts from routing_requests") == [
        ("ambiguous_completion", "stream_cut", 2)
    ]


async def test_r15_midstream_error_keeps_the_in_band_error(
    fleet: FleetHandle, ledger_url: str
) -> None:
    """`midstream: error`: the cut released stream ends with today's in-band error, and no
    route is asked to continue it."""
    fleet.load(_scenario())
    router = _router(fleet, ledger_url, midstream="error")
    async with ServedApp(create_app(router, GatewayConfig(keys=[KEY], events_flush_s=0.05))) as s:
        client = openai.AsyncOpenAI(base_url=f"{s.url}/v1", api_key=KEY, max_retries=0)
        with pytest.raises(openai.APIError, match="stream_cut"):
            async for _ in await client.chat.completions.create(
                model="chat", messages=ASK, stream=True
            ):
                pass
        await client.close()
    assert [r["model"] for r in fleet.requests()] == ["acme/alpha"]
    assert len(await _attempt_rows(router, ledger_url)) == 1


def test_r15_midstream_continue_is_refused_for_a_workload_with_side_effects() -> None:
    """`midstream: continue` on a workload with a side-effect tool is refused at load, saying
    why; without the field such a workload is not continued, a text workload is."""
    tool = {"name": "create_ticket", "side_effect": True}
    base = {
        "workload": "agent", "version": 1, "max_input_tokens": 100, "requires_tools": True,
        "tools": [tool], "allowed_model_classes": ["general"], "route_groups": ["tools"],
        "max_cost_usd": 0.1, "deadline_ms": 1000, "ambiguous_policy": "fail",
    }  # fmt: skip
    with pytest.raises(ContractError, match="side effects"):
        parse_contract({**base, "midstream": "continue"}, "agent.yaml")
    assert not parse_contract(base, "agent.yaml").continues_midstream
    text = {**base, "workload": "talk", "requires_tools": False, "tools": []}
    assert parse_contract(text, "talk.yaml").continues_midstream


def test_r15_the_continuation_decisions() -> None:
    """A transport failure (a cut, a stall, garbage) is continuable, a rejection of the
    content or the deadline is not; nothing sent or a tool call under way is not continued;
    a repeat of the text already sent is dropped, a continuation that goes its own way is
    released whole, held only while it still agrees with what was sent."""
    F = FailureClass
    assert continuable(F.AMBIGUOUS, "stream_cut") and continuable(F.AMBIGUOUS, "stream_stalled")
    assert continuable(F.INVALID_RESPONSE, "malformed_stream")
    assert not continuable(F.INVALID_RESPONSE, "output_too_short")
    assert not continuable(F.DEADLINE, "deadline_during_stream")
    contract = routing_catalog().contract("chat")
    assert why_not(contract, F.AMBIGUOUS, "stream_cut", "Hello ", Completion()) is None
    assert why_not(contract, F.AMBIGUOUS, "stream_cut", "  ", Completion()) == "nothing_sent"
    calling = Completion(tool_calls=[ToolCall("c", "f", "{")])
    assert why_not(contract, F.AMBIGUOUS, "stream_cut", "x", calling) == "tool_call_under_way"
    strip = PrefixStrip("The door opens. ")
    assert [strip.feed(p) for p in ("The door", " opens. Mara", " waits.")] == [
        "",
        "Mara",
        " waits.",
    ]
    other = PrefixStrip("The door opens. ")
    assert [other.feed(p) for p in ("The d", "og barks.")] + [other.end()] == [
        "",
        "The dog barks.",
        "",
    ]


async def test_r15_a_route_that_refused_a_prefill_is_not_asked_again(
    fleet: FleetHandle, ledger_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """beta says it takes a prefill but refuses one: the first cut stream asks it (and tells
    the operator in one line); the next cut stream does not ask it again within
    `prefill_refusal_s`, and still ends with the original cause, one attempt fewer."""
    scenario = _scenario("reject")
    for model in scenario["models"]:
        for ep in model["endpoints"]:
            if ep["tag"] in ("alpha-a", "alpha-b"):
                ep["faults"] = [dict(CUT)]  # every alpha host cuts: both requests are cut
    fleet.load(scenario)
    router = _router(fleet, ledger_url)
    causes = []
    async with ServedApp(create_app(router, GatewayConfig(keys=[KEY], events_flush_s=0.05))) as s:
        client = openai.AsyncOpenAI(base_url=f"{s.url}/v1", api_key=KEY, max_retries=0)
        for i in range(2):
            if i:  # alpha's failure forgotten, as its 30 s health half-life would (alpha first)
                router.health.health.clear()
            try:
                async for _chunk in await client.chat.completions.create(
                    model="chat", messages=ASK, stream=True
                ):
                    pass
                causes.append("no error")
            except openai.APIError as exc:
                causes.append(str(exc))
        await client.close()
    assert all("stream_cut" in c and "prefill" not in c for c in causes), causes
    asked = [r for r in fleet.requests() if r["model"] == "acme/beta"]
    assert len(asked) == 1, f"beta was asked {len(asked)} times for a prefill"
    assert "route beta refused a continuation's prefill" in caplog.text
    rows = await _attempt_rows(router, ledger_url)
    assert [(r[1], r[4]) for r in rows] == [
        ("alpha", None),
        ("beta", "midstream_continue:stream_cut"),
        ("alpha", None),
    ], rows
