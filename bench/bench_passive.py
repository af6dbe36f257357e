"""Bench: production traffic as evidence (SPEC O8, issue 25), three figures.

    .venv/bin/python bench/bench_passive.py [--seeds 40] [--requests 10000] [--calls 200000]

1. The cost per request of the passive accounting, in microseconds: what an attempt says of
   its provider (`passive_verdict`) and the window update (`PassiveBook.observe`) for an
   accepted reply; a failure below the bar; a failure above it (the peer test over 14
   providers: what runs only while a provider looks bad); and the whole shell the router
   calls for every attempt (`PassiveWatch.observe`, with its two Prometheus counters). The
   gateway's own overhead per request is in bench/bench_gateway.py (ms, not µs); the full
   regression check against a baseline checkout is `bench/bench_peers.py --baseline`.
2. False positives: `--seeds` runs of `--requests` clean requests over 14 providers with
   realistic, differing base rates (tests/fixtures/passive_sim.py), at those rates and at
   twice them: how many providers were ever suspect.
3. Detection: one provider failing a share of its replies for one reason from request 3,000:
   requests (of all traffic, 2.8 a second) until it is suspect, median and 90th percentile.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ground.settings import PassiveConfig, ProbeConfig  # noqa: E402
from routing.attempt import AttemptResult  # noqa: E402
from routing.classify import Classification  # noqa: E402
from routing.errors import FailureClass  # noqa: E402
from routing.metrics import RouterMetrics  # noqa: E402
from routing.passive import OK, PassiveBook, Reason, passive_verdict  # noqa: E402
from routing.passive_watch import PassiveWatch  # noqa: E402
from routing.response import Completion  # noqa: E402
from routing.routes import parse_routes  # noqa: E402
from tests.fixtures.passive_sim import Defect, simulate  # noqa: E402

MODEL = "bench/model"
PROVIDERS = [f"P{i}" for i in range(14)]


def _per_call_us(fn: object, calls: int) -> float:
    start = time.perf_counter()
    for i in range(calls):
        fn(i)  # type: ignore[operator]
    return (time.perf_counter() - start) / calls * 1e6


def _warm_book() -> PassiveBook:
    book = PassiveBook(PassiveConfig(), ProbeConfig())
    for i in range(2000):
        book.observe(MODEL, PROVIDERS[i % 14], OK, ttft_ms=300.0, now=i * 0.1)
    return book


def cost(calls: int) -> None:
    comp = Completion(content="*She smiles.* A reply.", finish_reason="stop", done=True)
    book = _warm_book()
    ok_path = _per_call_us(
        lambda i: book.observe(
            MODEL, PROVIDERS[i % 14],
            passive_verdict(None, comp, client_shaped=False, cancelled=False) or OK,
            ttft_ms=300.0, now=200 + i * 0.001,
        ),
        calls,
    )  # fmt: skip
    below = _warm_book()
    fail_below = _per_call_us(
        lambda i: below.observe(
            MODEL, PROVIDERS[i % 14], "start" if i % 50 == 0 else OK, ttft_ms=None, now=200 + i * 0.001
        ),
        calls,
    )  # fmt: skip
    above = _warm_book()
    for _ in range(40):
        above.observe(MODEL, "P0", "start", ttft_ms=None, now=200.0)
    fail_above = _per_call_us(
        lambda i: above.observe(MODEL, "P0", "start", ttft_ms=None, now=200.0), max(1, calls // 100)
    )
    print("1. passive accounting per request (µs)")
    print(f"   accepted reply: verdict + window update        {ok_path:7.2f}")
    print(f"   mixed traffic, 2% failing below the bar        {fail_below:7.2f}")
    print(f"   a failure above the bar (peer test, 14 peers)  {fail_above:7.2f}")
    print(f"   PassiveWatch.observe (+ 2 Prometheus counters) {_watch_us(calls):7.2f}")


def _watch_us(calls: int) -> float:
    route = parse_routes(
        {"version": 1, "routes": [{"id": "r", "model": MODEL, "context_length": 8192}],
         "groups": {"text": ["r"]}}
    ).routes[0]  # fmt: skip
    watch = PassiveWatch(
        PassiveConfig(), ProbeConfig(), floor=2, listings=None, sink=None, metrics=RouterMetrics()
    )
    results = []
    for name in PROVIDERS:
        comp = Completion(content="*She smiles.*", finish_reason="stop", done=True, provider=name)
        results.append(AttemptResult(route=route, started=0.0, completion=comp, ttft_s=0.3))
    return _per_call_us(lambda i: watch.observe(results[i % 14], cancelled=False), calls)


def false_positives(seeds: int, requests: int) -> None:
    print(f"2. false positives: {seeds} runs x {requests:,} clean requests, 14 providers")
    for mult in (1.0, 2.0):
        counts = [
            len({s.provider for _, s in simulate(seed, requests=requests, base_multiplier=mult).suspicions})
            for seed in range(seeds)
        ]  # fmt: skip
        print(f"   base rates x{mult:g}: {sum(counts)} providers ever suspect in"
              f" {seeds * requests:,} requests ({sum(1 for c in counts if c)} runs of {seeds})")  # fmt: skip
    bad = Classification(FailureClass.INVALID_RESPONSE, "stray_start")
    assert passive_verdict(bad, Completion(), client_shaped=False, cancelled=False) == "start"


def detection(seeds: int) -> None:
    print("3. detection: one of 14 providers fails a share of its replies from request 3,000")
    for reason in (Reason.START, Reason.TOOL_CALL):
        for rate in (0.2, 0.3, 0.5, 1.0):
            found = []
            for seed in range(seeds):
                r = simulate(seed, requests=6000, defect=Defect(3, reason, rate, 3000))
                found.append(r.first_after(3000, "P3"))
            hits = sorted(f for f in found if f is not None)
            if not hits:
                print(f"   {reason.value:<10} {rate:4.0%}: never within 3,000 requests")
                continue
            p90 = hits[min(len(hits) - 1, int(0.9 * len(hits)))]
            print(f"   {reason.value:<10} {rate:4.0%}: median {statistics.median(hits):6.0f} requests"
                  f" ({statistics.median(hits) * 0.36:4.0f} s), p90 {p90:5d}, never in"
                  f" {len(found) - len(hits)} of {seeds}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=40)
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=200_000)
    args = parser.parse_args()
    cost(args.calls)
    false_positives(args.seeds, args.requests)
    detection(min(args.seeds, 20))


if __name__ == "__main__":
    main()
