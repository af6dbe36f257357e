"""Both error dialects through one table (issue 32 item 6, SPEC R2): OpenRouter's kind in
`error.metadata.error_type`, the OpenAI-compatible kind in `error.code` (a string) or
`error.type`. Pure over every row, then over real HTTP: the OpenAI client -> gateway ->
fleet serving OpenAI-style error bodies."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from ground.settings import GatewayConfig
from routing.classify import ERROR_KINDS, REFUSAL_TEXT_CHARS, classify
from routing.errors import FailureClass
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
    served_tags,
)
from wire.errors import parse_error
from wire.text import Scrubber

F = FailureClass
KEY = "gw-dialect-key"
INC, P, C, U = F.INCOMPATIBLE, F.PERMANENT, F.CAPACITY, F.UPSTREAM_CONFIG

# every kind -> (its class, the reason it is known by, a policy refusal); written down here
# apart from the table, so a row added, dropped or changed there fails until it is here too
EXPECTED: dict[str, tuple[FailureClass, str, bool]] = {
    "context_length_exceeded": (INC, "context_length_exceeded", False),
    "context_window_exceeded": (INC, "context_length_exceeded", False),
    "max_tokens_exceeded": (INC, "max_tokens_exceeded", False),
    "payload_too_large": (INC, "payload_too_large", False),
    "request_too_large": (INC, "payload_too_large", False),
    "unsupported_modality": (INC, "unsupported_modality", False),
    "model_not_found": (INC, "model_not_found", False),
    "not_found_error": (INC, "model_not_found", False),
    "invalid_request": (P, "invalid_request", False),
    "invalid_request_error": (P, "invalid_request", False),
    "unprocessable": (P, "unprocessable", False),
    "authentication": (U, "authentication", False),
    "authentication_error": (U, "authentication", False),
    "invalid_api_key": (U, "authentication", False),
    "payment_required": (U, "payment_required", False),
    "insufficient_quota": (U, "payment_required", False),
    "billing_hard_limit_reached": (U, "payment_required", False),
    "permission_denied": (INC, "permission_denied", True),
    "content_policy_violation": (INC, "content_policy_violation", True),
    "content_filter": (INC, "content_policy_violation", True),
    "refusal": (INC, "refusal", True),
    "permission_error": (INC, "permission_error", False),
    "rate_limit_exceeded": (C, "rate_limit_exceeded", False),
    "rate_limit_error": (C, "rate_limit_exceeded", False),
    "provider_overloaded": (C, "provider_overloaded", False),
    "overloaded_error": (C, "provider_overloaded", False),
    "provider_unavailable": (C, "provider_unavailable", False),
    "service_unavailable": (C, "provider_unavailable", False),
    "server": (C, "server", False),
    "server_error": (C, "server", False),
    "api_error": (C, "server", False),
    "timeout": (F.TRANSIENT, "timeout", False),
}


def _dialects(kind: str, status: int) -> dict[str, dict[str, Any]]:
    """One error of `kind` as each dialect sends it."""
    message = f"the provider says: {kind}"
    return {
        "openrouter": {
            "error": {"code": status, "message": message, "metadata": {"error_type": kind}}
        },
        "openai_code": {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": None,
                "code": kind,
            }
        },
        "openai_type": {"error": {"message": message, "type": kind, "param": None, "code": None}},
        "openai_code_upper": {"error": {"message": message, "code": kind.upper()}},
    }


def test_issue32_the_expected_table_names_every_kind_of_the_one_table() -> None:
    """Every row of `ERROR_KINDS` is written down here, and no other; a synonym's reason is
    itself a row (the name moves and policies read)."""
    assert set(EXPECTED) == set(ERROR_KINDS), "ERROR_KINDS and this test disagree on the rows"
    for kind, row in ERROR_KINDS.items():
        assert kind == kind.lower(), f"{kind}: the table is read lower-cased"
        assert (row.reason or kind) in ERROR_KINDS, f"{kind}: its reason {row.reason} is no row"


@pytest.mark.parametrize("kind", sorted(EXPECTED))
@pytest.mark.parametrize("status", [400, 403, 429, 503])
def test_issue32_every_kind_classifies_alike_in_both_dialects(kind: str, status: int) -> None:
    """Each kind lands in its class, with its reason and refusal flag, whichever dialect
    names it and whatever status carries it: OpenRouter's `metadata.error_type`, OpenAI's
    string `error.code` (beside the generic `type: invalid_request_error`, which it
    overrides), OpenAI's `error.type` alone, a code in capitals (R2)."""
    expected = EXPECTED[kind]
    for dialect, payload in _dialects(kind, status).items():
        info = parse_error(payload, fallback_code=status)
        assert info is not None, dialect
        info = info.model_copy(update={"code": status})  # as the upstream client sets it
        c = classify(info)
        got = (c.failure_class, c.reason, c.refusal)
        assert got == expected, f"{kind} in the {dialect} dialect (HTTP {status}): {got}"
        assert bool(c.detail) is expected[2], f"{kind}/{dialect}: only a refusal quotes text"


