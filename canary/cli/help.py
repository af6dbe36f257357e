"""How `--help` looks: flags without a type.

Typer's rich help prints `<bool>` after every flag (`--force <bool>`), which reads as if the
flag took a value. A flag takes none, so its type column is left empty: every command and
group of the app gets a command class that sets an empty metavar on its flags (and on
`--help`). `plain_flags(app)` is applied once, where the app is assembled, so the command
modules declare their options as usual.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup, TyperOption
from typer.models import DefaultPlaceholder


def _blank_flags(params: list[Any]) -> None:
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""


class _PlainFlags:
    """Blanks the `<bool>` type shown after flags (own parameters and `--help`)."""

    params: list[Any]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _blank_flags(self.params)

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)  # type: ignore[misc]
        if option is not None:
            _blank_flags([option])
        return option


class PlainFlagsCommand(_PlainFlags, TyperCommand):
    pass


class PlainFlagsGroup(_PlainFlags, TyperGroup):
    pass


def _unset(value: object) -> bool:
    """No class of its own: unset, a default placeholder, or Typer's own class."""
    return value in (None, TyperCommand, TyperGroup) or isinstance(value, DefaultPlaceholder)


def plain_flags(app: typer.Typer) -> None:
    """Give every command and group of `app` (recursively) the plain-flags classes, unless
    one declared a class of its own."""
    if _unset(app.info.cls):
        app.info.cls = PlainFlagsGroup
    for command in app.registered_commands:
        if _unset(command.cls):
            command.cls = PlainFlagsCommand
    for group in app.registered_groups:
        if _unset(group.cls):
            group.cls = PlainFlagsGroup
        if group.typer_instance is not None:
            plain_flags(group.typer_instance)
