"""Fault injection against the real fleet over loopback HTTP (SPEC R2-R9, R12).

Each test loads its own scenario (`routing_scenario(faults=..., defects=...)`) and
checks both what the router returned and what the fleet actually received.
"""

from __future__ import annotations

import time

import pytest

from routing.breaker import BreakerBoard, BreakerConfig, CircuitStatus
from routing.errors import (
    AmbiguousCompletionError,
    CapacityError,
    CircuitOpenError,
    DeadlineExhaustedError,
    FailureClass,
    InvalidResponseError,
    PermanentRequestError,
    TransientTransportError,
    UpstreamMisconfiguredError,
)
from tests.fixtures.fleet import FleetHandle
from tests.fixtures.routing import (
    SleepRecorder,
    chat_body,
    make_router,
    routes_table,
    routing_catalog,
    routing_scenario,
    served_tags,
)

CLASSIFY = {"messages": [{"role": "user", "content": "My card was charged twice, please help."}]}
TOOLS = {"messages": [{"role": "user", "content": "Open a ticket: the printer is on fire."}]}


async def test_r5_429_retry_after_honoured_on_first_attempt(fleet: FleetHandle) -> None:
    """A 429 with Retry-After 1 on the primary: the router waits exactly the hint and retries that route (R2, R5)."""
    fleet.load(
        routing_scenario(
            faults={
                "alpha-a": [{"kind": "http_error", "status": 429, "retry_after_s": 1, "first_n": 1}]
            }
        )
    )
    sleep = SleepRecorder()
    router = make_router(fleet.base_url, fleet.key, sleep=sleep)
    result = await router.complete(chat_body(), workload="chat")
    assert result.route.id == "alpha"
    assert sleep.waits == [1.0]
    assert [a.failure_class for a in result.attempts] == ["capacity", None]
    assert [r["status"] for r in fleet.requests()] == [429, 200]
    assert (
        router.metrics.snapshot()["fallback_rate"] == 0.0
    )  # a same-route retry is not a fallback (R11)


async def test_r5_retry_after_honoured_on_later_attempt(fleet: FleetHandle) -> None:
    """Retry-After is honoured on every attempt, not only the first: a fallback's 429 hint is waited too (R5)."""
    fleet.load(
        routing_scenario(
            faults={
                "alpha-a": [{"kind": "http_error", "status": 502, "first_n": 5}],
                "beta-a": [{"kind": "http_error", "status": 429, "retry_after_s": 2, "first_n": 1}],
            }
        )
    )
    sleep = SleepRecorder()
    router = make_router(fleet.base_url, fleet.key, sleep=sleep)
    result = await router.complete(chat_body(), workload="chat")
    assert result.route.id == "beta"
    assert sleep.waits == [2.0]
    assert served_tags(fleet.requests()) == ["alpha-a", "beta-a", "beta-a"]
    assert (
        len(fleet.requests()) == len(result.attempts) == 3
    )  # nothing below the router retried (R3)


async def test_r5_retry_after_beyond_deadline_falls_back_without_sleeping(
    fleet: FleetHandle,
) -> None:
    """A Retry-After longer than the remaining deadline is not slept: the router falls back at once (R4, R5)."""
    fleet.load(
        routing_scenario(
            faults={
                "alpha-a": [
                    {"kind": "http_error", "status": 503, "retry_after_s": 120, "rate": 1.0}
                ]
            }
        )
    )
    sleep = SleepRecorder()
    router = make_router(fleet.base_url, fleet.key, sleep=sleep)
    result = await router.complete(chat_body(), workload="chat")
    assert result.route.id == "beta"
    assert sleep.waits == []
    assert result.attempts[1].fallback_reason == "retry_after_120s_exceeds_deadline"


