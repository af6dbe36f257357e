"""Exit codes, decided in one place.

    0  success, whatever the providers did
    2  bad arguments or configuration (the operator can fix the command)
    1  our own runtime errors (Prefect API unreachable, unknown model, ...)

`exit_with_error` prints one line on stderr and exits; `cli_errors` wraps a command so that
our exceptions become that one line and its exit code instead of a traceback (the shape of
Prefect's own `cli/flow_run.py` with `exit_with_error`). Anything else is a bug of ours:
one line naming its type and exit 1, or the traceback with `canary --debug ...`.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import NoReturn

import typer
from pydantic import ValidationError

BAD_INPUT = 2
RUNTIME = 1

_debug = False


def set_debug(on: bool) -> None:
    """`canary --debug`: tracebacks instead of one-line errors."""
    global _debug
    _debug = on


def debug() -> bool:
    return _debug


def scrub(text: str) -> str:
    """`text` without the upstream key (a foreign exception may quote a request)."""
    for name in ("CANARY_API_KEY", "OPENROUTER_API_KEY"):
        secret = os.environ.get(name, "").strip()
        if len(secret) >= 4:
            text = text.replace(secret, "**********")
    return text


def exit_with_error(message: str, code: int = RUNTIME) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def describe_validation(exc: ValidationError, prefix: str = "") -> str:
    """`CANARY_X: msg; ...` for settings (prefix `CANARY_`), `a.b: msg` for other models."""
    parts = []
    for e in exc.errors():
        if prefix:  # nested settings are CANARY_POLICY__FLOOR
            where = prefix + "__".join(str(p) for p in e["loc"]).upper()
        else:
            where = ".".join(str(p) for p in e["loc"]) or "value"
        parts.append(f"{where}: {e['msg']}")
    return "; ".join(parts)


def _exit_code_for(exc: BaseException) -> tuple[int, str] | None:
    """The exit code and line for one of our exceptions, or None for a foreign one."""
    from flows.preflight import PreflightError
    from ground.prefect_server import PrefectUnavailable
    from probes.errors import DiscoveryError, InvalidModelIdError
    from quarantine.adapters.lease import LeaseError
    from quarantine.errors import QuarantineError

    if isinstance(exc, PreflightError):
        return exc.code, str(exc)
    if isinstance(exc, LeaseError):
        return RUNTIME, str(exc)
    if isinstance(exc, PrefectUnavailable):
        return RUNTIME, f"Prefect API unavailable: {exc}"
    if isinstance(exc, InvalidModelIdError):
        return BAD_INPUT, str(exc)
    if isinstance(exc, DiscoveryError | QuarantineError):
        return RUNTIME, str(exc)
    if isinstance(exc, ValidationError):  # bad values reaching a model (reason, tag, ...)
        return BAD_INPUT, f"invalid input: {describe_validation(exc)}"
    if isinstance(exc, ValueError):  # PlanError (unknown endpoint), empty reasons, ...
        return BAD_INPUT, str(exc)
    return None


def cli_errors[**P, T](command: Callable[P, T]) -> Callable[P, T]:
    """Turn our exceptions raised by `command` into one line and an exit code."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except Exception as exc:
            if _debug:
                raise
            mapped = _exit_code_for(exc)
            if mapped is None:
                first = (str(exc).strip().splitlines() or [""])[0][:300]
                exit_with_error(
                    f"unexpected {type(exc).__name__}: {scrub(first)} "
                    "(`canary --debug ...` shows the traceback)",
                    RUNTIME,
                )
            exit_with_error(scrub(mapped[1]), mapped[0])

    return wrapper
