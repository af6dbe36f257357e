"""Bench: check_language latency on 500-character replies, detector build time and RSS.

    .venv/bin/python bench/bench_language.py [--rounds N]

Replies are built from the clean corpus (tests/data/corpus/clean): texts of one locale joined
and cut to 500 characters at a space. Side by side in one run: check_language, check_reply
(start + repetition + encoding) and a bare lingua confidence call on the same text (the floor
any lingua-based check pays). Targets (issue 3, section 4): p50 <= 10 ms, RSS <= 150 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

REPLY_CHARS = 500


def rss_mb() -> float:
    """Current resident set size in MB (Linux /proc), else peak RSS."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def replies() -> list[tuple[str, str]]:
    out = []
    for path in sorted((ROOT / "tests/data/corpus/clean").glob("*.json")):
        data = json.loads(path.read_text("utf-8"))
        texts = [t if isinstance(t, str) else t["text"] for t in data]
        joined = " ".join(texts)
        for i in range(0, len(joined) - REPLY_CHARS, REPLY_CHARS):
            chunk = joined[i : i + REPLY_CHARS]
            cut = chunk.rfind(" ", REPLY_CHARS // 2)
            out.append((path.stem, chunk[:cut] if cut > 0 else chunk))
    return out


def timed(fn: Callable[[str, str], object], items: list[tuple[str, str]]) -> list[float]:
    ms = []
    for loc, text in items:
        t0 = time.perf_counter()
        fn(text, loc)
        ms.append((time.perf_counter() - t0) * 1000)
    return ms


def pct(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=100, method="inclusive")[int(q) - 1] if len(xs) > 1 else xs[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3, help="passes over the reply set")
    args = ap.parse_args()

    rss0 = rss_mb()
    t0 = time.perf_counter()
    from lingua import Language

    from probes import language
    from probes.integrity import check_reply

    import_ms = (time.perf_counter() - t0) * 1000
    t0 = time.perf_counter()
    det = language.detector()
    build_ms = (time.perf_counter() - t0) * 1000
    rss_built = rss_mb()

    items = replies() * args.rounds
    lingua_of = {spec.code: getattr(Language, spec.language) for spec in language.LOCALES.values()}

    def bare(text: str, loc: str) -> object:
        return det.compute_language_confidence_values(text)

    def check(text: str, loc: str) -> object:
        return language.check_language(text, loc)

    def reply(text: str, loc: str) -> object:
        return check_reply(text, loc)

    t0 = time.perf_counter()
    for loc in sorted({loc for loc, _ in items}):  # first use per language loads its models
        check(next(text for lc, text in items if lc == loc), loc)
    warm_ms = (time.perf_counter() - t0) * 1000
    rss_warm = rss_mb()
    rows = [
        ("lingua confidence values (bare)", timed(bare, items)),
        ("check_language", timed(check, items)),
        ("check_reply (start+repetition+encoding)", timed(reply, items)),
    ]
    rss_after = rss_mb()
    base = statistics.median(rows[0][1])

    print(
        f"replies: {len(items) // args.rounds} x {args.rounds} rounds, ~{REPLY_CHARS} chars, "
        f"{len({loc for loc, _ in items})} locales, {len(lingua_of)} languages in the detector"
    )
    print(f"{'measure':42} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'x bare p50':>10}")
    for name, ms in rows:
        print(
            f"{name:42} {statistics.median(ms):8.2f} {pct(ms, 95):8.2f} {max(ms):8.2f} "
            f"{statistics.median(ms) / base:10.1f}"
        )
    print()
    print(f"{'import probes.language + lingua':42} {import_ms:8.1f} ms")
    print(f"{'detector build (17 languages, preloaded)':42} {build_ms:8.1f} ms")
    print(f"{'RSS before import':42} {rss0:8.1f} MB")
    print(f"{'first check per locale (model loading)':42} {warm_ms:8.1f} ms")
    print(f"{'RSS with detector built':42} {rss_built:8.1f} MB")
    print(f"{'RSS after first use of all 17 locales':42} {rss_warm:8.1f} MB")
    print(f"{'RSS after the timed runs':42} {rss_after:8.1f} MB")
    load = os.getloadavg()[0]
    print(f"{'load average (1 min) at the end':42} {load:8.2f} on {os.cpu_count()} CPUs")
    p50 = statistics.median(rows[1][1])
    print(
        f"\ntargets: p50 <= 10 ms -> {p50:.2f} ms {'OK' if p50 <= 10 else 'MISSED'}; "
        f"RSS <= 150 MB -> {rss_after:.0f} MB {'OK' if rss_after <= 150 else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