async def test_r2_502_and_503_fall_back_to_a_compatible_route(fleet: FleetHandle) -> None:
    """Selected 5xx are capacity failures: one fallback to the next compatible route, no same-route retry (R2, R5)."""
    for status in (502, 503):
        fleet.load(
            routing_scenario(
                faults={"alpha-a": [{"kind": "http_error", "status": status, "rate": 1.0}]}
            )
        )
        fleet.clear_requests()
        router = make_router(fleet.base_url, fleet.key)
        result = await router.complete(chat_body(), workload="chat")
        assert result.route.id == "beta"
        assert served_tags(fleet.requests()) == ["alpha-a", "beta-a"]
        assert result.attempts[0].failure_class == FailureClass.CAPACITY


async def test_r2_connection_reset_before_headers_is_transient_and_falls_back(
    fleet: FleetHandle,
) -> None:
    """A reset before any header is transient transport (nothing generated): the next route answers (R2)."""
    fleet.load(routing_scenario(faults={"alpha-a": [{"kind": "reset", "rate": 1.0}]}))
    router = make_router(fleet.base_url, fleet.key)
    result = await router.complete(chat_body(), workload="chat")
    assert result.attempts[0].failure_class == FailureClass.TRANSIENT
    assert result.route.id == "beta"


async def test_r5_early_connect_failure_gets_one_same_route_retry_with_backoff() -> None:
    """A refused connection (no billable output possible) gets exactly one same-route retry after jittered backoff, then the fallback (R5)."""
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now: connection refused
    sleep = SleepRecorder()
    router = make_router(f"http://127.0.0.1:{port}/api/v1", "k", sleep=sleep)
    with pytest.raises(TransientTransportError) as err:
        await router.complete(chat_body(), workload="chat")
    assert err.value.attempts == 3
    assert [a.route_id for a in err.value.attempt_events] == ["alpha", "alpha", "beta"]
    assert len(sleep.waits) == 1 and 0 <= sleep.waits[0] <= 0.1  # random(0, min(cap, base * 2**0))


async def test_r2_r8_stream_cut_after_tokens_is_ambiguous_and_never_replayed_for_tools(
    fleet: FleetHandle,
) -> None:
    """A cut after output on a side-effecting workload is ambiguous: explicit failure, no replay anywhere (R2, R8)."""
    fleet.load(
        routing_scenario(
            faults={"alpha-a": [{"kind": "stream_cut", "after_fraction": 0.5, "rate": 1.0}]}
        )
    )
    router = make_router(fleet.base_url, fleet.key)
    with pytest.raises(AmbiguousCompletionError):
        await router.complete(TOOLS, workload="tool_agent")
    assert served_tags(fleet.requests()) == ["alpha-a"]


async def test_r2_stream_cut_on_side_effect_free_workload_falls_back(fleet: FleetHandle) -> None:
    """The same cut on a replay-safe workload (chat) falls back to another route (R2)."""
    fleet.load(
        routing_scenario(
            faults={"alpha-a": [{"kind": "stream_cut", "after_fraction": 0.5, "rate": 1.0}]}
        )
    )
    router = make_router(fleet.base_url, fleet.key)
    result = await router.complete(chat_body(), workload="chat")
    assert result.attempts[0].failure_class == FailureClass.AMBIGUOUS
    assert result.route.id == "beta"


