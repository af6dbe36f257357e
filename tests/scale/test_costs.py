"""The scale test's shapes and its cost readings (`scale/costs.py`, `scale/model.py`): the
catalogue's spread of endpoints per model, CPU of a process tree that counts reaped
children, the ledger's rows and bytes and a database's row counts on a real SQLite file,
and the model's fit of fixed + per-endpoint costs."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from scale.costs import database_writes, ledger_footprint, tree_cpu_s
from scale.model import fit
from scale.slot_test import fleet_scenario, healthy_counts
from tests.fixtures.retention_support import fill


def test_the_catalogue_in_miniature_is_100_models_of_3_to_8_endpoints() -> None:
    """`--endpoints 2-7` cycles 2..7 healthy endpoints (3..8 with the bad one); `20` is the
    old shape; anything else is refused."""
    healthy = healthy_counts("2-7", 100)
    models = fleet_scenario(healthy)["models"]
    sizes = [len(m["endpoints"]) for m in models]
    assert len(models) == 100 and min(sizes) == 3 and max(sizes) == 8 and sum(sizes) == 546
    assert all(m["endpoints"][-1]["tag"] == "stray/fp8" for m in models)
    assert healthy_counts("20", 3) == [20, 20, 20]
    for bad in ("7-2", "0", "a-b", "3-"):
        with pytest.raises(argparse.ArgumentTypeError):
            healthy_counts(bad, 10)


def test_cpu_of_a_process_tree_counts_a_child_that_has_exited() -> None:
    """A child that burned ~0.5 CPU-s and was reaped shows in its parent's tree."""
    before = tree_cpu_s([os.getpid()])
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass"
    subprocess.run([sys.executable, "-c", burn], check=True)
    assert tree_cpu_s([os.getpid()]) - before >= 0.45


def test_ledger_footprint_and_database_rows_on_sqlite(tmp_path: Path) -> None:
    """Rows per ledger table and the file's bytes grow with what was written; a database's
    row counts see the same rows."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    empty = ledger_footprint(url)
    assert empty.total_bytes == 0 and not any(empty.rows.values())
    rows = fill(url, datetime(2026, 12, 1, tzinfo=UTC), "a")
    once = ledger_footprint(url)
    assert once.rows == rows and once.total_bytes > 0
    fill(url, datetime(2026, 12, 2, tzinfo=UTC), "b")
    grown = ledger_footprint(url) - once
    assert grown.rows == rows and grown.total_bytes >= 0
    assert database_writes(url).by_table["quarantine_probes"] == 6


def test_the_model_fits_fixed_and_per_endpoint_costs_from_two_shapes() -> None:
    """Two shapes: cost = fixed per round + per endpoint-round, solved exactly; one shape:
    scaled per endpoint-round."""
    small = {"rounds": 100, "endpoint_rounds": 500, "x": 100 * (2.0 + 5 * 0.1)}
    large = {"rounds": 20, "endpoint_rounds": 420, "x": 20 * (2.0 + 21 * 0.1)}
    fixed, per = fit([small, large], lambda s: s["x"])
    assert fixed == pytest.approx(2.0) and per == pytest.approx(0.1)
    assert fit([small], lambda s: s["x"]) == (0.0, pytest.approx(0.5))
