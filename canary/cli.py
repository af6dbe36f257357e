"""The `canary` command line. Each folder contributes its own sub-commands;
this module only assembles them, so `canary --help` lists everything.

Exit codes: 0 success (whatever the providers did), 2 bad usage or config,
1 our own runtime errors (unreachable API, unknown model, ...).
"""

from __future__ import annotations

import typer

app = typer.Typer(
    name="canary",
    help="provider-canary: probe inference providers, quarantine broken routes, route around them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,  # locals may hold secrets
)


def _register() -> None:
    from fleet.cli import app as fleet_app

    app.add_typer(fleet_app, name="fleet", help="The local OpenRouter-compatible provider fleet.")
    from routing.cli import app as gateway_app

    app.add_typer(gateway_app, name="gateway", help="The OpenAI-compatible routing gateway.")

    from canary.commands import register

    register(app)


_register()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