def test_issue32_an_unknown_kind_falls_back_to_its_status_and_keeps_its_name() -> None:
    """A code the table does not know is classified by its status; its reason is its name
    (R2)."""
    for status, cls in ((400, P), (404, INC), (429, C), (502, C)):
        info = parse_error({"error": {"message": "m", "code": "brand_new_code"}})
        assert info is not None
        c = classify(info.model_copy(update={"code": status}))
        assert (c.failure_class, c.reason) == (cls, "brand_new_code"), status


def test_issue32_a_refusals_text_is_scrubbed_and_bounded_a_cut_marked() -> None:
    """The provider's reason is the upstream's text scrubbed of our key, whitespace folded,
    at most `REFUSAL_TEXT_CHARS`, a cut one ending in an ellipsis (R2)."""
    secret = "sk-or-v1-0123456789abcdef"
    text = f"Flagged for violence.\n Key {secret} rejected. " + "x" * 800 + " TAIL"
    info = parse_error(
        {"error": {"message": text, "code": "content_policy_violation"}},
        scrub=Scrubber(secret),
        fallback_code=400,
    )
    assert info is not None
    c = classify(info)
    assert c.detail.startswith("Flagged for violence. Key *** rejected.")
    assert secret[:8] not in c.detail and "TAIL" not in c.detail
    assert len(c.detail) == REFUSAL_TEXT_CHARS and c.detail.endswith("…")


# ---- over real HTTP ---------------------------------------------------------------------


def _openai_fault(code: str, message: str) -> dict[str, Any]:
    return {"kind": "openai_error", "rate": 1.0, "status": 400, "code": code, "message": message}


def _gateway(fleet: FleetHandle, ledger_url: str, **contract: Any) -> tuple[Any, Any]:
    router = make_router(
        fleet.base_url,
        fleet.key,
        events=EventLog(ledger_url),
        catalog=routing_catalog(chat={"route_groups": ["text"], **contract}),
    )
    return create_app(router, GatewayConfig(keys=[KEY], events_flush_s=0.05)), router


def _attempts(ledger_url: str) -> list[tuple[Any, ...]]:
    return ledger_rows(
        ledger_url,
        "select route_id, failure_class, reason from routing_attempts order by attempt_index",
    )


