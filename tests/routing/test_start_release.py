"""The gateway releases a stream's start only when the canary's check of the *whole* reply
passes it (issue 31 item 1, issue 26's release at decision time): the start gate over every
cutting of the bank's replies, their defect cases and both emphasis openings of the
incident releases the whole reply exactly when that check passes and nothing when it fails;
the window decision of issue 26 is caught by the same property; over real HTTP a host that
corrupts every start never gets a stray mark to a client (the router falls back to a clean
host), and a start that breaks inside its open emphasis sends nothing at all."""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

import httpx
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from ground.settings import GatewayConfig, RoutingConfig
from probes.start_decision import decide_start
from routing.events import EventLog
from routing.gateway import create_app
from routing.start_gate import Decide, StartGate
from tests.fixtures.fleet import FleetHandle
from tests.fixtures.routing import (
    ServedApp,
    chat_body,
    ledger_rows,
    make_router,
    paced,
    routing_scenario,
)
from tests.probes.test_start_decision import (
    INCIDENT,
    bank_and_defects,
    whole_check,
    window_decision,
)

KEY = "gw-release-key"
CASES = [(loc, text) for loc, _, text in bank_and_defects()]
CUTS = st.lists(st.integers(1, 60), max_size=8)
# the replies that open with emphasis, the two forms of the incident among them; every
# third (every prefix of all of them: tests/probes/test_start_decision.py)
EMPHASIS_LED = [(loc, t) for loc, t in CASES if t.lstrip().startswith(("*", "_"))][::3]


def pieces(text: str, cuts: list[int]) -> list[str]:
    bounds = sorted({0, len(text), *(c for c in cuts if c < len(text))})
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def release_agrees(decide: Decide, text: str, locale: str, cuts: list[int]) -> bool:
    """The property: through the gate, the start verdict is the whole reply's (kind
    included); a clean start lets the whole reply out, in order; a stray one lets nothing
    out."""
    gate = StartGate(locale, decide=decide)
    out = "".join(gate.feed(part) for part in pieces(text, cuts)) + gate.end()
    expected = whole_check(text, locale)
    return gate.kind == expected and out == ("" if expected else text)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(CASES), CUTS)
def test_issue31_the_release_agrees_with_the_whole_reply_for_every_cutting(
    case: tuple[str, str], cuts: list[int]
) -> None:
    """Any reply of the bank or defect case, cut anywhere: the property holds."""
    locale, text = case
    assert release_agrees(decide_start, text, locale, cuts)


def test_issue31_no_first_read_releases_an_emphasis_start_the_whole_reply_fails() -> None:
    """Replies of the bank and their defect cases that open with emphasis (`*`, `**`,
    `_*`: the incident's forms included), with a first upstream read of 1 to 48 characters
    and the rest in one: the gate's release is the whole reply's check, every time (before
    issue 31 about 3% of such cuttings of a failing start went out)."""
    wrong = [
        (loc, text[:50], first)
        for loc, text in EMPHASIS_LED
        for first in range(1, 49)
        if not release_agrees(decide_start, text, loc, [first])
    ]
    assert len(EMPHASIS_LED) > 700 and wrong == []


def test_issue31_the_property_fails_for_the_window_decision() -> None:
    """The decision of issue 26 (final at the 24-character window) fails the same property:
    a first read longer than the window but short of the closing mark releases the
    incident's corrupted start."""
    found = find(CUTS, lambda cuts: not release_agrees(window_decision, INCIDENT, "en", cuts))
    assert pieces(INCIDENT, found)[0].startswith("_*")
    assert release_agrees(decide_start, INCIDENT, "en", found)


def _paced(defects: dict[str, list[dict[str, Any]]] | None = None) -> dict[str, Any]:
    """The routing scenario at a pace whose first write is one word (0.1 time scale: the
    first token after 50 ms, then ~7 tokens per 50 ms write)."""
    return paced(routing_scenario(defects=defects))


async def _deltas(url: str) -> tuple[list[tuple[float, str]], list[dict[str, Any]]]:
    """(arrival time, content) of each content delta, and every chunk, of one streamed chat."""
    arrivals: list[tuple[float, str]] = []
    chunks: list[dict[str, Any]] = []
    async with (
        httpx.AsyncClient(base_url=url, timeout=30) as http,
        http.stream(
            "POST", "/v1/chat/completions", json=chat_body(stream=True),
            headers={"Authorization": f"Bearer {KEY}"},
        ) as resp,
    ):  # fmt: skip
        async for line in resp.aiter_lines():
            if line.startswith("data: {"):
                chunks.append(json.loads(line[6:]))
                delta = chunks[-1]["choices"][0]["delta"] if chunks[-1]["choices"] else {}
                if delta.get("content"):
                    arrivals.append((time.monotonic(), delta["content"]))
    return arrivals, chunks


def _finish(chunks: list[dict[str, Any]]) -> str | None:
    """The finish reason of the last chunk that has a choice (a usage chunk has none)."""
    return [c["choices"][0].get("finish_reason") for c in chunks if c["choices"]][-1]


