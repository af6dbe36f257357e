"""The gateway against hostile bytes (issue 10): from the upstream (the hostile fixture on
loopback) and from clients. No piece of the upstream key reaches a client, a routing event or
a log line; client bodies that are not strict JSON get a 400 in OpenAI's shape; no upstream
behaviour gives a 500, each one is classified and falls back; fuzzing finds no 500."""

from __future__ import annotations

import gzip
import json
import logging
import sqlite3
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import SecretStr
from starlette.testclient import TestClient

from ground.settings import GatewayConfig, RoutingConfig
from routing.attempt import classify_unforeseen
from routing.errors import FailureClass
from routing.events import EventLog
from routing.exclusions import static_source
from routing.gateway import create_app
from routing.router import Router
from routing.upstream import Upstream
from tests.fixtures.hostile import (
    Hostile,
    Reply,
    Request,
    chunk,
    data_line,
    head,
    huge_error_reply,
    json_reply,
    raw_reply,
    sse_reply,
)
from tests.fixtures.routing import ServedApp, SleepRecorder, chat_body, routing_catalog
from wire.text import Scrubber

KEY = "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"
GW = "gw-hostile-key"
AUTH = {"Authorization": f"Bearer {GW}"}
LINE_CAP = 64_000
REPLY_CAP = 1_000_000


def fragments(text: str, secret: str = KEY, n: int = 8) -> list[str]:
    low = text.lower()
    return [secret[i : i + n] for i in range(len(secret) - n + 1) if secret[i : i + n] in low]


def router_for(hostile: Hostile, events: EventLog | None = None) -> Router:
    return Router(
        routing_catalog(),
        Upstream(
            hostile.base_url,
            SecretStr(KEY),
            RoutingConfig(
                max_line_bytes=LINE_CAP, max_reply_bytes=REPLY_CAP, max_error_body_bytes=16_000
            ),
        ),
        ignore_source=static_source(),
        events=events,
        sleep=SleepRecorder(),
    )


def end_chunk(provider: str, **extra: Any) -> bytes:
    return data_line(
        {
            **chunk("", provider=provider),
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 9, "cost": 0.0},
            **extra,
        }
    )


def clean(req: Request) -> Reply:
    provider = "Beta" if "beta" in str(req.json().get("model")) else "Alpha"
    if "response_format" in req.json():
        text = json.dumps({"label": "billing", "confidence": 0.9})
    else:
        text = "Mara lifts the lantern and steps into the flooded chapel, listening."
    return sse_reply([data_line(chunk(text, provider=provider)), end_chunk(provider), b"data: [DONE]\n\n"])  # fmt: skip


def alpha_then(behaviour: Callable[[Request], Reply]) -> Callable[[Request], Reply]:
    """`behaviour` for route alpha (model acme/alpha), a clean reply for every other route."""
    return lambda req: behaviour(req) if req.json().get("model") == "acme/alpha" else clean(req)


# ---- 1. the key never reaches a client, an event or a log line ----------------------------

