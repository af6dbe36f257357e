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


@functools.cache
def exit_codes() -> tuple[tuple[type[BaseException], int], ...]:
    """Our errors (`ground.errors.CanaryError`'s tree) and the foreign ones a command may
    raise for bad input -> exit code, most specific first: the first row whose class the
    error is an instance of decides. `tests/canary/test_exit_codes.py` fails when a class of
    our tree is decided only by the root's catch-all row. Imported on first use: the CLI
    starts without loading the flows."""
    from canary.cli.preflight import BadInput, PreflightError
    from fleet.request import RequestError
    from fleet.scenario import ScenarioError
    from fleet.schema_check import SchemaProblem
    from flows.roundplan import PlanError
    from ground.errors import CanaryError
    from ground.prefect_server import PrefectUnavailable
    from ground.settings import RenamedSettingError
    from probes.errors import InvalidModelIdError, ProbeClientError
    from probes.prompts import UnknownLocaleError
    from quarantine.errors import QuarantineError
    from routing.errors import (
        BodyTooLarge,
        BodyTooSlow,
        ContractError,
        MalformedStream,
        RoutingError,
        SlowFirstToken,
        StreamStalled,
        UpstreamError,
    )
    from routing.ignore_lists import IgnoreFileError
    from wire.jsonio import WireJSONError

    return (
        (BadInput, BAD_INPUT),
        (PreflightError, RUNTIME),  # Unavailable: the base URL, the model upstream
        (InvalidModelIdError, BAD_INPUT),
        (ProbeClientError, RUNTIME),  # discovery failed
        (RenamedSettingError, BAD_INPUT),
        (PlanError, BAD_INPUT),  # an unknown endpoint subset
        (UnknownLocaleError, BAD_INPUT),
        (ContractError, BAD_INPUT),
        (ScenarioError, BAD_INPUT),
        (RequestError, BAD_INPUT),  # the fleet's answers to a bad request
        (SchemaProblem, BAD_INPUT),
        (WireJSONError, BAD_INPUT),
        (QuarantineError, RUNTIME),  # unknown model or tag, corrupt state, the round lock
        (IgnoreFileError, RUNTIME),  # the gateway's kept ignore lists: a corrupt file
        (PrefectUnavailable, RUNTIME),
        (RoutingError, RUNTIME),
        (UpstreamError, RUNTIME),  # the gateway's upstream transport
        (MalformedStream, RUNTIME),
        (SlowFirstToken, RUNTIME),  # the gateway's own cuts of an upstream reply (R13)
        (StreamStalled, RUNTIME),
        (BodyTooLarge, BAD_INPUT),  # a client's request body
        (BodyTooSlow, BAD_INPUT),
        (CanaryError, RUNTIME),  # the root's catch-all (a class the table does not name yet)
        (ValidationError, BAD_INPUT),  # bad values reaching a model (reason, tag, ...)
        (ValueError, BAD_INPUT),  # an empty reason, a bad number, ...
    )


def exit_code_for(exc: BaseException) -> tuple[int, str] | None:
    """The exit code and line for one of our exceptions, or None for a foreign one."""
    from ground.prefect_server import PrefectUnavailable

    for cls, code in exit_codes():
        if isinstance(exc, cls):
            if isinstance(exc, PrefectUnavailable):
                return code, f"Prefect API unavailable: {exc}"
            if isinstance(exc, ValidationError):
                return code, f"invalid input: {describe_validation(exc)}"
            return code, str(exc)
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
            mapped = exit_code_for(exc)
            if mapped is None:
                first = (str(exc).strip().splitlines() or [""])[0][:300]
                exit_with_error(
                    f"unexpected {type(exc).__name__}: {scrub(first)} "
                    "(`canary --debug ...` shows the traceback)",
                    RUNTIME,
                )
            exit_with_error(scrub(mapped[1]), mapped[0])

    return wrapper
