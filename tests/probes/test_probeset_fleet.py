"""Probe sets against the real fleet (seed-incidents, time_scale 0.1): every defective host
fails the contract of its defect class (C3, C4, C6, C7, C9), the transport-flaky host is only
ever transport or pass (Q1), healthy hosts never fail over 20 sets in all 17 locales, and the
language confirmation votes 2 of 3 (C8)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Sequence
from typing import Any

import pytest

from ground.settings import ProbeConfig
from probes.client import ProbeClient
from probes.contracts import judge_controls
from probes.probeset import ProbeSetResult, confirm_language, majority, run_probe_set
from probes.prompts import LOCALES
from probes.types import Contract, Endpoint, OutcomeStatus
from tests.fixtures.fleet import FleetHandle

MODEL = "meta-llama/llama-3.3-70b-instruct"
THRESHOLD_S = 1.0  # the 10 s latency threshold at the fleet's time_scale 0.1
DEFECTIVE = {
    "startcorrupt/fp8",
    "mixhost/fp8",
    "slowpoke/bf16",
    "policywall/fp8",
    "schemabreak/fp8",
    "mojibake/fp8",
    "flaky/fp8",
    "filterctl/fp8",
    "nostruct/bf16",
    "toolparse/fp8",  # its tool parser writes calls into content: only tools requests show it
}
S = OutcomeStatus


NO_TOOLS = {"tool_samples": 0, "tool_check_samples": 0, "tool_trigger_samples": 0}


def _client(fleet: FleetHandle, **config: Any) -> ProbeClient:
    """A client with the tests' latency threshold, total bound and two start samples (a set
    of five requests: the tool requests, tests/probes/test_tools_fleet.py, are left out),
    `config` changed."""
    limits = {"ttft_threshold_s": THRESHOLD_S, "total_timeout_s": 20.0, "start_samples": 2}
    limits.update(NO_TOOLS)
    limits.update(config)
    return ProbeClient(fleet.base_url, fleet.key, ProbeConfig(**limits))


async def _bounded[T](jobs: Sequence[Awaitable[T]], limit: int = 6) -> list[T]:
    """Run jobs concurrently, at most `limit` at a time (the fleet shares 2 cores)."""
    sem = asyncio.Semaphore(limit)

    async def one(job: Awaitable[T]) -> T:
        async with sem:
            return await job

    return list(await asyncio.gather(*(one(j) for j in jobs)))


async def _endpoints(client: ProbeClient) -> dict[str, Endpoint]:
    return {e.tag: e for e in await client.discover(MODEL)}


def _status(result: ProbeSetResult, contract: Contract) -> tuple[OutcomeStatus, str]:
    o = result.outcomes[contract]
    return o.status, o.reason


async def test_c3_c4_c6_c7_c9_each_defect_fails_its_contract(fleet: FleetHandle) -> None:
    """Each defective host of seed-incidents fails the contract of its defect class (mixhost in pt-BR)."""
    async with _client(fleet) as client:
        eps = await _endpoints(client)
        tags = ["startcorrupt/fp8", "mixhost/fp8", "slowpoke/bf16", "policywall/fp8", "schemabreak/fp8",
                "mojibake/fp8", "filterctl/fp8", "nostruct/bf16"]  # fmt: skip
        locale = {"mixhost/fp8": "pt-BR"}
        results = await _bounded([run_probe_set(client, eps[t], locale.get(t, "en")) for t in tags])
    by = {r.tag: r for r in results}
    assert _status(by["startcorrupt/fp8"], Contract.START)[0] is S.FAIL
    assert by["startcorrupt/fp8"].outcomes[Contract.START].reason == "stray_start"
    assert _status(by["mixhost/fp8"], Contract.LANGUAGE)[0] is S.FAIL
    assert _status(by["slowpoke/bf16"], Contract.LATENCY) == (S.FAIL, "no_first_token")
    assert _status(by["policywall/fp8"], Contract.REFUSAL)[0] is S.FAIL
    assert _status(by["filterctl/fp8"], Contract.REFUSAL)[0] is S.FAIL
    schema = by["schemabreak/fp8"].outcomes[Contract.STRUCTURED]
    assert schema.status is S.FAIL and schema.reason in {"invalid_json", "schema_violation"}, schema
    if schema.reason == "schema_violation":
        assert schema.evidence["path"].startswith("$")
    assert _status(by["mojibake/fp8"], Contract.LANGUAGE) == (S.FAIL, "encoding_corruption")
    assert _status(by["nostruct/bf16"], Contract.STRUCTURED) == (S.UNSUPPORTED, "not_advertised")
    assert by["nostruct/bf16"].requests == 4  # no structured request was sent
    # each defect fails only where it belongs: no other contract fails on the single-defect hosts
    for tag, own in {"slowpoke/bf16": {Contract.LATENCY}, "schemabreak/fp8": {Contract.STRUCTURED},
                     "nostruct/bf16": set(), "startcorrupt/fp8": {Contract.START}}.items():  # fmt: skip
        assert {o.contract for o in by[tag].failures} == own, (tag, by[tag].failures)


@pytest.mark.parametrize(
    "mode", ["refusal", "content_filter_empty", "content_filter_cut", "empty", "moderation_403"]
)
async def test_c4_every_policy_mode_fails_refusal(fleet: FleetHandle, mode: str) -> None:
    """C4: each policy-filter mode (refusal text in all 17 locales, content_filter, empty, 403 moderation) fails the refusal probe."""
    scenario = fleet.scenario()
    model = next(m for m in scenario["models"] if m["id"] == MODEL)
    for m in scenario["models"]:
        for e in m["endpoints"]:
            e.pop("scripted_ttft_s", None)
            e.pop("scripted_slow_ttft_s", None)
    for e in model["endpoints"]:
        if e["tag"] == "policywall/fp8":
            e["defects"] = [{"kind": "policy_filter", "rate": 1.0, "modes": [mode]}]
    fleet.load(scenario, time_scale=0.1, seed=0)
    async with _client(fleet, start_samples=0) as client:
        eps = await _endpoints(client)
        locales = (
            LOCALES if mode == "refusal" else ("en", "ja", "ar")
        )  # refusal text: all 17 pattern sets
        results = await _bounded(
            [run_probe_set(client, eps["policywall/fp8"], loc) for loc in locales]
        )
    for r in results:
        o = r.outcomes[Contract.REFUSAL]
        assert o.status is S.FAIL, (mode, r.locale, o)


async def test_c5_control_host_keeps_refusal_probe_verified(fleet: FleetHandle) -> None:
    """C5: the known-filtering control fails the refusal probe, so the probe is not weak; a healthy 'control' makes it weak."""
    async with _client(fleet, start_samples=0) as client:
        eps = await _endpoints(client)
        ctl, healthy = await _bounded(
            [run_probe_set(client, eps[t], "de") for t in ("filterctl/fp8", "groq/fp16")]
        )
    verdict = judge_controls([ctl.outcomes[Contract.REFUSAL]])
    assert (verdict.weak, verdict.verified) == (False, True)
    weak = judge_controls([ctl.outcomes[Contract.REFUSAL], healthy.outcomes[Contract.REFUSAL]])
    assert weak.weak and weak.passed_controls == ("groq/fp16",)


async def test_q1_flaky_host_only_transport_or_pass(fleet: FleetHandle) -> None:
    """Q1: the transport-flaky host (429/5xx/resets/cuts/in-band errors) never yields a quality failure."""
    async with _client(fleet) as client:
        eps = await _endpoints(client)
        results = await _bounded(
            [run_probe_set(client, eps["flaky/fp8"], LOCALES[i % 17]) for i in range(16)]
        )
    statuses = Counter(o.status for r in results for o in r.outcomes.values())
    reasons = Counter(
        o.reason for r in results for o in r.outcomes.values() if o.status is S.TRANSPORT
    )
    assert set(statuses) <= {S.PASS, S.TRANSPORT, S.INCONCLUSIVE}, statuses
    assert statuses[S.TRANSPORT] >= 3 and statuses[S.PASS] >= 20, (statuses, reasons)
    transcripts = [t for r in results for t in r.transcripts]
    assert any(t.error is not None and t.error.in_band for t in transcripts) or any(
        t.transport_error in ("stream_cut", "connection_reset") for t in transcripts
    ), reasons
    assert sum(1 for r in results for t in r.transcripts) == 16 * 5


async def test_c7_healthy_hosts_never_fail_20_sets_all_locales(fleet: FleetHandle) -> None:
    """C3-C9: every healthy host passes 20 probe sets rotating over all 17 locales with 0 failures.

    The latency threshold here is 3 s (still 100x the scripted 0.03 s TTFT): the fleet's own CPU
    time is not scaled by time_scale, and on a shared 2-core machine 1,400 streams can queue."""
    async with _client(fleet, ttft_threshold_s=3.0) as client:
        eps = await _endpoints(client)
        healthy = sorted(t for t in eps if t not in DEFECTIVE)
        assert len(healthy) == 14
        jobs = [
            run_probe_set(client, eps[tag], LOCALES[(i + k) % len(LOCALES)])
            for k, tag in enumerate(healthy)
            for i in range(20)
        ]
        results = await _bounded(jobs, limit=6)
    failures = [(r.tag, r.locale, o.contract.value, o.reason) for r in results for o in r.failures]
    assert failures == []
    assert {r.locale for r in results} == set(LOCALES)
    statuses = Counter(
        o.status for r in results for o in r.outcomes.values() if o.contract is not Contract.TOOLS
    )  # no tool requests here: tests/probes/test_tools_fleet.py
    assert statuses[S.PASS] >= 0.95 * sum(statuses.values()), statuses
    assert max(r.requests for r in results) == 5


async def test_c8_confirmation_majority(fleet: FleetHandle) -> None:
    """C8: mixhost's pt-BR failure is confirmed 2 of 3; a healthy host's language passes the vote."""
    async with _client(fleet, start_samples=0) as client, _client(fleet, confirmations=3) as three:
        eps = await _endpoints(client)
        first = await run_probe_set(client, eps["mixhost/fp8"], "pt-BR")
        confirmations = await confirm_language(client, eps["mixhost/fp8"], "pt-BR")
        healthy = await confirm_language(three, eps["deepinfra/fp8"], "pt-BR")
    assert len(confirmations) == 2
    vote = majority([first.outcomes[Contract.LANGUAGE], *confirmations])
    assert vote.status is S.FAIL and vote.evidence["fails"] >= 2
    assert majority(healthy).status is S.PASS


async def test_c2_misrouted_host_is_never_a_pass(fleet: FleetHandle) -> None:
    """C2: when the fleet serves a pinned request from another provider, every contract says misrouted, never pass."""
    scenario = fleet.scenario()
    for m in scenario["models"]:
        for e in m["endpoints"]:
            e.pop("scripted_ttft_s", None)
            e.pop("scripted_slow_ttft_s", None)
            if m["id"] == MODEL and e["tag"] == "together/fp8":
                e["faults"] = [{"kind": "misroute", "rate": 1.0, "serve_as": "DeepInfra"}]
    fleet.load(scenario, time_scale=0.1, seed=0)
    async with _client(fleet) as client:
        eps = await _endpoints(client)
        result = await run_probe_set(client, eps["together/fp8"], "it")
    assert all(t.served_by == "DeepInfra" for t in result.transcripts), [
        t.served_by for t in result.transcripts
    ]
    statuses = {c: o.status for c, o in result.outcomes.items()}
    assert S.PASS not in statuses.values() and S.FAIL not in statuses.values(), statuses
    assert statuses[Contract.LANGUAGE] is S.MISROUTED and statuses[Contract.REFUSAL] is S.MISROUTED


async def test_c9_probe_set_share_and_max_tokens_come_from_the_client_s_config(
    fleet: FleetHandle,
) -> None:
    """C9/C2: run_probe_set judges START with its config's floor/share and caps every request
    at its max_tokens."""
    async with (
        _client(fleet, start_samples=2) as client,
        _client(fleet, start_samples=2, max_tokens=64, start_anomaly_min_replies=10) as raising,
        _client(fleet, start_samples=2, start_anomaly_share=1.0) as lenient_client,
    ):
        ep = (await _endpoints(client))["startcorrupt/fp8"]
        default = await run_probe_set(client, ep, "en")
        fleet.clear_requests()
        raised = await run_probe_set(raising, ep, "en")
        sent = fleet.requests()
        lenient = await run_probe_set(lenient_client, ep, "en")
    assert _status(default, Contract.START) == (S.FAIL, "stray_start")
    assert _status(raised, Contract.START) == (S.INCONCLUSIVE, "too_few_replies")
    assert len(default.reply_outcomes) == 4
    assert default.outcomes[Contract.START].evidence["min_share"] == 0.15
    assert lenient.outcomes[Contract.START].evidence["min_share"] == 1.0
    # a share of 1.0 is only met when every judged reply is stray
    lenient_failed = sum(o.status is S.FAIL for o in lenient.reply_outcomes)
    assert (lenient.outcomes[Contract.START].status is S.FAIL) == (
        lenient_failed == len(lenient.reply_outcomes)
    )
    assert len(sent) == raised.requests and {r["body"]["max_tokens"] for r in sent} == {64}


async def test_c8_confirm_language_caps_max_tokens(fleet: FleetHandle) -> None:
    """C8: confirm_language sends its config's confirmations with its max_tokens."""
    async with _client(fleet, max_tokens=48) as client:
        ep = (await _endpoints(client))["deepinfra/fp8"]
        outcomes = await confirm_language(client, ep, "en")
    sent = fleet.requests()
    assert len(outcomes) == 2 and len(sent) == 2
    assert {r["body"]["max_tokens"] for r in sent} == {48}