ECHO = f"Bearer {KEY}"
LEAKS: dict[str, Callable[[Request], Reply]] = {
    "status_metadata": lambda req: json_reply(
        502,
        {
            "error": {
                "code": 502,
                "message": f"upstream saw {ECHO}",
                "metadata": {
                    "error_type": f"provider_{KEY}",
                    "provider_name": KEY.upper(),
                    "provider_code": KEY[3:50],
                    "raw": {"a": [{"b": ECHO}]},
                },
            }
        },
    ),
    "status_400_reason": lambda req: json_reply(
        400, {"error": {"code": 400, "message": ECHO, "metadata": {"error_type": KEY[:40]}}}
    ),
    "older_dialect": lambda req: json_reply(
        429,
        {
            "error": {
                "code": "429",
                "message": "x" * 490 + KEY,
                "metadata": {"provider_name": ECHO, "raw": ECHO},
            }
        },
        {"Retry-After": "0"},
    ),
    "in_band_after_content": lambda req: sse_reply(
        [
            data_line(chunk("Mara lifts the lantern and steps into the chapel.", provider="Alpha")),
            data_line(
                {
                    **chunk("", provider="Alpha"),
                    "error": {"code": 400, "message": ECHO, "metadata": {"error_type": f"x{KEY}"}},
                    "choices": [{"index": 0, "delta": {}, "finish_reason": "error"}],
                }
            ),
            b"data: [DONE]\n\n",
        ]
    ),
    "content_echo_split": lambda req: sse_reply(
        [
            data_line(chunk("Mara reads the note aloud: ", provider="Alpha")),
            data_line(chunk(ECHO[:19], provider="Alpha")),
            data_line(chunk(ECHO[19:44], provider="Alpha")),
            data_line(chunk(ECHO[44:] + " and she laughs at the strange words.", provider="Alpha")),
            end_chunk("Alpha", id=KEY, model=KEY, usage={"prompt_tokens": 1, "note": ECHO}),
            b"data: [DONE]\n\n",
        ]
    ),
    "provider_and_finish": lambda req: sse_reply(
        [
            data_line(chunk("Mara smiles at the lantern and walks on.", provider=KEY)),
            data_line(
                {
                    **chunk("", provider=KEY),
                    "choices": [{"index": 0, "delta": {}, "finish_reason": KEY}],
                }
            ),
            b"data: [DONE]\n\n",
        ]
    ),
}


@pytest.mark.parametrize("name", sorted(LEAKS))
async def test_r10_no_key_fragment_reaches_a_client_an_event_or_a_log(
    hostile: Hostile, ledger_url: str, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    """An upstream that echoes the key (whole, as a bearer header, upper-cased, cut, split
    across chunks) in any field: the client's responses (both modes, both workloads), the
    routing ledger and the log lines hold no 8+ character piece of it (R10)."""
    caplog.set_level(logging.DEBUG, logger="routing")
    hostile.handler = LEAKS[name]
    router = router_for(hostile, EventLog(ledger_url))
    seen: list[str] = []
    async with ServedApp(create_app(router, GatewayConfig(keys=[GW], events_flush_s=0.05))) as s:
        async with httpx.AsyncClient(base_url=s.url, timeout=30) as http:
            for workload in ("chat", "classify"):
                for stream in (False, True):
                    r = await http.post(
                        "/v1/chat/completions",
                        json=chat_body(stream=stream, stream_options={"include_usage": True}),
                        headers={**AUTH, "X-Workload": workload},
                    )
                    assert r.status_code < 500 or r.json()["error"]["type"] != "internal_error"
                    seen.append(json.dumps(dict(r.headers)) + r.text)
        await router.events.aflush()  # type: ignore[union-attr]
    with sqlite3.connect(ledger_url.removeprefix("sqlite:///")) as db:
        rows = db.execute("select * from routing_attempts").fetchall()
        rows += db.execute("select * from routing_requests").fetchall()
    assert len(rows) >= 8
    logs = "\n".join(r.getMessage() for r in caplog.records)
    for where, text in (("responses", "\n".join(seen)), ("ledger", json.dumps(rows, default=str)), ("logs", logs)):  # fmt: skip
        assert fragments(text) == [], (where, fragments(text)[:3], text[:400])


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    field=st.sampled_from(["message", "error_type", "provider_name", "provider_code", "raw", "content"]),
    start=st.integers(0, len(KEY) - 8),
    length=st.integers(8, len(KEY)),
    upper=st.booleans(),
    status=st.sampled_from([200, 400, 403, 429, 502]),
    before=st.text(max_size=30),
)  # fmt: skip
def test_r10_property_key_pieces_anywhere_never_reach_the_client(
    hostile: Hostile, field: str, start: int, length: int, upper: bool, status: int, before: str
) -> None:
    """Random envelopes and replies with a piece of the key in a random field: the gateway's
    answer never holds an 8+ character piece of it (R10)."""
    piece = KEY[start : start + length]
    value = before + (piece.upper() if upper else piece)
    if field == "content" or status == 200:
        reply = sse_reply(
            [data_line(chunk(value, provider="Alpha")), end_chunk("Alpha", id=value), b"data: [DONE]\n\n"]
        )  # fmt: skip
    else:
        err: dict[str, Any] = {"code": status, "message": "m", "metadata": {}}
        if field == "message":
            err["message"] = value
        elif field == "raw":
            err["metadata"]["raw"] = [{"deep": value}]
        else:
            err["metadata"][field] = value
        reply = json_reply(status, {"error": err})
    hostile.handler = lambda req: reply
    with TestClient(create_app(router_for(hostile), GatewayConfig(keys=[GW]))) as client:
        r = client.post("/v1/chat/completions", json=chat_body(), headers=AUTH)
    assert r.status_code != 500 and fragments(r.text) == [], r.text


