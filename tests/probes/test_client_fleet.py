"""The pinned client against the real fleet over loopback HTTP (C1, C2, C3): discovery and
its typed errors, TTFT accuracy against the fleet's scripted value, exact pinning of every
logged request, and the API key never reaching reprs, logs, errors or transcripts."""

from __future__ import annotations

import asyncio
import logging
import socket
from statistics import median

import pytest

from ground.settings import ProbeConfig
from probes.client import ProbeClient
from probes.contracts import RESPONSE_FORMAT
from probes.errors import (
    ClientNotOpenError,
    DiscoveryTransportError,
    InvalidModelIdError,
    ModelNotFoundError,
)
from probes.prompts import prompt_for
from probes.types import Contract, Endpoint
from tests.fixtures.fleet import FleetHandle

MODEL = "meta-llama/llama-3.3-70b-instruct"


def _scripted(fleet: FleetHandle) -> dict[str, dict[str, float | None]]:
    (model,) = [m for m in fleet.scenario()["models"] if m["id"] == MODEL]
    return {
        e["tag"]: {
            "ttft": e["scripted_ttft_s"],
            "slow": e["scripted_slow_ttft_s"],
            "jitter": e["timing"]["jitter"],
        }
        for e in model["endpoints"]
    }


async def test_c1_discover_lists_all_endpoints_typed(fleet: FleetHandle) -> None:
    """C1: discovery returns all 24 endpoints of seed-incidents as typed records."""
    async with ProbeClient(fleet.base_url, fleet.key) as client:
        endpoints = await client.discover(MODEL)
    tags = {e.tag for e in endpoints}
    assert len(endpoints) == 24
    assert {"startcorrupt/fp8", "nostruct/bf16", "deepinfra/fp8", "toolparse/fp8"} <= tags
    by_tag = {e.tag: e for e in endpoints}
    assert not by_tag["nostruct/bf16"].supports_structured_output
    assert by_tag["deepinfra/fp8"].supports_structured_output
    assert (
        by_tag["deepinfra/fp8"].provider_name == "DeepInfra"
        and by_tag["deepinfra/fp8"].pricing.prompt > 0
    )


async def test_c1_discover_typed_errors(fleet: FleetHandle) -> None:
    """C1: unknown model → ModelNotFoundError, bad id → InvalidModelIdError, no server → transport (401: raw-server test)."""
    async with ProbeClient(fleet.base_url, fleet.key) as client:
        with pytest.raises(ModelNotFoundError) as not_found:
            await client.discover("nobody/nothing")
        with pytest.raises(InvalidModelIdError):
            await client.discover("no-slash")
    assert not_found.value.status == 404
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with ProbeClient(
        f"http://127.0.0.1:{port}/api/v1", fleet.key, ProbeConfig(connect_timeout_s=1.0)
    ) as client:
        with pytest.raises(DiscoveryTransportError):
            await client.discover(MODEL)
    with pytest.raises(ClientNotOpenError):
        await ProbeClient(fleet.base_url, fleet.key).discover(MODEL)


async def test_c3_ttft_within_50ms_of_scripted(fleet: FleetHandle) -> None:
    """C3: measured time to first token is within 50 ms (median of 3 per host) of the delay the
    fleet scripted for each very request (its jittered `scripted_ttft_s`; fast and slow hosts)."""
    scripted = _scripted(fleet)
    tags = ["groq/fp16", "deepinfra/fp8", "hyperbolic/bf16", "slowpoke/bf16"]
    errors: dict[str, list[float]] = {}
    async with ProbeClient(fleet.base_url, fleet.key, ProbeConfig(ttft_threshold_s=5.0)) as client:
        endpoints = {e.tag: e for e in await client.discover(MODEL)}
        for tag in tags:  # sequential: an idle fleet, so the error is the client's, not queueing
            assert (scripted[tag]["slow"] or scripted[tag]["ttft"]) is not None
            for _ in range(3):
                fleet.clear_requests()
                t = await client.probe(
                    endpoints[tag],
                    Contract.LATENCY,
                    prompt_for(Contract.LATENCY, "en"),
                    locale="en",
                )
                assert t.ttft_s is not None and t.done, t
                (entry,) = fleet.requests()  # the request this transcript answered
                assert entry["tag"] == tag and entry["scripted_ttft_s"] is not None
                errors.setdefault(tag, []).append(round(t.ttft_s - entry["scripted_ttft_s"], 4))
    print("ttft - scripted (s):", errors)
    # the median of 3 per host: one sample delayed by another process on a shared CI core is
    # the machine's noise, not the client's error
    assert max(median(abs(e) for e in errs) for errs in errors.values()) < 0.050, errors


async def test_c2_every_logged_request_pinned_exactly(fleet: FleetHandle) -> None:
    """C2: each request the fleet logged names only the probed endpoint, no fallbacks, require_parameters iff response_format."""
    async with ProbeClient(fleet.base_url, fleet.key, ProbeConfig(ttft_threshold_s=2.0)) as client:
        endpoints = await client.discover(MODEL)
        picked = [
            e
            for e in endpoints
            if e.tag in ("deepinfra/fp8", "nostruct/bf16", "flaky/fp8", "mixhost/fp8")
        ]
        jobs = []
        for e in picked:
            jobs.append(
                client.probe(e, Contract.LANGUAGE, prompt_for(Contract.LANGUAGE, "fr"), locale="fr")
            )
            jobs.append(
                client.probe(
                    e,
                    Contract.STRUCTURED,
                    prompt_for(Contract.STRUCTURED, "fr"),
                    locale="fr",
                    response_format=RESPONSE_FORMAT,
                )
            )
        transcripts = await asyncio.gather(*jobs)
    logged = fleet.requests()
    assert len(logged) == len(transcripts) == 8
    seen: dict[str, int] = {}
    for entry in logged:
        body = entry["body"]
        tag = body["provider"]["only"][0]
        seen[tag] = seen.get(tag, 0) + 1
        expected = {"only": [tag], "allow_fallbacks": False}
        if "response_format" in body:
            expected["require_parameters"] = True
            assert body["response_format"] == RESPONSE_FORMAT
        assert body["provider"] == expected
        assert body["stream"] is True and body["model"] == MODEL
    assert seen == {e.tag: 2 for e in picked}
    for t in transcripts:
        if t.served_by is not None:
            assert t.served_by == t.pinned_provider


async def test_c2_key_never_in_repr_logs_or_transcripts(
    fleet: FleetHandle, caplog: pytest.LogCaptureFixture
) -> None:
    """C2/secrets: the API key appears in no repr, log record or transcript, even on errors."""
    caplog.set_level(logging.DEBUG)
    key = fleet.key
    endpoint = Endpoint(model_id=MODEL, tag="deepinfra/fp8", provider_name="DeepInfra")
    async with ProbeClient(fleet.base_url, key) as client:
        t_ok = await client.probe(
            endpoint, Contract.LANGUAGE, prompt_for(Contract.LANGUAGE, "en"), locale="en"
        )
        text = repr(client)
    async with ProbeClient(fleet.base_url, key + "-bad") as bad:
        t_bad = await bad.probe(
            endpoint, Contract.LANGUAGE, prompt_for(Contract.LANGUAGE, "en"), locale="en"
        )
        text += repr(bad)
    assert t_ok.done and t_bad.http_status == 401
    dumped = text + t_ok.model_dump_json() + t_bad.model_dump_json() + caplog.text
    assert key not in dumped
