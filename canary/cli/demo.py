"""`canary demo`: the main job on embedded defaults."""

from __future__ import annotations

from typing import Annotated

import typer

from canary.cli.common import settings_or_exit

app = typer.Typer()


@app.command("demo")
def demo_cmd(
    keep_ui: Annotated[
        bool,
        typer.Option(
            "--keep-ui/--stop-ui",
            help="Leave the Prefect UI running at the end (stop it with: canary server stop).",
        ),
    ] = True,
    rounds_before_fix: Annotated[
        int, typer.Option(min=2, max=10, help="Rounds before the broken host is fixed.")
    ] = 3,
    verbose: Annotated[
        bool, typer.Option("--verbose", help="Also print Prefect's per-endpoint log lines.")
    ] = False,
) -> None:
    """The main job on embedded defaults: local Prefect server, seed-incidents fleet,
    enforce-mode rounds, a recovery, a health report, and what to look at in the UI."""
    from canary.demo import run_demo

    settings = settings_or_exit()
    raise typer.Exit(
        run_demo(settings, rounds_before_fix=rounds_before_fix, keep_ui=keep_ui, verbose=verbose)
    )