# ---- 2. client bodies that are not strict JSON: 400 in OpenAI's shape ---------------------

HOSTILE_BODIES = {
    "nan": b'{"messages": [{"role": "user", "content": "hi"}], "temperature": NaN}',
    "infinity": b'{"messages": [{"role": "user", "content": "hi"}], "top_p": Infinity}',
    "minus_infinity": b'{"messages": [], "x": -Infinity}',
    "overflow": b'{"messages": [{"role": "user", "content": "hi"}], "temperature": 1e999}',
    "lone_surrogate": b'{"messages": [{"role": "user", "content": "\\ud800"}]}',
    "lone_low_surrogate_key": b'{"\\udfff": 1, "messages": []}',
    "huge_integer": b'{"messages": [], "max_tokens": ' + b"9" * 5000 + b"}",
    "deep_nesting": b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "deep_objects": b'{"a":' * 5000 + b"1" + b"}" * 5000,
    "invalid_utf8": b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}',
    "not_an_object": b"[1, 2, 3]",
    "truncated": b'{"messages": [',
    "empty": b"",
}


@pytest.mark.parametrize("name", sorted(HOSTILE_BODIES))
async def test_r2_hostile_client_bodies_get_400_invalid_request(
    hostile: Hostile, name: str
) -> None:
    """NaN, Infinity, 1e999, lone surrogates, 5,000-digit integers, 100k-deep nesting,
    invalid UTF-8 and non-objects: 400 `invalid_request` in OpenAI's error shape, nothing
    sent upstream (R2)."""
    router = router_for(hostile)
    async with (
        ServedApp(create_app(router, GatewayConfig(keys=[GW]))) as s,
        httpx.AsyncClient(base_url=s.url) as http,
    ):
        r = await http.post(
            "/v1/chat/completions",
            content=HOSTILE_BODIES[name],
            headers={**AUTH, "Content-Type": "application/json"},
        )
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["type"] == err["code"] == "permanent_request" and err["param"] is None
    assert err["reason"] == "invalid_request" and err["message"] and err["operation_id"]
    assert hostile.requests == []


# ---- 3. no upstream behaviour gives a 500: classified, falls back -------------------------

