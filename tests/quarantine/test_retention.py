"""Ledger retention (O9) on a real SQLite file, and once on a throwaway PostgreSQL cluster:
rows older than the window are gone from every table, newer ones kept, a dry run counts
the same rows and deletes nothing, tool executions that may not have happened are never
pruned, and each prune leaves its own row."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from quarantine.adapters.ledger import LEDGER_METADATA
from quarantine.adapters.retention import (
    LEDGER_TABLE_NAMES,
    RULES,
    cutoff_for,
    preview,
    prune,
    prunes,
)
from routing.errors import AmbiguousCompletionError
from routing.events import ROUTING_METADATA
from routing.tools import ToolStore
from tests.fixtures.retention_support import fill, prunable

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
OLD = NOW - timedelta(days=40)
NEW = NOW - timedelta(days=2)
WINDOW = timedelta(days=30)


def _counts(url: str) -> dict[str, int]:
    engine = create_engine(url)
    with engine.connect() as conn:
        found = {
            t: conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one()
            for t in LEDGER_TABLE_NAMES
        }
    engine.dispose()
    return found


def _filled(url: str) -> tuple[dict[str, int], dict[str, int]]:
    return fill(url, OLD, "old"), fill(url, NEW, "new")


def test_o9_every_table_of_the_ledger_has_a_retention_rule() -> None:
    """A table added to the quarantine's or the routing's metadata without a rule fails here."""
    tables = {t.name for t in (*LEDGER_METADATA.sorted_tables, *ROUTING_METADATA.sorted_tables)}
    assert tables == {rule.table for rule in RULES}


def test_cutoff_is_now_minus_a_positive_window() -> None:
    """The cutoff is `now` minus the window in UTC; a window of zero is refused."""
    assert cutoff_for(NOW, WINDOW) == datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
    with pytest.raises(ValueError, match="positive"):
        cutoff_for(NOW, timedelta(0))


def _check_prune(url: str) -> None:
    old, new = _filled(url)
    before = _counts(url)
    assert before == {t: old[t] + new[t] for t in LEDGER_TABLE_NAMES}
    dry = preview(url, cutoff_for(NOW, WINDOW))
    assert dry.dry_run and dry.counts == prunable(old)
    assert _counts(url) == before  # a dry run deletes nothing
    result = prune(url, cutoff_for(NOW, WINDOW), now=NOW, batch_rows=2, actor="ops", reason="test")
    assert result.counts == dry.counts and result.total == 17
    assert _counts(url) == {t: before[t] - dry.counts[t] for t in LEDGER_TABLE_NAMES}
    engine = create_engine(url)
    with engine.connect() as conn:
        assert not conn.execute(
            text("SELECT 1 FROM quarantine_probes WHERE round_id LIKE 'old%'")
        ).all()
        states = conn.execute(
            text("SELECT operation_id FROM routing_tool_executions ORDER BY operation_id")
        ).scalars().all()  # fmt: skip
    engine.dispose()
    assert states == ["new-completed", "new-failed", "new-pending", "new-unknown",
                      "old-pending", "old-unknown"]  # fmt: skip
    [record] = prunes(url)
    assert (record["actor"], record["reason"], record["older_than_days"]) == ("ops", "test", 30)
    assert record["deleted"] == dry.counts and record["cutoff"].startswith("2026-11-01T12:00")
    assert preview(url, cutoff_for(NOW, WINDOW)).total == 0  # nothing older is left


def test_o9_prune_deletes_what_is_older_than_the_window_from_every_table(tmp_path: Path) -> None:
    """SQLite: rows 40 days old are gone (in batches smaller than a table), rows 2 days old
    stay, the dry run counted exactly what went, pending and unknown tool executions stay,
    and the prune is recorded in `ledger_prunes`."""
    _check_prune(f"sqlite:///{tmp_path / 'ledger.db'}")


async def test_o9_a_pruned_tool_execution_runs_again_and_an_unknown_one_still_refuses(
    tmp_path: Path,
) -> None:
    """The choice for R8: the idempotency of a completed execution lasts the retention
    window (after a prune the same call runs the tool again), while an old execution whose
    outcome is unknown is kept and still refuses to run again under policy `fail`."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    _filled(url)
    prune(url, cutoff_for(NOW, WINDOW), now=NOW, batch_rows=100, actor="ops", reason="test")
    calls: list[dict[str, str]] = []

    async def charge(args: dict[str, str]) -> str:
        calls.append(args)
        return "charged"

    store = ToolStore(url)
    try:
        assert (
            await store.run("old-completed", "charge", {"op": "old-completed"}, charge) == "charged"
        )
        assert await store.run("new-completed", "charge", {"op": "new-completed"}, charge) is None
        assert calls == [{"op": "old-completed"}]  # the kept row answered the new call
        with pytest.raises(AmbiguousCompletionError):
            await store.run("old-unknown", "charge", {"op": "old-unknown"}, charge)
    finally:
        store.close()


@pytest.mark.slow
def test_o9_prune_on_postgresql(pg_ledger_url: str) -> None:
    """The same prune on a throwaway PostgreSQL cluster (`scale/postgres.py`), the scale path."""
    _check_prune(pg_ledger_url)
