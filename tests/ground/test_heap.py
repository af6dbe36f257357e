"""ground/heap.py: a round's process freezes what it loaded, once, so a full collection
walks only what the rounds allocate (a fresh interpreter per case: the freeze is
process-wide)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import gc, json
import flows.canary_round  # what a round's process has loaded before its first round
from ground.heap import freeze_loaded
before = gc.get_freeze_count()
first, second = freeze_loaded(), freeze_loaded()
frozen = gc.get_freeze_count()
class Cycle:
    pass
c = Cycle(); c.me = c; del c  # garbage made after the freeze is still collected
print(json.dumps({"before": before, "first": first, "second": second, "frozen": frozen,
                  "collected": gc.collect(), "after": gc.get_freeze_count()}))
"""


def test_the_loaded_modules_are_frozen_once_and_new_garbage_is_still_collected() -> None:
    import json

    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["first"] is True and seen["second"] is False
    assert seen["frozen"] > seen["before"] + 50_000, (
        seen
    )  # Prefect, pydantic and our modules, not a handful
    assert seen["collected"] >= 1 and seen["after"] == seen["frozen"], seen