@pytest.mark.parametrize("stream", [False, True])
async def test_issue32_context_length_exceeded_in_error_code_moves_to_a_larger_context_route(
    fleet: FleetHandle, ledger_url: str, stream: bool
) -> None:
    """alpha (context 8192) answers 400 with `error.code: context_length_exceeded` in the
    OpenAI-compatible dialect: the router falls back to beta (131072), and the client gets
    beta's answer; the ledger shows alpha then beta (R2, R6)."""
    fault = _openai_fault("context_length_exceeded", "This model's maximum context length is 8192 tokens.")  # fmt: skip
    fleet.load(routing_scenario(faults={"alpha-a": [fault], "alpha-b": [fault]}))
    app, router = _gateway(fleet, ledger_url)
    async with ServedApp(app) as s:
        client = openai.AsyncOpenAI(base_url=f"{s.url}/v1", api_key=KEY, max_retries=0)
        if stream:
            chunks = [c async for c in await client.chat.completions.create(
                model="chat", messages=chat_body()["messages"], stream=True)]  # fmt: skip
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            model = chunks[0].model
        else:
            reply = await client.chat.completions.create(
                model="chat", messages=chat_body()["messages"]
            )
            text, model = reply.choices[0].message.content or "", reply.model
        await client.close()
    assert text.strip() and model == "acme/beta", (model, text)
    await router.events.aflush()
    assert _attempts(ledger_url) == [
        ("alpha", "route_incompatible", "context_length_exceeded"),
        ("beta", None, None),
    ]
    assert served_tags(fleet.requests()) == ["alpha-a", "beta-a"]


async def test_issue32_content_policy_reason_reaches_the_client_scrubbed(
    fleet: FleetHandle, ledger_url: str
) -> None:
    """Every route refuses with `error.code: content_policy_violation` (OpenAI's dialect):
    another route was tried (a text workload's default), and the client's error quotes the
    last provider's reason, the upstream key scrubbed out of it (R2)."""
    reason = f"Your request was flagged by our safety system for violence (key {fleet.key})."
    fault = _openai_fault("content_policy_violation", reason)
    fleet.load(routing_scenario(faults={t: [fault] for t in ("alpha-a", "alpha-b", "beta-a")}))
    app, router = _gateway(fleet, ledger_url)
    async with ServedApp(app) as s:
        client = openai.AsyncOpenAI(base_url=f"{s.url}/v1", api_key=KEY, max_retries=0)
        with pytest.raises(openai.APIStatusError) as err:
            await client.chat.completions.create(model="chat", messages=chat_body()["messages"])
        await client.close()
    body = err.value.response.json()["error"]
    assert "flagged by our safety system for violence" in body["message"], body["message"]
    assert fleet.key not in body["message"] and fleet.key not in err.value.response.text
    assert body["reason"] == "content_policy_violation"
    assert body["failure_class"] == "route_incompatible"
    await router.events.aflush()
    assert [row[0] for row in _attempts(ledger_url)] == ["alpha", "beta"]


@pytest.mark.parametrize("policy", ["fallback", "stop"])
async def test_issue32_the_workloads_refusal_policy_decides_whether_another_route_tries(
    fleet: FleetHandle, ledger_url: str, policy: str
) -> None:
    """alpha refuses in OpenAI's dialect. `on_refusal: fallback` (the default): beta answers.
    `on_refusal: stop`: no other route is tried, and the client's error is the refusal with
    the provider's reason (R2, R6)."""
    reason = "Output blocked by the content filter: self-harm."
    fault = _openai_fault("content_policy_violation", reason)
    fleet.load(routing_scenario(faults={"alpha-a": [fault], "alpha-b": [fault]}))
    app, router = _gateway(fleet, ledger_url, on_refusal=policy)
    async with ServedApp(app) as s:
        client = openai.AsyncOpenAI(base_url=f"{s.url}/v1", api_key=KEY, max_retries=0)
        messages = chat_body()["messages"]
        if policy == "fallback":
            reply = await client.chat.completions.create(model="chat", messages=messages)
            assert reply.model == "acme/beta" and reply.choices[0].message.content
        else:
            with pytest.raises(openai.APIStatusError) as err:
                await client.chat.completions.create(model="chat", messages=messages)
            body = err.value.response.json()["error"]
            assert reason in body["message"] and body["reason"] == "content_policy_violation"
        await client.close()
    await router.events.aflush()
    routes = [row[0] for row in _attempts(ledger_url)]
    assert routes == (["alpha", "beta"] if policy == "fallback" else ["alpha"]), routes
