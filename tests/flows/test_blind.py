"""Blind rounds (the canary distrusts itself): when our key or credits are refused, or
too many endpoints are unreachable, the round applies nothing, ends Failed (red) with a
one-line reason, alerts admins, the CLI exits 1, and the slot stays open for a retry.
The decision is a pure function (first half); the wiring runs on the fleet under
Prefect's real local API (second half)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prefect import get_client
from prefect.blocks.notifications import CustomWebhookNotificationBlock
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName
from typer.testing import CliRunner

from canary.cli import app
from flows.canary_round import RoundSummary, canary_round
from probes.errors import (
    DiscoveryAuthError,
    DiscoveryHTTPError,
    DiscoveryTransportError,
    MalformedDiscoveryPayload,
    ModelNotFoundError,
)
from probes.types import Contract, Outcome, OutcomeStatus
from quarantine.adapters.store import aload_state
from quarantine.blind import BlindKind, blind_discovery, blind_round
from quarantine.verdicts import round_verdict
from tests.fixtures.canary_env import endpoint, load_model
from tests.fixtures.fleet import FleetHandle
from tests.flows.test_flow_policy import webhook  # noqa: F401  (a real loopback webhook listener)

T0 = datetime(2026, 11, 5, 0, 0, tzinfo=UTC)
HALF_HOUR = timedelta(minutes=30)
P, T = OutcomeStatus.PASS, OutcomeStatus.TRANSPORT


def _o(tag: str, status: OutcomeStatus, reason: str = "ok", **evidence: Any) -> Outcome:
    return Outcome(
        contract=Contract.LATENCY, status=status, reason=reason, tag=tag, evidence=evidence
    )


def _round(outcomes: dict[str, list[Outcome]]) -> tuple[dict[str, Any], dict[str, Any]]:
    return {t: round_verdict(t, items) for t, items in outcomes.items()}, outcomes


# ---- the pure decision ----------------------------------------------------------------


def test_one_401_makes_the_round_blind_with_a_one_line_reason() -> None:
    """Our key refused anywhere (HTTP 401, or an in-band 401) blinds the whole round."""
    outcomes = {
        "a/fp8": [_o("a/fp8", T, "http_401", http_status=401)],
        "b/fp8": [_o("b/fp8", P)],
        "c/fp8": [_o("c/fp8", T, "in_band_401", http_status=200, error_code=401)],
    }
    blind = blind_round(*_round(outcomes), transport_share=0.5)
    assert blind is not None and blind.kind is BlindKind.KEY_REFUSED
    assert blind.reason.startswith("upstream rejected the API key")
    assert "2 of 3" in blind.reason and "\n" not in blind.reason
    assert blind.affected == ("a/fp8", "c/fp8")


def test_402_is_our_credits() -> None:
    """HTTP 402 names our credits, not a provider."""
    outcomes = {"a/fp8": [_o("a/fp8", T, "http_402", http_status=402)], "b/fp8": [_o("b", P)]}
    blind = blind_round(*_round(outcomes), transport_share=0.9)
    assert blind is not None and blind.kind is BlindKind.CREDITS_REFUSED
    assert "credits" in blind.reason


@pytest.mark.parametrize(
    ("frozen", "total", "share", "blind"),
    [(2, 4, 0.5, True), (1, 4, 0.5, False), (3, 4, 0.75, True), (2, 4, 0.75, False)],
)
def test_transport_share_threshold(frozen: int, total: int, share: float, blind: bool) -> None:
    """At least `share` of the judged endpoints frozen by transport is blind; fewer is not."""
    outcomes = {
        f"h{i}/fp8": [
            _o(f"h{i}/fp8", T if i < frozen else P, "connect_error" if i < frozen else "ok")
        ]
        for i in range(total)
    }
    result = blind_round(*_round(outcomes), transport_share=share)
    assert (result is not None) is blind
    if result is not None:
        assert result.kind is BlindKind.CANNOT_SEE
        assert f"{frozen} of {total} endpoints ended in transport errors" in result.reason


def test_a_half_misrouted_round_counts_misrouted_apart_from_transport() -> None:
    """A blind round's reason counts misrouted endpoints (served by another provider than
    pinned) apart from transport failures, instead of calling both "transport errors"; an
    unjudged endpoint (weak probe, model-level finding) is seen, so it does not count."""
    m = OutcomeStatus.MISROUTED
    outcomes = {
        "a/fp8": [_o("a/fp8", m, "misrouted")],
        "b/fp8": [_o("b/fp8", m, "misrouted")],
        "c/fp8": [_o("c/fp8", T, "connect_error")],
        "d/fp8": [_o("d/fp8", P)],
        "e/fp8": [_o("e/fp8", OutcomeStatus.INCONCLUSIVE, "model_level")],
        "f/fp8": [_o("f/fp8", P)],
    }
    blind = blind_round(*_round(outcomes), transport_share=0.5)
    assert blind is not None and blind.kind is BlindKind.CANNOT_SEE
    assert blind.reason.startswith(
        "3 of 6 endpoints could not be judged: 1 ended in transport errors, 2 were misrouted "
        "(served by another provider than pinned)"
    ), blind.reason
    assert "threshold 50%" in blind.reason and blind.affected == ("a/fp8", "b/fp8", "c/fp8")


def test_other_statuses_and_an_empty_round_are_not_blind() -> None:
    """429/5xx on one endpoint is the provider's transport (Q1), and no endpoints is no
    evidence of blindness; a bad share is refused."""
    outcomes = {
        "a/fp8": [_o("a/fp8", T, "http_429", http_status=429)],
        "b/fp8": [_o("b/fp8", P)],
        "c/fp8": [_o("c/fp8", P)],
    }
    assert blind_round(*_round(outcomes), transport_share=0.5) is None
    assert blind_round({}, {}, transport_share=0.5) is None
    with pytest.raises(ValueError, match="transport_share"):
        blind_round({}, {}, transport_share=0)


def test_discovery_failures_that_blind_and_those_that_do_not() -> None:
    """Discovery refused our key or credits, or could not be reached: blind. An unknown
    model or a malformed listing is a real error of the request: not blind."""
    m = "a/b"
    key = blind_discovery(DiscoveryAuthError(m, "User not found.", status=401))
    assert key is not None and "rejected the API key" in key.reason
    credits = blind_discovery(DiscoveryHTTPError(m, "Payment required", status=402))
    assert credits is not None and "credits" in credits.reason
    down = blind_discovery(DiscoveryTransportError(m, "connect_error"), "https://u:pw@h.io/api")
    assert down is not None and "connect_error" in down.reason
    assert "at https://h.io/api" in down.reason and "pw" not in down.reason
    assert blind_discovery(ModelNotFoundError(m, "not found", status=404)) is None
    assert blind_discovery(MalformedDiscoveryPayload(m, "bad", status=200)) is None


# ---- the wiring -----------------------------------------------------------------------


async def _runs_named(model: str) -> list[Any]:
    async with get_client() as client:
        return await client.read_flow_runs(
            flow_run_filter=FlowRunFilter(name=FlowRunFilterName(like_=f"{model} @"))
        )


def test_wrong_key_round_is_red_applies_nothing_alerts_and_exits_1(
    canary_env: FleetHandle,
    webhook: tuple[str, list[dict[str, Any]]],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A wrong upstream key: every probe gets 401; the round changes no state, its run is
    Failed with the one-line reason, admins are notified, the CLI exits 1 with one line;
    with the right key the same slot then runs (it was not consumed)."""
    model = "test/blind-key"
    load_model(canary_env, model, [endpoint("a/fp8"), endpoint("b/fp8"), endpoint("c/fp8")])
    url, received = webhook
    CustomWebhookNotificationBlock(
        name="canary-admins-blind",
        url=url,
        json_data={"subject": "{{subject}}", "body": "{{body}}"},
        allow_private_urls=True,
    ).save("canary-admins-blind", overwrite=True)
    monkeypatch.setenv("CANARY_NOTIFICATION_BLOCK", "custom-webhook/canary-admins-blind")
    monkeypatch.setenv("CANARY_API_KEY", "sk-wrong-" + "x" * 20)

    result = CliRunner().invoke(app, ["round", "--model", model, "--at", T0.isoformat()])
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: blind round"), result.output
    assert "upstream rejected the API key (HTTP 401 from 3 of 3 endpoints)" in lines[0]
    assert "sk-wrong" not in result.output
    assert asyncio.run(aload_state(model)).revision == 0
    [run] = asyncio.run(_runs_named(model))
    assert run.state is not None and run.state.is_failed()
    assert "upstream rejected the API key" in (run.state.message or "")
    assert any("upstream rejected the API key" in r["body"] for r in received), received

    monkeypatch.setenv("CANARY_API_KEY", canary_env.key)
    again = CliRunner().invoke(app, ["round", "--model", model, "--at", T0.isoformat()])
    assert again.exit_code == 0, again.output
    assert asyncio.run(aload_state(model)).revision == 1