DEEP = b"[" * 100_000 + b"]" * 100_000
UPSTREAM: dict[str, Callable[[Request], Reply]] = {
    "error_body_over_cap": lambda req: huge_error_reply(502, 20_000_000),
    "sse_line_over_cap": lambda req: sse_reply([b"data: " + b"x" * (LINE_CAP * 4) + b"\n\n"]),
    "reply_over_cap": lambda req: sse_reply(  # keep-alive comments: no content, no cost
        [b": " + b"x" * 10_000 + b"\n"] * (REPLY_CAP // 10_000 + 2)
    ),
    "deep_data_line": lambda req: sse_reply([b"data: " + DEEP + b"\n\n", b"data: [DONE]\n\n"]),
    "huge_integer_line": lambda req: sse_reply([b'data: {"n": ' + b"9" * 5000 + b"}\n\n"]),
    "not_an_object": lambda req: sse_reply([b"data: [1, 2]\n\n", b"data: [DONE]\n\n"]),
    "json_body_instead_of_sse": lambda req: raw_reply(200, DEEP),
    "error_is_a_list": lambda req: json_reply(500, {"error": [1, {"x": None}]}),
    "error_is_a_number": lambda req: json_reply(503, {"error": 5}),
    "html_error": lambda req: raw_reply(502, b"<html>" * 1000, content_type="text/html"),
    "weird_tool_calls": lambda req: sse_reply(
        [
            data_line(
                {
                    **chunk("", provider="Alpha"),
                    "choices": [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [
                                    {"index": "x", "function": [1]},
                                    {"index": 10**30, "function": {"name": 5, "arguments": {}}},
                                    {"index": -1, "function": {"name": "x", "arguments": '{"a":'}},
                                    7,
                                ]
                            },
                        }
                    ],
                }
            ),
            end_chunk("Alpha"),
            b"data: [DONE]\n\n",
        ]
    ),
    "nan_usage_and_lone_surrogate": lambda req: sse_reply(
        [
            b'data: {"provider": "Alpha", "choices": [{"index": 0, "delta": {"content": "Mara \\ud800 lifts the lantern."}}]}\n\n',
            b'data: {"provider": "Alpha", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": {"prompt_tokens": NaN, "cost": Infinity, "x": [NaN]}}\n\n',
            b"data: [DONE]\n\n",
        ]
    ),
    "headers_then_reset": lambda req: Reply(
        [head(200, {"Content-Type": "text/event-stream"}) + b"data: {"]
    ),
    "status_999": lambda req: raw_reply(599, b"{}"),
    # the head and the framing: what the HTTP client itself refuses is classified too
    "header_line_over_16k": lambda req: Reply(
        [head(200, {"Content-Type": "text/event-stream", "X-Huge": "x" * 20_000})]
    ),
    "header_line_of_a_megabyte": lambda req: Reply(
        [head(200, {"Content-Type": "text/event-stream", "X-Huge": "x" * 1_000_000})]
    ),
    "thousand_headers": lambda req: Reply(
        [head(200, {"Content-Type": "text/event-stream", **{f"X-{i}": "y" for i in range(1000)}})]
    ),
    "garbage_status_line": lambda req: Reply([b"HTTP/9 what\r\n\r\n" + b"\x00" * 100]),
    "body_short_of_its_length": lambda req: Reply(
        [head(200, {"Content-Type": "text/event-stream"}, length=10_000) + data_line(chunk("Mara"))]
    ),
    "broken_chunking": lambda req: Reply(
        [
            head(200, {"Content-Type": "text/event-stream", "Transfer-Encoding": "chunked"})
            + b"zz\r\nxx\r\n"
        ]
    ),
    "gzip_that_is_not": lambda req: Reply(
        [
            head(200, {"Content-Type": "text/event-stream", "Content-Encoding": "gzip"}, length=64)
            + b"\x1f\x8b"
            + b"x" * 62
        ]
    ),
    "redirect": lambda req: raw_reply(302, b"", {"Location": "http://127.0.0.1:1/elsewhere"}),
}


