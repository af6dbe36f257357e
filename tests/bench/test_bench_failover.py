"""bench/bench_failover.py in its quick mode (issue 32 item 7): its seventeen failure cases,
each a streamed chat read by the OpenAI SDK from this gateway in front of the fleet (both
subprocesses on loopback), classified from what the client read and the fleet's log. No
case may be WRONG (truncated or garbled text passed as success), and each is the class the
README's table states (a cut, a stall and garbage after release continued; one malformed
event and a stream without [DONE] complete; an in-band error mid-stream and a cut whose only
fallback refuses the prefill a clean error)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_issue32_failover_bench_has_no_wrong_answer_and_each_case_its_stated_class(
    tmp_path: Path,
) -> None:
    out = tmp_path / "rows.json"
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_failover.py"), "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.exists(), (
        f"the bench wrote no rows (exit {run.returncode}):\n{run.stdout}{run.stderr}"
    )
    rows = json.loads(out.read_text())
    assert len(rows) == 17, [r["case"] for r in rows]
    wrong = {r["case"]: r["what"] for r in rows if r["class"] == "WRONG"}
    assert not wrong, f"truncated or garbled text passed as success: {wrong}"
    unexpected = {
        r["case"]: (r["class"], r["expect"], r["what"]) for r in rows if r["class"] != r["expect"]
    }
    assert not unexpected, f"cases not of their stated class (got, expected, read): {unexpected}"
    assert run.returncode == 0, run.stdout + run.stderr
