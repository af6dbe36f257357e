"""Round figures (issue 5 section 7), side by side in one run:

    round      wall time of one `canary_round` flow run over 20 endpoints
               (Prefect's real API via its test harness; every endpoint probed at once)
    critical   the slowest endpoint's probe chain (its probe set, plus confirmations),
               measured in the bare run below
    bare       a plain asyncio script doing the same probes: `run_probe_set` for every
               endpoint concurrently, then the same confirmations

and prints round/critical and round/bare (aim: round <= 1.5x the critical path).
Rounds alternate with bare runs so machine noise hits both alike.

    .venv/bin/python bench/bench_round.py [--repeats 3] [--time-scale 1.0]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fixtures.canary_env import endpoint, scenario  # noqa: E402
from tests.fixtures.fleet import FleetHandle, start_fleet, stop_fleet  # noqa: E402

MODEL = "bench/round-20"
ENDPOINTS = 20


def _scenario() -> dict[str, object]:
    eps = []
    for i in range(ENDPOINTS):
        spec = endpoint(f"host{i:02d}/fp8")
        spec["timing"] = {"ttft_s": 0.2 + 0.03 * i, "tokens_per_s": 80 + 2 * i, "jitter": 0.05}
        eps.append(spec)
    return scenario(MODEL, eps)


async def bare(fleet: FleetHandle) -> tuple[float, float]:
    """Same probes without Prefect; returns (wall, slowest endpoint chain)."""
    from probes.client import ProbeClient
    from probes.probeset import confirm_language, run_probe_set
    from probes.types import Contract, OutcomeStatus

    chains: list[float] = []

    async def chain(client: ProbeClient, ep: object, locale: str) -> None:
        t0 = time.perf_counter()
        result = await run_probe_set(client, ep, locale, ttft_threshold_s=10.0)  # type: ignore[arg-type]
        if result.outcomes[Contract.LANGUAGE].status is OutcomeStatus.FAIL:
            await confirm_language(client, ep, locale)  # type: ignore[arg-type]
        chains.append(time.perf_counter() - t0)

    start = time.perf_counter()
    async with ProbeClient(fleet.base_url, fleet.key, ttft_threshold_s=10.0) as client:
        endpoints = await client.discover(MODEL)
        locales = ["en", "es", "pt-BR", "fr", "de", "it", "pl", "ru", "uk", "tr"]
        await asyncio.gather(
            *(chain(client, ep, locales[i % len(locales)]) for i, ep in enumerate(endpoints))
        )
    return time.perf_counter() - start, max(chains)


async def one_round(at: datetime) -> float:
    from flows.canary_round import canary_round

    start = time.perf_counter()
    await canary_round(model=MODEL, mode="observe", at=at)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--time-scale", type=float, default=1.0)
    args = parser.parse_args()

    fleet = start_fleet("seed-incidents", time_scale=args.time_scale)
    home = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-round-{os.getpid()}"
    os.environ.update(
        CANARY_BASE_URL=fleet.base_url,
        CANARY_API_KEY=fleet.key,
        CANARY_HOME=str(home),
        CANARY_PROBE_CONCURRENCY=str(ENDPOINTS),
        CANARY_CONTROL_PROVIDERS="",
    )
    from prefect.testing.utilities import prefect_test_harness

    rounds: list[float] = []
    bares: list[float] = []
    critical: list[float] = []
    try:
        fleet.load(_scenario(), time_scale=args.time_scale)
        with prefect_test_harness(server_startup_timeout=120):
            at = datetime(2026, 11, 2, tzinfo=UTC)
            asyncio.run(one_round(at - timedelta(days=1)))  # warm-up: imports, block types
            for i in range(args.repeats):
                rounds.append(asyncio.run(one_round(at + timedelta(minutes=30 * i))))
                wall, slowest = asyncio.run(bare(fleet))
                bares.append(wall)
                critical.append(slowest)
    finally:
        stop_fleet(fleet)
    r, b, c = (statistics.median(x) for x in (rounds, bares, critical))
    print(f"{ENDPOINTS} endpoints, time_scale {args.time_scale}, {args.repeats} repeats (medians)")
    print(f"{'round (Prefect flow)':<26}{r:8.2f} s")
    print(f"{'bare asyncio, same probes':<26}{b:8.2f} s")
    print(f"{'critical path':<26}{c:8.2f} s")
    print(f"round / critical path     {r / c:8.2f}x")
    print(f"round / bare asyncio      {r / b:8.2f}x")


if __name__ == "__main__":
    main()
