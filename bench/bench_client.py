"""Client figures (issue 3 section 4), side by side in one run against a local fleet:

1. the ProbeClient's time-to-first-token measurement error against the fleet's scripted
   value (seed-incidents with jitter set to 0 so the scripted value is exact), next to a
   bare httpx stream's TTFT for the very same request;
2. the per-probe overhead of ProbeClient.probe against a bare `httpx` stream of the same
   pinned request (wall time and this process's CPU time per request).

Standalone: starts `canary fleet serve` in a subprocess on a free port and stops it.

    .venv/bin/python bench/bench_client.py [--rounds 40]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ground.settings import ProbeConfig, load_settings  # noqa: E402
from probes.client import ProbeClient  # noqa: E402
from probes.prompts import prompt_for  # noqa: E402
from probes.types import Contract, Endpoint  # noqa: E402
from tests.fixtures.fleet import start_fleet, stop_fleet  # noqa: E402

MODEL = "meta-llama/llama-3.3-70b-instruct"
TAGS = ("groq/fp16", "deepinfra/fp8", "hyperbolic/bf16")
TIME_SCALE = 0.1


def zero_jitter(root: str) -> dict[str, float]:
    """Reload seed-incidents with jitter 0; return the scripted TTFT per tag."""
    scenario = httpx.get(f"{root}/_fleet/scenario").raise_for_status().json()
    scripted: dict[str, float] = {}
    for model in scenario["models"]:
        for e in model["endpoints"]:
            if model["id"] == MODEL:
                scripted[e["tag"]] = e["timing"]["ttft_s"] * TIME_SCALE
            e.pop("scripted_ttft_s", None)
            e.pop("scripted_slow_ttft_s", None)
            e["timing"]["jitter"] = 0.0
    body = {"scenario": scenario, "time_scale": TIME_SCALE, "seed": 0}
    httpx.post(f"{root}/_fleet/scenario", json=body, timeout=30).raise_for_status()
    return scripted


async def bare_probe(
    http: httpx.AsyncClient, url: str, body: dict[str, Any]
) -> tuple[float | None, float]:
    """The same pinned streaming request with plain httpx: TTFT of the first content, total."""
    started = time.perf_counter()
    ttft = None
    async with http.stream(
        "POST", url, json=body, headers={"Accept": "text/event-stream"}
    ) as response:
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            choices = chunk.get("choices") or []
            if ttft is None and choices and (choices[0].get("delta") or {}).get("content"):
                ttft = time.perf_counter() - started
    return ttft, time.perf_counter() - started


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def run(root: str, rounds: int) -> None:
    scripted = zero_jitter(root)
    key = load_settings().fleet_key.get_secret_value()
    base = f"{root}/api/v1"
    rows: dict[str, dict[str, list[float]]] = {
        n: {"err": [], "wall": [], "cpu": []} for n in ("probe", "bare")
    }
    async with ProbeClient(base, key, ProbeConfig()) as client:
        endpoints = {e.tag: e for e in await client.discover(MODEL)}
        http = httpx.AsyncClient(
            headers={"Authorization": f"Bearer {key}"},
            transport=httpx.AsyncHTTPTransport(retries=0),
            timeout=60.0,
        )
        async with http:
            messages = prompt_for(Contract.LANGUAGE, "en")
            for i in range(rounds + 3):
                tag = TAGS[i % len(TAGS)]
                endpoint: Endpoint = endpoints[tag]
                body = client.request_body(endpoint, messages, max_tokens=300)
                order = (
                    ("probe", "bare") if i % 2 == 0 else ("bare", "probe")
                )  # alternate who goes first
                for name in order:
                    cpu0 = time.process_time()
                    if name == "probe":
                        w0 = time.perf_counter()
                        t = await client.probe(endpoint, Contract.LANGUAGE, messages, locale="en")
                        ttft, wall = t.ttft_s, time.perf_counter() - w0
                    else:
                        ttft, wall = await bare_probe(http, f"{base}/chat/completions", body)
                    cpu = time.process_time() - cpu0
                    if i < 3 or ttft is None:
                        continue  # warm-up
                    rows[name]["err"].append((ttft - scripted[tag]) * 1000)
                    rows[name]["wall"].append(wall * 1000)
                    rows[name]["cpu"].append(cpu * 1000)
    p, b = rows["probe"], rows["bare"]
    print(
        f"fleet seed-incidents, time_scale {TIME_SCALE}, jitter 0; {len(p['err'])} probes per client over {', '.join(TAGS)}"
    )
    print(f"scripted TTFT: {', '.join(f'{t} {scripted[t] * 1000:.0f} ms' for t in TAGS)}")
    print()
    print(f"{'measure':<44}{'ProbeClient':>14}{'bare httpx':>14}{'ratio':>9}")
    table = [
        (
            "TTFT error vs scripted, median (ms)",
            statistics.median(p["err"]),
            statistics.median(b["err"]),
        ),
        ("TTFT error vs scripted, p95 (ms)", pct(p["err"], 0.95), pct(b["err"], 0.95)),
        (
            "TTFT error vs scripted, max |err| (ms)",
            max(map(abs, p["err"])),
            max(map(abs, b["err"])),
        ),
        (
            "wall time per probe, median (ms)",
            statistics.median(p["wall"]),
            statistics.median(b["wall"]),
        ),
        ("wall time per probe, p95 (ms)", pct(p["wall"], 0.95), pct(b["wall"], 0.95)),
        (
            "client CPU per probe, median (ms)",
            statistics.median(p["cpu"]),
            statistics.median(b["cpu"]),
        ),
    ]
    for label, ours, bare in table:
        ratio = f"{ours / bare:.2f}" if bare > 0 else "-"
        print(f"{label:<44}{ours:>14.2f}{bare:>14.2f}{ratio:>9}")
    paired_ttft = [x - y for x, y in zip(p["err"], b["err"], strict=False)]
    paired_wall = [x - y for x, y in zip(p["wall"], b["wall"], strict=False)]
    print(
        f"{'paired ProbeClient - bare, TTFT median (ms)':<44}{statistics.median(paired_ttft):>14.2f}"
    )
    print(
        f"{'paired ProbeClient - bare, wall median (ms)':<44}{statistics.median(paired_wall):>14.2f}"
    )
    overhead = statistics.median(p["wall"]) - statistics.median(b["wall"])
    print(f"\nper-probe wall overhead of ProbeClient over bare httpx (median): {overhead:+.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    fleet = start_fleet("seed-incidents", time_scale=TIME_SCALE, seed=0)
    try:
        asyncio.run(run(fleet.root_url, args.rounds))
    finally:
        stop_fleet(fleet)


if __name__ == "__main__":
    main()