async def test_half_the_fleet_transport_failing_is_a_blind_round(
    canary_env: FleetHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Half the endpoints unreachable (503 every time): blind, nothing applied; one of
    six is an ordinary round whose unreachable endpoint is frozen (Q1)."""
    monkeypatch.setenv("CANARY_BLIND_TRANSPORT_SHARE", "0.5")  # the default
    down = [{"kind": "http_error", "status": 503, "rate": 1.0}]
    model = "test/blind-half"
    load_model(
        canary_env,
        model,
        [
            endpoint("a/fp8"),
            endpoint("b/fp8"),
            endpoint("c/fp8", faults=down),
            endpoint("d/fp8", faults=down),
        ],
    )
    state = await canary_round(model=model, at=T0, return_state=True)
    assert state.is_failed(), state
    assert "2 of 4 endpoints ended in transport errors" in (state.message or "")
    assert (await aload_state(model)).revision == 0

    healthy = [endpoint(t) for t in ("a/fp8", "b/fp8", "c/fp8", "e/fp8", "f/fp8")]
    load_model(canary_env, model, [*healthy, endpoint("d/fp8", faults=down)])
    summary = await canary_round(model=model, at=T0 + HALF_HOUR)
    assert isinstance(summary, RoundSummary)
    assert {tag: verdict for tag, _l, verdict, _r in summary.endpoints}["d/fp8"] == "frozen"
    assert (await aload_state(model)).revision == 1


def test_json_summary_has_no_warnings_on_a_healthy_round(canary_env: FleetHandle) -> None:
    """A healthy round is Completed (not 'with warnings') and its summary lists none."""
    model = "test/blind-healthy"
    load_model(canary_env, model, [endpoint("a/fp8"), endpoint("b/fp8")])
    result = CliRunner().invoke(app, ["round", "--model", model, "--at", T0.isoformat(), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["warnings"] == []


async def test_discovery_that_cannot_reach_upstream_is_a_blind_round(
    canary_env: FleetHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scheduled round (no CLI in front) whose endpoint listing cannot be reached ends
    red with the reason and changes no state; an unknown model stays an ordinary failure."""
    monkeypatch.setenv("CANARY_BASE_URL", "http://127.0.0.1:1/api/v1")  # nothing listens
    state = await canary_round(model="test/blind-discovery", at=T0, return_state=True)
    assert state.is_failed()
    assert (
        "the endpoint listing at http://127.0.0.1:1/api/v1 could not be read (connect_error)"
        in (state.message or "")
    )
    assert (await aload_state("test/blind-discovery")).revision == 0
