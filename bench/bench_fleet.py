"""Fleet benchmark: does the fleet keep the latency it scripts under load?

Starts the fleet in a subprocess (as the tests do) and drives it from this
process over loopback with a lean raw-socket asyncio client (so the client's
own parsing does not dominate what is measured):

1. sustained streaming requests/s: 64 closed-loop clients for a few seconds
   against the 14 healthy hosts at time_scale 0.01 (scripted delays ~100x
   shorter, so the figure is the fleet's own capacity), with the fleet
   process's CPU time per request;
2. scripted vs observed time to first token at 1, 50 and 200 concurrent
   streams, time_scale 1.0: for each stream the fleet logs the TTFT it
   scripted (`scripted_ttft_s`); the client measures request-sent to first
   `data:` event. The table shows p50/p99 of observed - scripted.

Run: .venv/bin/python bench/bench_fleet.py   (about a minute on 2 cores)
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fixtures.fleet import FleetHandle, start_fleet, stop_fleet

LLAMA = "meta-llama/llama-3.3-70b-instruct"
HEALTHY = [
    "deepinfra/fp8", "together/fp8", "fireworks/fp8", "lambda/bf16", "novita/fp8", "nebius/fp8",
    "hyperbolic/bf16", "parasail/fp8", "groq/fp16", "cerebras/fp16", "sambanova/bf16",
    "crusoe/bf16", "baseten/fp8", "friendli/fp8",
]  # fmt: skip
PROMPT = "Continue the scene: she pushes open the tavern door, shakes off the rain and looks at me."


def _body(i: int) -> dict[str, Any]:
    return {
        "model": LLAMA,
        "stream": True,
        "user": f"bench-{i}",
        "messages": [{"role": "user", "content": PROMPT}],
        "provider": {"only": [HEALTHY[i % len(HEALTHY)]], "allow_fallbacks": False},
    }


async def _stream(fleet: FleetHandle, i: int) -> tuple[int, float, int]:
    """One streamed request on its own connection: (index, s to first data event, events)."""
    url = httpx.URL(fleet.base_url)
    host, port = url.host, url.port or 80
    payload = json.dumps(_body(i)).encode()
    head = (
        f"POST {url.path}/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Authorization: Bearer {fleet.key}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
    ).encode()
    start = time.perf_counter()
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(head + payload)
    ttft = -1.0
    events = 0
    tail = b""
    try:
        while data := await reader.read(65536):
            window = tail + data
            if ttft < 0 and b"data: {" in window:
                ttft = time.perf_counter() - start
            events += window.count(b"data: {") - tail.count(b"data: {")
            tail = window[-8:]
    finally:
        writer.close()
    if ttft < 0:
        raise RuntimeError(f"request {i} got no data event")
    return i, ttft, events


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def sustained(
    fleet: FleetHandle, clients: int = 64, seconds: float = 6.0
) -> tuple[float, float, int]:
    """Closed loop: `clients` workers stream back to back; (req/s, events/s, requests)."""
    done = 0
    events = 0
    deadline = time.perf_counter() + seconds

    async def worker(w: int) -> None:
        nonlocal done, events
        i = w
        while time.perf_counter() < deadline:
            _, _, n = await _stream(fleet, i)
            done += 1
            events += n
            i += clients

    start = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(clients)))
    elapsed = time.perf_counter() - start
    return done / elapsed, events / elapsed, done


async def ttft_level(fleet: FleetHandle, concurrency: int, waves: int) -> list[float]:
    """`waves` rounds of `concurrency` simultaneous streams; observed - scripted TTFT per stream."""
    fleet.clear_requests()
    observed: dict[str, float] = {}
    for wave in range(waves):
        base = wave * concurrency
        results = await asyncio.gather(*(_stream(fleet, base + k) for k in range(concurrency)))
        observed.update({f"bench-{i}": ttft for i, ttft, _ in results})
    scripted = {e["body"]["user"]: e["scripted_ttft_s"] for e in fleet.requests()}
    return [observed[k] - scripted[k] for k in observed]


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def main() -> None:
    fleet = start_fleet("seed-incidents", time_scale=0.01, seed=0)
    assert fleet.process is not None
    try:
        cpu0 = _cpu_s(fleet.process.pid)
        rps, eps, n = asyncio.run(sustained(fleet))
        cpu_ms = (_cpu_s(fleet.process.pid) - cpu0) / n * 1000
        print(
            f"sustained streaming (64 clients, time_scale 0.01): {rps:,.0f} req/s, {eps:,.0f} SSE events/s; fleet CPU {cpu_ms:.1f} ms/request"
        )
        fleet.load("seed-incidents", time_scale=1.0, seed=0)
        print()
        print("time to first token, observed - scripted (time_scale 1.0, scripted 0.2-0.8 s)")
        print(f"{'streams':>8} {'n':>5} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
        for concurrency, waves in ((1, 20), (50, 3), (200, 2)):
            deltas = asyncio.run(ttft_level(fleet, concurrency, waves))
            ms = [d * 1000 for d in deltas]
            print(
                f"{concurrency:>8} {len(ms):>5} {_pct(ms, 50):>8.1f} {_pct(ms, 99):>8.1f} {max(ms):>8.1f}"
            )
        median = statistics.median(e["scripted_ttft_s"] for e in fleet.requests())
        print(
            f"(median scripted TTFT {median * 1000:.0f} ms; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
        )
    finally:
        stop_fleet(fleet)


if __name__ == "__main__":
    main()