@pytest.mark.parametrize("name", sorted(UPSTREAM))
async def test_r2_no_upstream_behaviour_gives_a_500(
    hostile: Hostile, ledger_url: str, name: str
) -> None:
    """Route alpha misbehaves, beta is healthy: every request gets an answer that is not a
    500 (accepted from beta after a classified alpha attempt, or from alpha when the reply was
    still acceptable), in both modes (R2)."""
    hostile.handler = alpha_then(UPSTREAM[name])
    router = router_for(hostile, EventLog(ledger_url))
    async with ServedApp(create_app(router, GatewayConfig(keys=[GW], events_flush_s=0.05))) as s:
        async with httpx.AsyncClient(base_url=s.url, timeout=60) as http:
            for stream in (False, True):
                body = chat_body(stream=stream, stream_options={"include_usage": True})
                r = await http.post("/v1/chat/completions", json=body, headers=AUTH)
                assert r.status_code == 200, r.text[:300]
                if stream:
                    assert r.text.rstrip().endswith("data: [DONE]")
                else:
                    assert r.json()["choices"][0]["message"]["content"]
        await router.events.aflush()  # type: ignore[union-attr]
    with sqlite3.connect(ledger_url.removeprefix("sqlite:///")) as db:
        alpha = db.execute(
            "select failure_class, reason from routing_attempts where route_id = 'alpha'"
        ).fetchall()
    assert alpha, "alpha was tried"
    if name not in ("nan_usage_and_lone_surrogate",):  # that one alpha may still serve
        assert all(cls is not None for cls, _ in alpha), alpha


async def test_r2_a_gzipped_stream_is_decoded_and_served(hostile: Hostile, ledger_url: str) -> None:
    """The upstream client asks for gzip or deflate and decodes them: a gzipped event stream
    from alpha is read and served by alpha, as with any other reply (R2)."""
    hostile.handler = alpha_then(
        lambda req: Reply(
            [
                head(200, {"Content-Type": "text/event-stream", "Content-Encoding": "gzip"}),
                gzip.compress(b"".join(clean(req).parts[1:])),  # type: ignore[index]
            ]
        )
    )
    router = router_for(hostile, EventLog(ledger_url))
    async with ServedApp(create_app(router, GatewayConfig(keys=[GW], events_flush_s=0.05))) as s:
        async with httpx.AsyncClient(base_url=s.url, timeout=30) as http:
            r = await http.post("/v1/chat/completions", json=chat_body(), headers=AUTH)
        await router.events.aflush()  # type: ignore[union-attr]
    assert r.status_code == 200 and "lantern" in r.json()["choices"][0]["message"]["content"]
    assert "gzip" in hostile.requests[0].headers.get("accept-encoding", "").lower()
    with sqlite3.connect(ledger_url.removeprefix("sqlite:///")) as db:
        rows = db.execute("select route_id, failure_class from routing_attempts").fetchall()
    assert rows == [("alpha", None)], rows


def test_r2_an_unforeseen_exception_is_an_invalid_response_not_a_500() -> None:
    """An exception type the classifier does not map is classified invalid_response (so the
    router falls back), with a short reason and the key scrubbed from the log (R2)."""
    c = classify_unforeseen(KeyError(KEY), output_started=False, scrub=Scrubber(KEY))
    assert c.failure_class is FailureClass.INVALID_RESPONSE and c.reason == "unexpected_KeyError"


# ---- 4. fuzz: request parsing and upstream replies ----------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=25,
)


@st.composite
def client_bodies(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["chat", "value", "nested", "bytes", "encoded"]))
    if kind == "chat":
        body = {
            "messages": draw(
                st.one_of(
                    st.just([{"role": "user", "content": "Continue the scene."}]),
                    st.lists(
                        st.fixed_dictionaries(
                            {"role": st.sampled_from(["user", "system", "x"]), "content": json_values}
                        ),
                        max_size=3,
                    ),
                    json_values,
                )
            ),
            **draw(
                st.dictionaries(
                    st.sampled_from(
                        ["max_tokens", "temperature", "stop", "stream", "logit_bias", "top_p",
                         "response_format", "n", "tools", "provider", "model", "seed", "user"]
                    ),
                    json_values,
                    max_size=4,
                )
            ),
        }  # fmt: skip
        return json.dumps(body).encode()
    if kind == "value":
        return json.dumps(draw(json_values)).encode()
    if kind == "nested":
        depth = draw(st.sampled_from([10, 63, 64, 65, 1000, 100_000]))
        opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
        inner = "1" if opener != "[" else ""
        return f'{{"messages": {opener * depth}{inner}{closer * depth}}}'.encode()
    if kind == "encoded":
        text = json.dumps({"messages": [{"role": "user", "content": draw(st.text(max_size=40))}]})
        codec = draw(st.sampled_from(["utf-16", "utf-32", "latin-1", "utf-8-sig"]))
        return text.encode(codec, errors="replace")
    return draw(st.binary(max_size=300))


