"""The `canary` command line: one module per command group, assembled here so that
`canary --help` lists everything.

    rounds   round, triage                  state    status, ignore, lift
    exclude  exclude add|remove|list        server   server start|stop, serve
    history  history (one endpoint)         report   report (HTML with plots)
    gateway  gateway serve|report           demo     demo
    served   served (which provider served a request)
    clock    clock reset                    lock     lock status|release
    ledger   ledger prune (retention)
    fleet    fleet serve (the fleet's own CLI, `fleet/cli.py`)

`--help` pages show flags without a type (`canary/cli/help.py`); `canary --version` prints
the installed version.

Exit codes (`canary/cli/errors.py`): 0 success (whatever the providers did), 2 bad usage or
configuration, 1 our own runtime errors (unreachable API, unknown model, a blind round, ...).
Errors are one line; `canary --debug ...` shows tracebacks.
"""

from __future__ import annotations

from typing import Annotated

import typer

from canary.cli import (
    clock,
    demo,
    exclude,
    gateway,
    history,
    ledger,
    lock,
    report,
    rounds,
    served,
    server,
    state,
)
from canary.cli.errors import set_debug
from canary.cli.help import plain_flags
from fleet.cli import app as fleet_app

app = typer.Typer(
    name="canary",
    help="provider-canary: probe inference providers, quarantine broken routes, route around them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,  # locals may hold secrets
)


app.add_typer(rounds.app)
app.add_typer(state.app)
app.add_typer(history.app)
app.add_typer(report.app)
app.add_typer(served.app)
app.add_typer(exclude.app, name="exclude")
app.add_typer(server.app, name="server")
app.add_typer(server.serve_app)
app.add_typer(demo.app)
app.add_typer(gateway.app, name="gateway", help="The OpenAI-compatible routing gateway.")
app.add_typer(clock.app, name="clock")
app.add_typer(lock.app, name="lock")
app.add_typer(ledger.app, name="ledger")
app.add_typer(fleet_app, name="fleet", help="The local OpenRouter-compatible provider fleet.")


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"provider-canary {version('provider-canary')}")
        except PackageNotFoundError:  # running from a checkout that is not installed
            typer.echo("provider-canary (not installed)")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", callback=_print_version, is_eager=True
        ),
    ] = False,
    debug: Annotated[
        bool, typer.Option("--debug", help="Show tracebacks instead of one-line errors.")
    ] = False,
) -> None:
    """provider-canary: probe inference providers, quarantine broken routes, route around them."""
    set_debug(debug)


plain_flags(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
