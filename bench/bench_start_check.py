"""Bench: detection rates of the per-reply start check (probes.integrity.check_response_start)
on generated defective starts, per class and locale, with its false positives and speed.

    .venv/bin/python bench/bench_start_check.py [--seed N]

Cases are derived from the clean corpus (tests/data/corpus/clean) by tests/data/start_variants.py
(glued fragments, fragment + space, word pieces, broken emphasis, template leaks, invisible
bytes) and tests/data/variants.py (stray punctuation and the older fragment forms). False
positives: clean replies and every prefix of their first 120 characters (what the gateway's
streaming check sees). Issue 14, item 3.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=None, help="default: the tests' seed")
    args = ap.parse_args()

    from probes.integrity import check_response_start
    from probes.types import OutcomeStatus
    from tests.data.start_variants import CLASSES, start_cases
    from tests.data.variants import SEED, clean_locales, load_clean, stray_starts

    rng = random.Random(SEED if args.seed is None else args.seed)
    locales = clean_locales()
    classes = ("stray_start", *CLASSES)
    total: Counter[tuple[str, str]] = Counter()
    caught: Counter[tuple[str, str]] = Counter()
    timings: list[float] = []
    for loc in locales:
        for text in load_clean(loc):
            cases = start_cases(text, loc, rng)
            cases["stray_start"] = stray_starts(text, loc, rng)
            for cls, variants in cases.items():
                for v in variants:
                    t0 = time.perf_counter()
                    failed = check_response_start(v, loc).status is OutcomeStatus.FAIL
                    timings.append((time.perf_counter() - t0) * 1e6)
                    total[cls, loc] += 1
                    caught[cls, loc] += failed

    clean = prefixes = 0
    clean_fp = prefix_fp = 0
    for loc in locales:
        for text in load_clean(loc):
            clean += 1
            clean_fp += check_response_start(text, loc).status is OutcomeStatus.FAIL
            for cut in range(1, min(len(text), 120) + 1):
                prefixes += 1
                prefix_fp += check_response_start(text[:cut], loc).status is OutcomeStatus.FAIL

    short = {c: c.replace("_emphasis", "_emph").replace("fragment", "frag")[:12] for c in classes}
    print("detection rate of check_response_start on generated defective starts (caught/total)")
    print(f"{'locale':8}" + "".join(f"{short[c]:>13}" for c in classes))
    for loc in locales:
        cells = []
        for c in classes:
            n = total[c, loc]
            cells.append(f"{caught[c, loc] / n:13.3f}" if n else f"{'-':>13}")
        print(f"{loc:8}" + "".join(cells))
    row = []
    for c in classes:
        n = sum(total[c, loc] for loc in locales)
        k = sum(caught[c, loc] for loc in locales)
        row.append(f"{k / n:13.3f}")
    print(f"{'all':8}" + "".join(row))
    print(f"{'cases':8}" + "".join(f"{sum(total[c, x] for x in locales):13d}" for c in classes))
    print()
    print(f"false positives: {clean_fp}/{clean} clean replies, {prefix_fp}/{prefixes} prefixes")
    print(
        f"time per reply: p50 {statistics.median(timings):.1f} us, "
        f"p99 {statistics.quantiles(timings, n=100)[98]:.1f} us, max {max(timings):.1f} us"
    )


if __name__ == "__main__":
    main()