@pytest.mark.parametrize(
    ("defect", "workload", "body", "reason"),
    [
        (
            {"kind": "schema_break", "modes": ["invalid_json"]},
            "classify",
            CLASSIFY,
            "malformed_json",
        ),
        (
            {"kind": "schema_break", "modes": ["missing_field"]},
            "classify",
            CLASSIFY,
            "missing_field",
        ),
        ({"kind": "tool_unknown_name"}, "tool_agent", TOOLS, "unknown_tool"),
        ({"kind": "tool_bad_args"}, "tool_agent", TOOLS, "tool_args_invalid"),
        ({"kind": "tool_as_text", "style": "xml"}, "tool_agent", TOOLS, "tool_markup_leak"),
        ({"kind": "tool_as_text", "style": "mistral"}, "tool_agent", TOOLS, "tool_markup_leak"),
        ({"kind": "tool_as_text", "style": "kimi"}, "tool_agent", TOOLS, "tool_markup_leak"),
        ({"kind": "tool_as_text", "style": "llama"}, "tool_agent", TOOLS, "tool_markup_leak"),
    ],
)
async def test_r7_invalid_successful_response_rejected_then_fallback(
    fleet: FleetHandle, defect: dict, workload: str, body: dict, reason: str
) -> None:
    """HTTP 200 that breaks the contract (bad JSON, missing field, unknown tool, bad args, call markup leaked into the content) is rejected and the fallback answers (R7)."""
    fleet.load(routing_scenario(defects={"alpha-a": [{**defect, "rate": 1.0}]}))
    router = make_router(
        fleet.base_url, fleet.key, catalog=routing_catalog(classify={"semantic": None})
    )
    result = await router.complete(body, workload=workload)
    first = result.attempts[0]
    assert first.http_success and first.failure_class == FailureClass.INVALID_RESPONSE
    assert first.validation == reason or (
        reason == "tool_args_invalid" and first.validation == "tool_args_malformed"
    )
    assert result.route.id == "beta" and result.attempts[-1].validation == "accepted"
    snap = router.metrics.snapshot()
    assert snap["http_success_rate"] == 1.0 and snap["validation_rejection_rate"] == 0.5  # R11 pair


async def test_r7_semantic_check_rejects_http_success_everywhere(fleet: FleetHandle) -> None:
    """A schema-valid label outside the workload's allowed set on every route: explicit invalid-response failure, never a success (R7, R11)."""
    fleet.load(routing_scenario())
    semantic = {"validator": "classify", "params": {"labels": ["refund-only"]}}
    catalog = routing_catalog(classify={"hedge_after_ms": None, "semantic": semantic})
    router = make_router(fleet.base_url, fleet.key, catalog=catalog)
    with pytest.raises(InvalidResponseError) as err:
        await router.complete(CLASSIFY, workload="classify")
    assert err.value.reason == "classify_label_not_allowed"
    assert router.metrics.snapshot()["validation_rejection_rate"] == 1.0


async def test_r6_context_overflow_only_a_larger_context_route_is_tried(fleet: FleetHandle) -> None:
    """context_length_exceeded moves only to a route with a larger context; a same-size sibling is skipped (R2, R6)."""
    fleet.load(routing_scenario())
    stale = {
        "tools": True,
        "schema_modes": ["json_schema"],
        "context_length": 16384,
        "latency_p50_ms": 50,
    }
    routes = routes_table(
        extra=[
            {"id": "alpha-stale", "model": "acme/alpha", **stale},
            {"id": "alpha-stale-2", "model": "acme/alpha", **stale, "latency_p50_ms": 60},
        ],
        groups={
            "text": ["alpha-stale", "alpha-stale-2", "alpha", "beta"],
            "long_context": ["vision"],
            "schema": ["beta"],
            "tools": ["beta"],
            "vision": ["vision"],
        },
    )
    router = make_router(
        fleet.base_url, fleet.key, catalog=routing_catalog(routes, chat={"route_groups": ["text"]})
    )
    long_prompt = "word " * 10_000  # ~12.5k estimated tokens: more than 8k, less than 16k
    result = await router.complete(chat_body(long_prompt, max_tokens=200), workload="chat")
    assert [a.route_id for a in result.attempts] == [
        "alpha-stale",
        "beta",
    ]  # alpha (8k) filtered by estimate
    assert result.attempts[0].reason == "context_length_exceeded"
    assert [r["model"] for r in fleet.requests()] == ["acme/alpha", "acme/beta"]


