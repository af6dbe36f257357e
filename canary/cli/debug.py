"""Tracebacks stay out of the console unless `canary --debug`: Prefect's console handler
prints each logged exception's traceback (a failed flow run logs several); the run logs in
the Prefect API keep them. Python 3.12 lets a handler filter return a modified copy of the
record, so only the console's copy loses the traceback."""

from __future__ import annotations

import copy
import logging


class _NoTraceback(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool | logging.LogRecord:
        if not record.exc_info and not record.exc_text:
            return True
        quiet = copy.copy(record)
        quiet.exc_info, quiet.exc_text, quiet.stack_info = None, None, None
        return quiet


_FILTER = _NoTraceback()


def quiet_console_tracebacks() -> None:
    """Drop tracebacks from Prefect's console handlers (idempotent)."""
    for name in ("prefect", "prefect.flow_runs", "prefect.task_runs", ""):
        for handler in logging.getLogger(name).handlers:
            if "API" in type(handler).__name__:  # the run logs keep everything
                continue
            if _FILTER not in handler.filters:
                handler.addFilter(_FILTER)
