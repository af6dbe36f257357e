"""Ledger retention (O9): what is older than the window is deleted by time, across every
table of the ledger's database, in batches, and every prune leaves a row of its own.

The ledger grows by a row per endpoint per round and one per decision
(`quarantine/adapters/ledger.py`) and by the gateway's events: a row per request and one
per attempt (`routing/events.py`), a row per tool execution (`routing/tools.py`). Each
table is pruned by its own time column:

    quarantine_probes         at          the round's logical time
    quarantine_decisions      at          the decision's time
    routing_requests          at          when the request arrived
    routing_attempts          at          when the attempt started
    routing_suspects          at          when the gateway found a provider suspect (O8)
    quarantine_rounds, _costs at          the round's bill (C13)
    routing_tool_executions   updated_at  only rows `completed` or `failed`

Tool executions: the row of an execution key is what makes a retried operation return the
stored result instead of running the tool again (R8). Pruning a completed or failed row
ends that promise for its key, so the idempotency window of a tool call becomes the
retention window (30 days by default, against retries that come within seconds or minutes
of the first call). `pending` and `unknown` rows are never pruned: a missing row would let
the next caller run the tool again, and an unknown execution must never be assumed not to
have happened.

The routing tables are named here by their SQL names (the routing layer sits above this
one); `tests/quarantine/test_retention.py` fails when a table of either metadata has no rule.
Each batch is its own short transaction, so rounds and the gateway keep writing on SQLite
while a prune runs. Deleting frees pages for reuse: a SQLite file and a PostgreSQL table
stop growing at the window's size but do not shrink (VACUUM does that, by hand).

    ledger_prunes             one row per prune (never pruned: a row a day)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import JSON, Column, DateTime, delete, func, inspect, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import registry
from sqlalchemy.sql import ColumnElement, TableClause, column, table
from sqlalchemy.sql.expression import ColumnClause
from sqlalchemy.types import String
from sqlmodel import Field, Session, SQLModel

from ground.clock import as_utc
from ground.db import open_engine
from quarantine.errors import RetentionError


@dataclass(frozen=True)
class RetentionRule:
    """How one table is pruned: rows whose `time_column` is before the cutoff (and, when
    `states` is set, whose `state` is one of them), deleted by their primary `key`."""

    table: str
    time_column: str
    key: str = "id"
    states: tuple[str, ...] = ()

    def clause(self) -> TableClause:
        cols: list[ColumnClause[Any]] = [
            column(self.key),
            column(self.time_column, DateTime(timezone=True)),
        ]
        if self.states:
            cols.append(column("state", String()))
        return table(self.table, *cols)

    def older(self, t: TableClause, cutoff: datetime) -> ColumnElement[bool]:
        condition = t.c[self.time_column] < as_utc(cutoff)
        if self.states:
            condition = condition & t.c.state.in_(self.states)
        return condition


RULES: tuple[RetentionRule, ...] = (
    RetentionRule("quarantine_probes", "at"),
    RetentionRule("quarantine_decisions", "at"),
    RetentionRule("quarantine_rounds", "at"),  # each round's bill
    RetentionRule("quarantine_costs", "at"),  # the bill per endpoint and round
    RetentionRule("routing_requests", "at"),
    RetentionRule("routing_attempts", "at"),
    RetentionRule("routing_suspects", "at"),  # the gateway's suspects and ejections (O8)
    RetentionRule(
        "routing_tool_executions", "updated_at", key="execution_key", states=("completed", "failed")
    ),
)
LEDGER_TABLE_NAMES: tuple[str, ...] = tuple(rule.table for rule in RULES)


class _RetentionBase(SQLModel, registry=registry()):
    pass


RETENTION_METADATA = _RetentionBase.metadata


class PruneRow(_RetentionBase, table=True):
    """The record of one prune: who, why, up to when, and what each table lost."""

    __tablename__ = "ledger_prunes"

    id: int | None = Field(default=None, primary_key=True)
    at: datetime = Field(sa_column=Column(DateTime(timezone=True), index=True, nullable=False))
    cutoff: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
    older_than_days: float
    actor: str
    reason: str
    deleted: dict[str, int] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    flow_run_id: str | None = None


@dataclass(frozen=True)
class PruneResult:
    """What a prune deleted (or, dry, would delete) from each table, rows older than `cutoff`."""

    cutoff: datetime
    counts: dict[str, int]
    dry_run: bool

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "cutoff": self.cutoff.isoformat(),
            "dry_run": self.dry_run,
            "would_delete" if self.dry_run else "deleted": dict(self.counts),
            "total": self.total,
        }


def cutoff_for(now: datetime, older_than: timedelta) -> datetime:
    """Pure: rows with a time before this are older than the window."""
    if older_than <= timedelta(0):
        raise ValueError(f"the retention window must be positive, got {older_than}")
    return as_utc(now) - older_than


@contextmanager
def _ledger(url: str) -> Iterator[Engine]:
    """The ledger's engine; a database out of reach becomes `RetentionError` (its URL,
    which may carry a password, is not repeated)."""
    engine = open_engine(url)
    try:
        yield engine
    except OperationalError as exc:
        first = (str(exc.orig) if exc.orig else str(exc)).strip().splitlines()[:1]
        raise RetentionError(f"the ledger could not be pruned: {''.join(first)[:200]}") from None
    finally:
        engine.dispose()


def _present(engine: Engine) -> list[RetentionRule]:
    names = set(inspect(engine).get_table_names())
    return [rule for rule in RULES if rule.table in names]


def count_older(engine: Engine, cutoff: datetime) -> dict[str, int]:
    """Rows of each table a prune at `cutoff` would delete (tables not created yet: 0)."""
    counts = dict.fromkeys(LEDGER_TABLE_NAMES, 0)
    with engine.connect() as conn:
        for rule in _present(engine):
            t = rule.clause()
            query = select(func.count()).select_from(t).where(rule.older(t, cutoff))
            counts[rule.table] = int(conn.execute(query).scalar_one())
    return counts


def delete_older(engine: Engine, cutoff: datetime, *, batch_rows: int) -> dict[str, int]:
    """Delete each table's rows older than `cutoff`, `batch_rows` at a time, each batch in
    its own transaction; returns how many each table lost."""
    counts = dict.fromkeys(LEDGER_TABLE_NAMES, 0)
    for rule in _present(engine):
        t = rule.clause()
        batch = select(t.c[rule.key]).where(rule.older(t, cutoff)).limit(batch_rows)
        while True:
            with engine.begin() as conn:
                gone = conn.execute(delete(t).where(t.c[rule.key].in_(batch))).rowcount
            counts[rule.table] += gone
            if gone < batch_rows:
                break
    return counts


def preview(url: str, cutoff: datetime) -> PruneResult:
    """A dry run: what a prune at `cutoff` would delete; nothing is written."""
    with _ledger(url) as engine:
        return PruneResult(cutoff=as_utc(cutoff), counts=count_older(engine, cutoff), dry_run=True)


def prune(
    url: str,
    cutoff: datetime,
    *,
    now: datetime,
    batch_rows: int,
    actor: str,
    reason: str,
    flow_run_id: str | None = None,
) -> PruneResult:
    """Delete what is older than `cutoff` and record the prune in `ledger_prunes`."""
    with _ledger(url) as engine:
        counts = delete_older(engine, cutoff, batch_rows=batch_rows)
        RETENTION_METADATA.create_all(engine)
        row = PruneRow(
            at=as_utc(now),
            cutoff=as_utc(cutoff),
            older_than_days=(as_utc(now) - as_utc(cutoff)) / timedelta(days=1),
            actor=actor,
            reason=reason,
            deleted=counts,
            flow_run_id=flow_run_id,
        )
        with Session(engine) as session:
            session.add(row)
            session.commit()
    return PruneResult(cutoff=as_utc(cutoff), counts=counts, dry_run=False)


def prunes(url: str) -> list[dict[str, Any]]:
    """Every recorded prune, oldest first (empty when none was ever made)."""
    with _ledger(url) as engine:
        if not inspect(engine).has_table(PruneRow.__tablename__):
            return []
        with Session(engine) as session:
            rows = session.scalars(select(PruneRow).order_by(PruneRow.id))  # type: ignore[arg-type]
            return [r.model_dump(mode="json") for r in rows]
