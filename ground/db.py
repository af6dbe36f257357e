"""One way to open the project's SQL databases (ledger, routing events, tool
executions): any SQLAlchemy URL; for a SQLite file its folder is created and
the connection may be shared across threads and waits up to 30 s on a lock."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import create_engine
from sqlalchemy.engine import Engine, make_url


def open_engine(url: str) -> Engine:
    parsed = make_url(url)
    kwargs: dict[str, Any] = {}
    if parsed.get_backend_name() == "sqlite":
        if parsed.database not in (None, "", ":memory:"):
            Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
    return create_engine(url, **kwargs)