async def test_c8_c9_flow_tasks_pass_probe_settings(
    fleet: FleetHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """C8/C9/C10: the flow tasks read probe_max_tokens, tool_max_tokens, tool_samples and the
    start_anomaly_* settings."""
    from flows.tasks import confirm_language_task, probe_endpoint

    monkeypatch.setenv("CANARY_BASE_URL", fleet.base_url)
    monkeypatch.setenv("CANARY_API_KEY", fleet.key)
    monkeypatch.setenv("CANARY_PROBE__TTFT_THRESHOLD_S", str(THRESHOLD_S))
    monkeypatch.setenv("CANARY_PROBE__MAX_TOKENS", "56")
    monkeypatch.setenv("CANARY_PROBE__START_ANOMALY_MIN_REPLIES", "50")
    monkeypatch.setenv("CANARY_PROBE__TOOL_MAX_TOKENS", "77")
    monkeypatch.setenv("CANARY_PROBE__TOOL_SAMPLES", "2")
    async with _client(fleet) as client:
        ep = (await _endpoints(client))["startcorrupt/fp8"]
    result = await probe_endpoint.fn(ep, "en")
    confirmations = (await confirm_language_task.fn(ep, "en")).outcomes
    sent = fleet.requests()
    assert _status(result, Contract.START) == (S.INCONCLUSIVE, "too_few_replies")
    assert len(confirmations) == 2
    assert len(sent) == result.requests + 2
    text = [r["body"] for r in sent if "tools" not in r["body"]]
    tools = [r["body"] for r in sent if "tools" in r["body"]]
    assert {b["max_tokens"] for b in text} == {56} and {b["max_tokens"] for b in tools} == {77}
    assert sum(b.get("tool_choice") not in ("none", "auto") for b in tools) == 2  # forced calls