async def test_issue31_a_paced_text_reply_is_released_at_its_first_words(
    fleet: FleetHandle,
) -> None:
    """A reply that opens with text: its start settles at its first word, so the fleet's
    first write (one word) goes out on its own, 50 ms before the next write arrives."""
    opening = {"kind": "start_prefix", "prefix": "Welcome back, traveller. ", "rate": 1.0}
    fleet.load(_paced({"alpha-a": [opening], "alpha-b": [opening]}))
    router = make_router(fleet.base_url, fleet.key)
    async with ServedApp(create_app(router, GatewayConfig(keys=[KEY]))) as s:
        arrivals, _ = await _deltas(s.url)
    (t0, first), (t1, _) = arrivals[0], arrivals[1]
    assert first == "Welcome ", arrivals[:3]
    assert t1 - t0 > 0.025, arrivals[:3]


async def test_issue31_a_start_that_breaks_inside_its_emphasis_sends_nothing(
    fleet: FleetHandle, ledger_url: str
) -> None:
    """`*She nods. "…`: a dialogue opened inside the open emphasis. Nothing of it reaches
    the client (issue 26 let `*She ` out, then ended in-band): both alpha hosts are judged a
    stray start before any release, and the router falls back to beta's clean reply."""
    prefix = {"kind": "start_prefix", "prefix": '*She nods. "', "rate": 1.0}
    fleet.load(_paced({"alpha-a": [prefix], "alpha-b": [prefix]}))
    router = make_router(fleet.base_url, fleet.key, events=EventLog(ledger_url))
    async with ServedApp(create_app(router, GatewayConfig(keys=[KEY], events_flush_s=0.05))) as s:
        arrivals, chunks = await _deltas(s.url)
    text = "".join(t for _, t in arrivals)
    assert text and not text.startswith("*She nods."), text[:40]
    assert _finish(chunks) == "stop", chunks[-2:]
    await router.events.aflush()  # type: ignore[union-attr]
    validations = ledger_rows(ledger_url, "select validation from routing_attempts")
    assert validations[0] == ("stray_start",) and validations[-1] == ("accepted",), validations


# The incident's form with the closing mark 60 characters in: a first read past the
# 24-character window but short of the mark was released before issue 31.
CORRUPT = "_*She wipes the long oak counter slowly and carefully, then smiles.* "


async def test_issue31_a_host_that_corrupts_every_start_never_reaches_a_client(
    fleet: FleetHandle, ledger_url: str
) -> None:
    """alpha-a corrupts every start with the incident's stray mark; 12 paced streams (before
    issue 31, 2 of 12 reached the client with the stray mark and were never retried): no
    client sees a stray mark, every stream is answered whole, and each attempt alpha-a
    served is a stray start followed by a retry without it."""
    fleet.load(_paced({"alpha-a": [{"kind": "start_prefix", "prefix": CORRUPT, "rate": 1.0}]}))
    router = make_router(fleet.base_url, fleet.key, events=EventLog(ledger_url))
    async with ServedApp(create_app(router, GatewayConfig(keys=[KEY], events_flush_s=0.05))) as s:
        for _ in range(12):
            arrivals, chunks = await _deltas(s.url)
            text = "".join(t for _, t in arrivals)
            assert text and not text.startswith("_"), text[:60]
            assert _finish(chunks) == "stop", chunks[-2:]
    await router.events.aflush()  # type: ignore[union-attr]
    rows = ledger_rows(
        ledger_url, "select operation_id, provider, validation from routing_attempts order by id"
    )
    corrupted = {r for r, provider, v in rows if provider == "AlphaA"}
    assert corrupted, rows  # alpha-a was tried
    assert all(v == "stray_start" for _, provider, v in rows if provider == "AlphaA"), rows
    for request in corrupted:
        assert [p for r, p, _ in rows if r == request][-1] != "AlphaA", rows


async def test_issue31_a_start_not_settled_within_its_hold_is_a_slow_first_token(
    fleet: FleetHandle, ledger_url: str
) -> None:
    """alpha's hosts open an emphasis that stays open past `start_hold_s` (0.3 s here, the
    reply paced at ~15 tokens per second of the 0.1 time scale): the attempt is cut as a slow
    first token (the client would get its first word that late) and the router falls back
    to beta, whose reply opens with text."""
    slow = {"kind": "start_prefix", "prefix": "*" + "She waits, and waits, " * 5, "rate": 1.0}
    fleet.load(_paced({"alpha-a": [slow], "alpha-b": [slow]}))
    config = RoutingConfig(start_hold_s=0.3)
    router = make_router(fleet.base_url, fleet.key, events=EventLog(ledger_url), config=config)
    async with ServedApp(create_app(router, GatewayConfig(keys=[KEY], events_flush_s=0.05))) as s:
        arrivals, chunks = await _deltas(s.url)
    text = "".join(t for _, t in arrivals)
    assert text and not text.startswith("*She waits"), text[:40]
    assert _finish(chunks) == "stop", chunks[-2:]
    await router.events.aflush()  # type: ignore[union-attr]
    rows = ledger_rows(ledger_url, "select failure_class, reason from routing_attempts")
    assert rows[0] == ("slow_first_token", rows[0][1]) and rows[-1][0] is None, rows
