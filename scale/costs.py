"""Per-round costs as the operating system and the databases count them (docs/SCALE.md):
the inputs of the capacity model, read by `scale.slot_test` and `bench/bench_round.py`.

    cpu          CPU seconds of a process tree from /proc (user + system, the process's
                 own and its reaped children's, plus every live descendant's), so a
                 worker's flow-run processes that ended are still counted
    writes       what the Prefect server wrote to its database: on PostgreSQL its own
                 counters (`pg_stat_database`: transactions committed, rows inserted,
                 updated, deleted; `pg_stat_user_tables` per table) and its size
                 (`pg_database_size`); on SQLite the row count of every table (rows added,
                 updates not seen) and the file's size
    footprint    the ledger's tables: rows each, and bytes (PostgreSQL:
                 `pg_total_relation_size`, indexes and TOAST included; SQLite: the file
                 with its WAL, the tables' pages from `dbstat` where SQLite has it)

PostgreSQL's backends publish their counters at most every second while busy and within
ten seconds when idle: read the "after" sample at least `PG_STATS_SETTLE_S` after the
last write.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import make_url

from quarantine.adapters.retention import LEDGER_TABLE_NAMES

PG_STATS_SETTLE_S = 11.0
_TICK = os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------- CPU from /proc


def children_by_pid() -> dict[int, list[int]]:
    """Every live process's direct children, from one scan of /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    return children


def descendants(pid: int, children: dict[int, list[int]] | None = None) -> list[int]:
    """Every live process below `pid` (from `children`, a `children_by_pid()` scan, if given)."""
    children = children_by_pid() if children is None else children
    out, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def _own_cpu_s(pid: int) -> float:
    """utime + stime + cutime + cstime of one process (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(x) for x in fields[11:15]) / _TICK


def tree_cpu_s(pids: Iterable[int]) -> float:
    """CPU seconds so far of each process in `pids` and everything below it (see module)."""
    seen: set[int] = set()
    children = children_by_pid()
    for pid in pids:
        seen.add(pid)
        seen.update(descendants(pid, children))
    return sum(_own_cpu_s(p) for p in seen)


# ---------------------------------------------------------------- the Prefect database


@dataclass(frozen=True)
class Writes:
    """A sample of what a database has written so far (subtract two samples)."""

    transactions: int = 0
    rows: int = 0  # inserted + updated + deleted (PostgreSQL), rows present (SQLite)
    by_table: dict[str, int] = field(default_factory=dict)
    size_bytes: int = 0  # the whole database (pg_database_size; the SQLite file and its WAL)
    table_bytes: dict[str, int] = field(default_factory=dict)  # pg_total_relation_size

    def __sub__(self, other: Writes) -> Writes:
        tables = set(self.by_table) | set(other.by_table)
        sized = set(self.table_bytes) | set(other.table_bytes)
        return Writes(
            self.transactions - other.transactions,
            self.rows - other.rows,
            {t: self.by_table.get(t, 0) - other.by_table.get(t, 0) for t in tables},
            self.size_bytes - other.size_bytes,
            {t: self.table_bytes.get(t, 0) - other.table_bytes.get(t, 0) for t in sized},
        )

    def top(self, n: int = 5) -> list[tuple[str, int]]:
        return sorted(((t, v) for t, v in self.by_table.items() if v), key=lambda x: -x[1])[:n]


def _sqlite_path(url: str) -> Path:
    database = make_url(url).database
    if not database:
        raise ValueError(f"not a SQLite file URL: {url}")
    return Path(database).expanduser()


def database_writes(url: str) -> Writes:
    """What the database at `url` (the Prefect server's) has written so far."""
    if make_url(url).get_backend_name() == "sqlite":
        path = _sqlite_path(url)
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            names = [
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            ]
            counts = {n: conn.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0] for n in names}
        return Writes(0, sum(counts.values()), counts, _file_bytes(path))
    engine = create_engine(make_url(url).set(drivername="postgresql+psycopg"))
    try:
        with engine.connect() as conn:
            xact, ins, upd, dele = conn.execute(
                text(
                    "SELECT xact_commit, tup_inserted, tup_updated, tup_deleted "
                    "FROM pg_stat_database WHERE datname = current_database()"
                )
            ).one()
            per = conn.execute(
                text(
                    "SELECT relname, n_tup_ins + n_tup_upd + n_tup_del, "
                    "pg_total_relation_size(relid) FROM pg_stat_user_tables"
                )
            ).all()
            size = conn.execute(text("SELECT pg_database_size(current_database())")).scalar_one()
        by_table = {str(r[0]): int(r[1]) for r in per}
        sizes = {str(r[0]): int(r[2]) for r in per}
        return Writes(int(xact), int(ins + upd + dele), by_table, int(size), sizes)
    finally:
        engine.dispose()


def row_counts(url: str, tables: Iterable[str]) -> dict[str, int]:
    """Rows of each of `tables` now: exact, where PostgreSQL's counters are published late."""
    engine = create_engine(make_url(url).set(drivername="postgresql+psycopg"))
    try:
        with engine.connect() as conn:
            return {
                t: int(conn.execute(text(f'SELECT count(*) FROM "{t}"')).scalar_one())
                for t in tables
            }
    finally:
        engine.dispose()


# ---------------------------------------------------------------- the ledger's footprint


@dataclass(frozen=True)
class Footprint:
    """Rows per ledger table and bytes (per table where the database says, and in all)."""

    rows: dict[str, int]
    table_bytes: dict[str, int]
    total_bytes: int

    def __sub__(self, other: Footprint) -> Footprint:
        return Footprint(
            {t: n - other.rows.get(t, 0) for t, n in self.rows.items()},
            {t: n - other.table_bytes.get(t, 0) for t, n in self.table_bytes.items()},
            self.total_bytes - other.total_bytes,
        )


def ledger_footprint(url: str) -> Footprint:
    """Rows and bytes of the ledger's tables at `url` (tables not created yet count 0)."""
    engine = create_engine(url)
    try:
        present = set(inspect(engine).get_table_names())
        tables = [t for t in LEDGER_TABLE_NAMES if t in present]
        with engine.connect() as conn:
            rows = {
                t: int(conn.execute(text(f'SELECT count(*) FROM "{t}"')).scalar_one())
                for t in tables
            }
            if engine.dialect.name == "postgresql":
                sizes = {
                    t: int(
                        conn.execute(
                            text("SELECT pg_total_relation_size(:t)"), {"t": t}
                        ).scalar_one()
                    )
                    for t in tables
                }
                return Footprint(rows, sizes, sum(sizes.values()))
        path = _sqlite_path(url)
        return Footprint(rows, _sqlite_table_bytes(path, tables), _file_bytes(path))
    finally:
        engine.dispose()


def _file_bytes(path: Path) -> int:
    """A SQLite database's size: the file and its write-ahead log."""
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def _sqlite_table_bytes(path: Path, tables: list[str]) -> dict[str, int]:
    """Pages of each table and its indexes (`dbstat`), or nothing where SQLite lacks it."""
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            found: dict[str, int] = {}
            for t in tables:
                names = [t, *(r[0] for r in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type='index' AND tbl_name=?", (t,)))]  # fmt: skip
                marks = ",".join("?" * len(names))
                found[t] = int(conn.execute(
                    f"SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name IN ({marks})", names
                ).fetchone()[0])  # fmt: skip
            return found
    except sqlite3.OperationalError:  # no dbstat in this SQLite build
        return {}