async def test_r4_slow_success_that_would_overrun_the_deadline(fleet: FleetHandle) -> None:
    """A slow first token on a workload with one route (no fallback to keep time for) is cut by the attempt's budget (what the deadline leaves after the reserve and the validation allowance), and no attempt starts that cannot finish: one attempt, cut, then an explicit deadline error (R4)."""
    import asyncio

    fleet.load(
        routing_scenario(
            faults={"alpha-a": [{"kind": "slow_first_token", "ttft_s": 100, "rate": 1.0}]}
        )
    )  # 10 s at the fleet's time scale: far past the deadline, so only a cut ends the attempt
    groups = {"text": ["alpha", "beta"], "schema": ["alpha", "beta"], "tools": ["alpha", "beta"],
              "vision": ["vision"], "long_context": ["vision"], "solo": ["alpha"]}  # fmt: skip
    solo = routes_table(groups=groups)
    router = make_router(
        fleet.base_url,
        fleet.key,
        catalog=routing_catalog(solo, chat={"deadline_ms": 1500, "route_groups": ["solo"]}),
        sleep=asyncio.sleep,
    )
    with pytest.raises(DeadlineExhaustedError) as raised:
        async with asyncio.timeout(30):
            await router.complete(chat_body(), workload="chat")
    assert raised.value.reason == "no_time_for_attempt"
    [attempt] = raised.value.attempt_events  # the fallback was never started
    assert (attempt.route_id, attempt.failure_class, attempt.reason) == (
        "alpha",
        "transient_transport",
        "timeout_error",  # the attempt's own budget cut it, before any output
    )
    assert served_tags(fleet.requests()) == ["alpha-a"]


async def test_r7_stray_start_on_streaming_workload_fails_over_before_first_byte(
    fleet: FleetHandle,
) -> None:
    """A stray reply start is caught in the buffered head: the client gets the fallback's clean start (R7, C9)."""
    fleet.load(routing_scenario(defects={"alpha-a": [{"kind": "stray_start", "rate": 1.0}]}))
    router = make_router(fleet.base_url, fleet.key)
    result = await router.stream(chat_body(), workload="chat")
    try:
        assert result.attempts[0].validation == "stray_start"
        assert result.route.id == "beta"
        # the rest, unless the whole reply came before its start settled (then all in `head`)
        pieces = [result.head] + ([p async for p in result.rest] if result.rest else [])
        text = "".join(pieces)
        assert text and text.lstrip()[0] not in ",;:)]}.!?|"
    finally:
        await result.close()


async def test_r2_r9_client_errors_never_retried_and_never_open_a_circuit(
    fleet: FleetHandle,
) -> None:
    """400 (client) and 401 (our upstream key: upstream_misconfigured) stop at once (one upstream request each) and leave every circuit closed (R2, R9)."""
    fleet.load(routing_scenario())
    board = BreakerBoard(BreakerConfig(consecutive_failures=2))
    bad_key = make_router(fleet.base_url, "wrong-key", breakers=board)
    bad_param = make_router(fleet.base_url, fleet.key, breakers=board)
    # well-formed at the gateway's door (routing/params.py), refused by the upstream: a
    # response_format whose JSON Schema names no JSON type
    bad_schema = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "nope"}}}
    for _ in range(4):
        with pytest.raises(UpstreamMisconfiguredError):
            await bad_key.complete(chat_body(), workload="chat")
        with pytest.raises(PermanentRequestError):
            await bad_param.complete(chat_body(response_format=bad_schema), workload="chat")
    assert [r["status"] for r in fleet.requests()] == [401, 400] * 4
    assert board.status("alpha", time.monotonic()) is CircuitStatus.CLOSED
    result = await bad_param.complete(chat_body(), workload="chat")
    assert result.route.id == "alpha"


async def test_r9_open_circuit_skips_route_then_one_half_open_probe(fleet: FleetHandle) -> None:
    """A 502 opens alpha's circuit (threshold 1): it is skipped, then after open_for exactly one probe goes through (R9)."""
    import asyncio

    fleet.load(
        routing_scenario(faults={"alpha-a": [{"kind": "http_error", "status": 502, "first_n": 1}]})
    )
    board = BreakerBoard(
        BreakerConfig(consecutive_failures=1, open_for_s=0.5, half_open_max_probes=1)
    )
    router = make_router(
        fleet.base_url,
        fleet.key,
        breakers=board,
        catalog=routing_catalog(chat={"route_groups": ["text"]}),
    )
    assert (await router.complete(chat_body(), workload="chat")).route.id == "beta"
    assert board.status("alpha", time.monotonic()) is CircuitStatus.OPEN
    fleet.clear_requests()
    assert (await router.complete(chat_body(), workload="chat")).route.id == "beta"
    assert served_tags(fleet.requests()) == ["beta-a"]  # alpha suppressed, not even tried
    await asyncio.sleep(0.55)
    fleet.clear_requests()
    results = await asyncio.gather(
        *(router.complete(chat_body(), workload="chat") for _ in range(3))
    )
    assert (
        sum(r.route.id == "alpha" for r in results) == 1
    )  # one probe admitted; the others fell to beta
    assert board.status("alpha", time.monotonic()) is CircuitStatus.CLOSED


