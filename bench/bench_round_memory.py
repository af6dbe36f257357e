"""Memory of a canary round: RSS of a process running one `canary_round` flow at 100
endpoints (and at 20, to see what each endpoint costs), against a stated bound.

Each size runs in a fresh process, as a worker's flow-run process would: Prefect's test
harness (its server is a separate process, not counted) and the fleet (a subprocess, not
counted), a warm-up round of 5 endpoints (imports, lingua's preloaded models, Prefect's
client), then the kernel's peak-RSS mark is reset (`/proc/self/clear_refs`) so that `VmHWM`
after the measured round is that round's own peak.

    .venv/bin/python bench/bench_round_memory.py [--endpoints 100] [--bound-mb 450]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ground.prefect_server import server_env  # noqa: E402
from tests.fixtures.canary_env import endpoint, scenario  # noqa: E402
from tests.fixtures.fleet import start_fleet, stop_fleet  # noqa: E402


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(field)


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS


def model_scenario(model: str, n: int) -> dict[str, object]:
    eps = []
    for i in range(n):
        defects = [{"kind": "stray_start", "rate": 1.0}] if i % 25 == 7 else None
        spec = endpoint(f"host{i:03d}/fp8", defects=defects)
        spec["timing"] = {"ttft_s": 0.2 + 0.002 * i, "tokens_per_s": 100, "jitter": 0.05}
        eps.append(spec)
    return scenario(model, eps)


async def _round(model: str, at: datetime) -> float:
    from flows.canary_round import canary_round

    t0 = time.perf_counter()
    await canary_round(model=model, mode="observe", at=at)
    return time.perf_counter() - t0


def child(n: int, time_scale: float) -> None:
    """One fresh process: warm-up round (5 endpoints), then the measured round at `n`."""
    import json

    fleet = start_fleet("seed-incidents", time_scale=time_scale)
    home = tempfile.mkdtemp(prefix="bench-mem-")
    os.environ.update(
        CANARY_BASE_URL=fleet.base_url,
        CANARY_API_KEY=fleet.key,
        CANARY_HOME=home,
        CANARY_CONTROL_PROVIDERS="",
        CANARY_NOTIFICATION_BLOCK="",
        PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL="WARNING",  # the runs still log to the API
    )
    os.environ.update(server_env())  # the embedded server's settings
    from prefect.testing.utilities import prefect_test_harness

    at = datetime(2026, 11, 2, tzinfo=UTC)
    try:
        with prefect_test_harness(server_startup_timeout=120):
            fleet.load(model_scenario("bench/warm-up", 5), time_scale=time_scale)
            asyncio.run(_round("bench/warm-up", at - timedelta(days=1)))
            model = f"bench/round-{n}"
            fleet.load(model_scenario(model, n), time_scale=time_scale)
            before = _status_mb("VmRSS")
            _reset_peak()
            wall = asyncio.run(_round(model, at))
            peak, after = _status_mb("VmHWM"), _status_mb("VmRSS")
    finally:
        stop_fleet(fleet)
        shutil.rmtree(home, ignore_errors=True)
    print("RESULT " + json.dumps([n, before, peak, after, wall]), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoints", type=int, default=100)
    parser.add_argument("--small", type=int, default=20, help="the comparison round's size")
    parser.add_argument("--bound-mb", type=float, default=450.0)
    parser.add_argument("--time-scale", type=float, default=0.1)
    parser.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.time_scale)
        return
    import json
    import subprocess

    rows = []
    for n in (args.small, args.endpoints):
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(n), "--time-scale", str(args.time_scale)],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        rows.append(json.loads(out.rsplit("RESULT ", 1)[1]))
    concurrency = os.environ.get("CANARY_PROBE__CONCURRENCY", "8 (default)")
    print(
        f"one canary round in a fresh process, after a 5-endpoint warm-up round "
        f"(probe concurrency {concurrency}); MB of RSS"
    )
    print(
        f"{'endpoints':>9} {'before':>8} {'peak':>8} {'after':>8} {'peak-before':>12} {'wall':>7}"
    )
    for n, before, peak, after, wall in rows:
        print(
            f"{n:>9} {before:>8.0f} {peak:>8.0f} {after:>8.0f} {peak - before:>12.1f} {wall:>6.1f}s"
        )
    (n1, b1, p1, _, _), (n2, b2, p2, _, _) = rows
    per_endpoint = ((p2 - b2) - (p1 - b1)) / (n2 - n1)
    peak = rows[-1][2]
    verdict = "within" if peak <= args.bound_mb else "OVER"
    print(f"each endpoint adds ~{per_endpoint * 1024:.0f} KB to the round's peak")
    print(
        f"round at {args.endpoints} endpoints: peak RSS {peak:.0f} MB ({verdict} the stated bound "
        f"of {args.bound_mb:.0f} MB)"
    )
    print(
        f"memory per concurrent round (a process work pool runs each round as its own process): "
        f"{p1:.0f} MB at {n1} endpoints, {p2:.0f} MB at {n2}; a worker with --limit N holds up "
        f"to N times that (`make scale-test` prints the same per round at its peak)"
    )


if __name__ == "__main__":
    main()