def test_r2_fuzz_gateway_request_parsing_never_gives_a_500(hostile: Hostile) -> None:
    """Random bodies (JSON values of random shape and nesting, chat bodies with random
    parameter values, deep nesting, other encodings, random bytes) and random workloads:
    never a 500, every error in OpenAI's shape (R2)."""
    hostile.handler = clean
    with TestClient(create_app(router_for(hostile), GatewayConfig(keys=[GW]))) as client:

        @settings(max_examples=120, deadline=None)
        @given(
            body=client_bodies(),
            workload=st.sampled_from(["chat", "classify", "tool_agent", "invoice_extraction", "nope"]),
            stream=st.booleans(),
        )  # fmt: skip
        def check(body: bytes, workload: str, stream: bool) -> None:
            r = client.post(
                "/v1/chat/completions",
                content=body,
                headers={**AUTH, "X-Workload": workload, "Content-Type": "application/json"},
            )
            assert r.status_code != 500, r.text[:300]
            if r.status_code >= 400:
                err = r.json()["error"]
                assert {"message", "type", "code", "param", "reason"} <= set(err)

        check()


@st.composite
def upstream_replies(draw: st.DrawFn) -> Reply:
    kind = draw(st.sampled_from(["sse", "status", "raw"]))
    if kind == "status":
        status = draw(st.sampled_from([400, 401, 402, 403, 404, 408, 413, 422, 429, 500, 502, 503, 504, 418]))  # fmt: skip
        payload = draw(st.one_of(json_values, st.fixed_dictionaries({"error": json_values})))
        return raw_reply(status, json.dumps(payload).encode())
    if kind == "raw":
        return raw_reply(draw(st.sampled_from([200, 500])), draw(st.binary(max_size=500)))
    lines: list[bytes] = []
    for _ in range(draw(st.integers(0, 6))):
        value = draw(
            st.one_of(
                json_values,
                st.builds(
                    lambda content, finish, usage, extra: {
                        "provider": "Alpha",
                        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}],
                        "usage": usage,
                        **extra,
                    },
                    json_values,
                    st.none() | st.sampled_from(["stop", "length", "error", "tool_calls"]) | json_values,
                    json_values,
                    st.dictionaries(st.sampled_from(["error", "id", "model", "provider"]), json_values, max_size=2),
                ),
            )
        )  # fmt: skip
        lines.append(data_line(json.dumps(value)))
    lines += draw(st.lists(st.binary(max_size=60).map(lambda b: b + b"\n\n"), max_size=2))
    if draw(st.booleans()):
        lines.append(b"data: [DONE]\n\n")
    return sse_reply(lines)


def test_r2_fuzz_upstream_replies_never_give_a_500(hostile: Hostile) -> None:
    """Random upstream replies (random statuses and envelopes, random chunk shapes and
    values, NaN, random bytes, with or without [DONE]) on the first route: the gateway never
    answers 500, in either mode (R2)."""
    with TestClient(create_app(router_for(hostile), GatewayConfig(keys=[GW]))) as client:

        @settings(max_examples=80, deadline=None)
        @given(reply=upstream_replies(), stream=st.booleans(), workload=st.sampled_from(["chat", "classify"]))  # fmt: skip
        def check(reply: Reply, stream: bool, workload: str) -> None:
            parts = list(reply.parts)
            hostile.handler = alpha_then(lambda req: Reply(list(parts)))
            r = client.post(
                "/v1/chat/completions",
                json=chat_body(stream=stream),
                headers={**AUTH, "X-Workload": workload},
            )
            assert r.status_code != 500, r.text[:300]

        check()
