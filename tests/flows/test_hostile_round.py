"""Canary rounds against a hostile provider (issue 10): one model served from one base URL
by the hostile fixture, three healthy endpoints and four hostile ones. The rounds complete,
each hostile endpoint ends in typed outcomes, the healthy ones get their state applied, an
endpoint that answers every probe with a 4xx is frozen (never clean), a discovery document
that cannot be parsed fails the run with one line and no state, and the upstream key (or
any 8+ character piece of it) is found in no ledger row, Prefect event, artifact, log line,
flow-run message or returned summary."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from flows.canary_round import RoundSummary, canary_round
from flows.triage import triage
from ground.slugs import model_slug
from probes.prompts import prompt_for
from probes.types import Contract
from quarantine.adapters.store import aload_state
from tests.fixtures.hostile import (
    Hostile,
    Reply,
    Request,
    chunk,
    data_line,
    endpoints_listing,
    json_reply,
    pinned_tag,
    raw_reply,
    sse_reply,
)

KEY = "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"
T0 = datetime(2026, 11, 9, 0, 0, tzinfo=UTC)
HALF_HOUR = timedelta(minutes=30)
HEALTHY = ["ok-a/fp8", "ok-b/fp8", "ok-c/fp8"]
HOSTILE = ["leaky/fp8", "deep/fp8", "refuser/fp8", "garbage/fp8"]
STORY = (
    "Mara lifts the lantern and steps into the flooded chapel, listening to the water drip "
    "from the broken roof. She follows the faint echo of footsteps along the north wall, "
    "where the old map promised a hidden stair. When the light finds a carved door, she "
    "smiles, presses her palm to the cold stone and whispers the word her grandmother taught her."
)
CHARACTER = {"name": "Mara", "mood": "curious", "age": 34}


def fragments(text: str, secret: str = KEY, n: int = 8) -> list[str]:
    low = text.lower()
    return [secret[i : i + n] for i in range(len(secret) - n + 1) if secret[i : i + n] in low]


def provider_name(tag: str) -> str:
    return tag.split("/")[0].replace("-", " ").title().replace(" ", "")


def stream(pieces: list[str], provider: str, **last: Any) -> Reply:
    lines = [data_line(chunk(p, provider=provider)) for p in pieces]
    end = {
        **chunk("", provider=provider),
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 40, "completion_tokens": 60, "cost": 0.00001},
        **last,
    }
    return sse_reply([*lines, data_line(end), b"data: [DONE]\n\n"])


def structured(req: Request) -> bool:
    return "response_format" in req.json()


def healthy(req: Request) -> Reply:
    name = provider_name(pinned_tag(req) or "")
    if structured(req):
        return stream([json.dumps(CHARACTER)], name)
    words = STORY.split(" ")
    return stream([" ".join(words[i : i + 6]) + " " for i in range(0, len(words), 6)], name)


def leaky(req: Request) -> Reply:
    """Echoes the Authorization header in every field it can: error message and metadata
    (both dialects, deep), in-band errors, content split across chunks, usage, id."""
    echo = req.headers.get("authorization", "")
    if req.json().get("messages") == prompt_for(Contract.REFUSAL, "en"):
        return json_reply(
            403,
            {"error": {"code": 403, "message": f"flagged; you sent {echo}",
                       "metadata": {"error_type": f"moderation:{KEY[:30]}", "reasons": ["violence"],
                                    "flagged_input": echo, "provider_name": KEY.upper(),
                                    "provider_code": KEY[9:60], "raw": {"h": [[{"a": echo}]]}}}},
        )  # fmt: skip
    name = "Leaky"
    if structured(req):
        err = {"code": 502, "message": f"upstream said {KEY}",
               "metadata": {"error_type": f"provider_{KEY[4:40]}", "raw": [echo]}}  # fmt: skip
        return stream([f'{{"name": "{KEY[:20]}', f'{KEY[20:]}"'], name, error=err)
    half = len(KEY) // 2
    return stream(
        [STORY[:120], f" ({KEY[:half]}", f"{KEY[half:]}) ", STORY[120:]],
        name,
        id=f"gen-{KEY}",
        usage={"prompt_tokens": 40, "completion_tokens": 60, "note": echo},
    )


DEEP = "[" * 100_000 + "]" * 100_000


def deep(req: Request) -> Reply:
    """Lines a recursive decoder chokes on: 100k-deep nesting, a 5,000-digit integer, a lone
    surrogate; deep JSON as structured output."""
    name = "Deep"
    if structured(req):
        return stream([DEEP[:50_000], DEEP[150_000:]], name)
    return sse_reply(
        [
            b"data: " + DEEP.encode() + b"\n\n",
            b'data: {"choices": [{"delta": {"content": ' + b"9" * 5000 + b"}}]}\n\n",
            b'data: {"provider": "Deep", "choices": [{"delta": {"content": "\\ud800"}}]}\n\n',
            b"data: [DONE]\n\n",
        ]
    )


def refuser(req: Request) -> Reply:
    return json_reply(400, {"error": {"code": 400, "message": "invalid_request"}})


def garbage(req: Request) -> Reply:
    return raw_reply(200, DEEP.encode(), content_type="application/json")


BEHAVIOURS: dict[str, Callable[[Request], Reply]] = {
    "leaky/fp8": leaky,
    "deep/fp8": deep,
    "refuser/fp8": refuser,
    "garbage/fp8": garbage,
}


def serve_model(model: str) -> Callable[[Request], Reply]:
    tags = [(t, provider_name(t)) for t in [*HEALTHY, *HOSTILE]]

    def handle(req: Request) -> Reply:
        if req.method == "GET":
            if req.path.endswith("/endpoints") and "unparseable" in req.path:
                return raw_reply(200, b'{"data": ' + DEEP.encode() + b"}")
            return json_reply(200, endpoints_listing(model, tags))
        return BEHAVIOURS.get(pinned_tag(req) or "", healthy)(req)

    return handle


@pytest.fixture
def hostile_env(
    prefect_api: None, hostile: Hostile, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Hostile]:
    env = {
        "CANARY_BASE_URL": hostile.base_url,
        "CANARY_API_KEY": KEY,
        "CANARY_HOME": str(tmp_path / "home"),
        "CANARY_LOCALES": "en",
        "CANARY_PROBE__TTFT_THRESHOLD_S": "5",
        "CANARY_MODE": "enforce",
        "CANARY_NOTIFICATION_BLOCK": "",
        "CANARY_CONTROL_PROVIDERS": "",
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    yield hostile


async def _events_text(model: str, wanted: int) -> str:
    """The canary.* events about `model` as JSON, once `wanted` have reached the API."""
    from prefect import get_client
    from prefect.events.filters import EventFilter, EventNameFilter, EventResourceFilter

    wanted_filter = EventFilter(
        event=EventNameFilter(prefix=["canary."]),
        resource=EventResourceFilter(id_prefix=[f"canary.endpoint.{model}."]),
    )
    text = ""
    for _ in range(100):
        async with get_client() as client:
            page = await client.read_events(wanted_filter, limit=50)
        mine = [e for e in page.events if e.resource.get("canary.model") == model]
        text = json.dumps([e.model_dump(mode="json") for e in mine])
        if len(mine) >= wanted:
            return text
        await asyncio.sleep(0.1)
    raise AssertionError(f"expected {wanted} events for {model}, saw: {text[:500]}")


async def _flow_logs_text() -> str:
    from prefect import get_client

    async with get_client() as client:
        logs = await client.read_logs(limit=200)
    return json.dumps([log.message for log in logs])


async def test_c2_q1_hostile_endpoints_never_break_a_round_or_leak_the_key(
    hostile_env: Hostile, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Two rounds and a triage with four hostile endpoints among three healthy ones: typed
    outcomes for each hostile one, state applied for all, and no piece of the key in the
    ledger, the events, the artifacts, the logs or the summaries (C2, Q1, Q8, O3)."""
    from prefect.artifacts import Artifact

    for name in ("probes", "routing", "flows", "quarantine", "wire", "prefect.flow_runs"):
        caplog.set_level(logging.DEBUG, logger=name)
    model = "hostile/rounds"
    hostile_env.handler = serve_model(model)

    first = await canary_round(model=model, mode="enforce", at=T0)
    assert isinstance(first, RoundSummary)
    verdicts = {tag: (verdict, why) for tag, _locale, verdict, why in first.endpoints}
    assert {t: verdicts[t][0] for t in HEALTHY} == dict.fromkeys(HEALTHY, "clean"), (
        verdicts,
        first.unjudged,
    )
    assert (
        verdicts["leaky/fp8"][0] == "failed"
        and "refusal:moderation_403" in verdicts["leaky/fp8"][1]
    )
    assert verdicts["deep/fp8"][0] == "failed", verdicts["deep/fp8"]
    assert "structured:invalid_json" in verdicts["deep/fp8"][1]
    assert verdicts["refuser/fp8"][0] == "frozen"  # 4xx to every probe: never clean
    assert verdicts["garbage/fp8"][0] == "frozen"

    second = await canary_round(model=model, mode="enforce", at=T0 + HALF_HOUR)
    assert isinstance(second, RoundSummary)
    assert sorted((d["kind"], d["tag"]) for d in second.decisions) == [
        ("suspended", "deep/fp8"),
        ("suspended", "leaky/fp8"),
    ]
    state = await aload_state(model)
    assert state.revision > 0 and set(state.providers) >= {*HEALTHY, *HOSTILE}
    assert all(state.providers[t].consecutive_clean_rounds == 2 for t in HEALTHY)
    assert (
        state.providers["refuser/fp8"].consecutive_clean_rounds == 0
    )  # frozen rounds never count (Q5)

    report = await triage(model=model, provider="leaky/fp8", locale="en")
    assert report["transcripts"] >= 4

    slug = model_slug(model)
    artifacts = [
        await Artifact.aget(key)
        for key in (f"canary-round-{slug}", f"canary-decisions-{slug}", f"canary-triage-{slug}")
    ]
    assert all(a is not None for a in artifacts)
    sinks = {
        "artifacts": json.dumps([a.data for a in artifacts if a is not None], default=str),
        "events": await _events_text(model, wanted=2),
        "flow logs": await _flow_logs_text(),
        "captured logs": "\n".join(r.getMessage() for r in caplog.records),
        "summaries": first.model_dump_json() + second.model_dump_json() + json.dumps(report),
    }
    with sqlite3.connect(tmp_path / "home" / "ledger.db") as db:
        tables = [r[0] for r in db.execute("select name from sqlite_master where type='table'")]
        rows = [row for t in tables for row in db.execute(f"select * from {t}").fetchall()]
    sinks["ledger"] = json.dumps(rows, default=str)
    assert "leaky/fp8" in sinks["ledger"] and "moderation_403" in sinks["events"]
    assert "***" in sinks["artifacts"]  # the triage transcripts show where the key was
    for where, text in sinks.items():
        assert fragments(text) == [], f"key fragments in {where}: {fragments(text)[:3]}"


async def test_c1_unparseable_discovery_fails_the_run_in_one_line_and_changes_no_state(
    hostile_env: Hostile,
) -> None:
    """A 100k-deep discovery document: the run fails with one clear line naming the model
    and changes no state (C1, O1)."""
    model = "hostile/unparseable"
    hostile_env.handler = serve_model(model)
    state = await canary_round(model=model, at=T0, return_state=True)
    assert state.is_failed()
    message = state.message or ""
    assert "hostile/unparseable" in message and "nested deeper than" in message, message
    assert len(message.splitlines()) == 1 and fragments(message) == []
    assert (await aload_state(model)).revision == 0
