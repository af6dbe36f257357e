"""`canary demo`: the main job on embedded defaults."""

from __future__ import annotations

from typing import Annotated

import typer

from canary.cli.common import settings_or_exit

app = typer.Typer()


@app.command("demo")
def demo_cmd(
    keep_ui: Annotated[
        bool, typer.Option("--keep-ui", help="Leave the Prefect UI running afterwards.")
    ] = False,
    rounds_before_fix: Annotated[int, typer.Option(min=2, max=10)] = 3,
) -> None:
    """The main job on embedded defaults: local Prefect server, seed-incidents fleet,
    enforce-mode rounds, a recovery, the UI address."""
    from canary.demo import run_demo

    settings = settings_or_exit()
    raise typer.Exit(run_demo(settings, rounds_before_fix=rounds_before_fix, keep_ui=keep_ui))
