"""What every command group shares: settings, the Prefect API, times, the model option."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from datetime import datetime
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from canary.cli.errors import BAD_INPUT, debug, describe_validation, exit_with_error
from ground.clock import parse_iso
from ground.settings import RenamedSettingError, Settings, load_settings

ModelOpt = Annotated[str | None, typer.Option("--model", "-m", help="Model id, e.g. author/slug.")]


def settings_or_exit() -> Settings:
    try:
        return load_settings()
    except ValidationError as exc:
        exit_with_error(f"bad configuration: {describe_validation(exc, 'CANARY_')}", BAD_INPUT)
    except RenamedSettingError as exc:
        exit_with_error(f"bad configuration: {exc}", BAD_INPUT)


def parse_at(value: str | None, option: str = "--at") -> datetime | None:
    if value is None:
        return None
    try:
        return parse_iso(value)
    except ValueError:
        exit_with_error(
            f"{option} must be an ISO-8601 time such as 2026-11-29T12:00:00Z, got {value!r}",
            BAD_INPUT,
        )


def model_or_default(settings: Settings, model: str | None) -> str:
    return model or settings.models[0]


def run_with_api[T](settings: Settings, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine against a reachable Prefect API (starting the local server if needed),
    giving up with exit 1 if that API stops answering for CANARY_API_LOST_AFTER_S.
    Errors propagate; the command's `cli_errors` decorator turns them into exit codes."""
    from canary.cli.watchdog import api_watchdog
    from ground.prefect_server import use_api

    with use_api(settings) as url, api_watchdog(url, settings.api_lost_after_s):
        if not debug():
            from canary.cli.debug import quiet_console_tracebacks

            quiet_console_tracebacks()
        return asyncio.run(make())


def run_local[T](make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine that needs no Prefect API (pre-flight checks of the upstream)."""
    return asyncio.run(make())