async def test_r9_every_compatible_route_open_fails_fast(fleet: FleetHandle) -> None:
    """When every compatible route's circuit is open the router fails fast, without any upstream call (R9)."""
    fleet.load(
        routing_scenario(
            faults={
                t: [{"kind": "http_error", "status": 502, "rate": 1.0}]
                for t in ("alpha-a", "beta-a")
            }
        )
    )
    board = BreakerBoard(BreakerConfig(consecutive_failures=1, open_for_s=60))
    router = make_router(
        fleet.base_url,
        fleet.key,
        breakers=board,
        catalog=routing_catalog(chat={"route_groups": ["text"]}),
    )
    with pytest.raises(CapacityError):  # the first request tries both and fails explicitly
        await router.complete(chat_body(), workload="chat")
    fleet.clear_requests()
    with pytest.raises(CircuitOpenError):
        await router.complete(chat_body(), workload="chat")
    assert fleet.requests() == []


async def test_r5_hedging_latency_critical_workload_cancels_the_loser_and_counts_its_cost(
    fleet: FleetHandle,
) -> None:
    """Classify (latency-critical, side-effect free) hedges a slow primary: the fast backup wins, the loser is cancelled and billed (R5)."""
    fleet.load(
        routing_scenario(
            faults={"alpha-a": [{"kind": "slow_first_token", "ttft_s": 30, "rate": 1.0}]}
        )
    )
    catalog = routing_catalog(classify={"semantic": None, "hedge_after_ms": 150})
    router = make_router(fleet.base_url, fleet.key, catalog=catalog)
    result = await router.complete(CLASSIFY, workload="classify")
    assert result.route.id == "beta"  # the primary alone would take ~3 s
    by_route = {a.route_id: a for a in result.attempts}
    assert by_route["alpha"].cancelled and by_route["alpha"].cost_usd > 0
    assert by_route["beta"].hedged and by_route["beta"].validation == "accepted"
    assert (
        router.metrics.snapshot()["cost_per_accepted_usd"]
        >= by_route["alpha"].cost_usd + by_route["beta"].cost_usd - 1e-12
    )
    assert sorted(served_tags(fleet.requests()), key=str) == ["alpha-a", "beta-a"]


async def test_r5_no_hedge_when_the_primary_is_fast(fleet: FleetHandle) -> None:
    """A primary that answers before hedge_after_ms is never duplicated (R5)."""
    fleet.load(routing_scenario())
    router = make_router(
        fleet.base_url,
        fleet.key,
        catalog=routing_catalog(classify={"semantic": None, "hedge_after_ms": 1500}),
    )
    result = await router.complete(CLASSIFY, workload="classify")
    assert [a.route_id for a in result.attempts] == ["alpha"]
    assert served_tags(fleet.requests()) == ["alpha-a"]


async def test_r2_in_band_error_chunk_is_rejected_and_falls_back(fleet: FleetHandle) -> None:
    """An error chunk after HTTP 200 (finish_reason error) is never a success: classified and fallen back (R2, R7)."""
    fleet.load(
        routing_scenario(
            faults={"alpha-a": [{"kind": "midstream_error", "after_fraction": 0.5, "rate": 1.0}]}
        )
    )
    router = make_router(fleet.base_url, fleet.key)
    result = await router.complete(chat_body(), workload="chat")
    first = result.attempts[0]
    assert (
        first.http_success
        and first.failure_class == FailureClass.CAPACITY
        and first.validation == "in_band_error"
    )
    assert result.route.id == "beta"
