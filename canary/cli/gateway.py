"""`canary gateway serve`: the OpenAI-compatible gateway in front of CANARY_BASE_URL."""

from __future__ import annotations

from pathlib import Path

import typer

from canary.cli.common import settings_or_exit
from canary.cli.errors import BAD_INPUT, cli_errors, exit_with_error

app = typer.Typer(no_args_is_help=True)


@app.command()
@cli_errors
def serve(
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int = typer.Option(8700, "--port", min=0, max=65535),
    contracts: Path | None = typer.Option(
        None, "--contracts", help="Contract directory (default: shipped examples)."
    ),
    no_events: bool = typer.Option(
        False, "--no-events", help="Do not write request/attempt events to the ledger."
    ),
    no_quarantine: bool = typer.Option(
        False, "--no-quarantine", help="Demo/bench only: pass no provider.ignore (no Prefect API)."
    ),
    log_level: str = typer.Option("warning", "--log-level"),
) -> None:
    """Serve POST /v1/chat/completions, GET /metrics and GET /healthz on HOST:PORT."""
    import asyncio

    import uvicorn

    from routing.compose import build_router
    from routing.errors import ContractError
    from routing.gateway import create_app
    from routing.serving import gateway_config

    settings = settings_or_exit()
    if not settings.gateway.keys:
        exit_with_error("no client keys: set CANARY_GATEWAY__KEYS (comma-separated)", BAD_INPUT)
    try:
        from routing.exclusions import static_source

        source = static_source() if no_quarantine else None
        router = build_router(
            settings, contracts_dir=contracts, events=not no_events, ignore_source=source
        )
    except ContractError as exc:
        exit_with_error(str(exc), BAD_INPUT)
    application = create_app(router, settings.gateway)
    config = gateway_config(
        application, settings.gateway, host=host, port=port, log_level=log_level
    )
    server = uvicorn.Server(config)

    async def run() -> None:
        task = asyncio.create_task(server.serve())
        while not server.started and not task.done():
            await asyncio.sleep(0.02)
        if server.started:
            bound = server.servers[0].sockets[0].getsockname()[1]
            typer.echo(
                f"gateway serving {len(router.catalog.contracts)} workloads at http://{host}:{bound}/v1"
                f" -> upstream {router.upstream.base_url}"
            )
        await task

    if no_quarantine:
        asyncio.run(run())
        return
    # The quarantine's provider.ignore lives in Prefect (block + Variable): use the same API
    # as every other canary command (PREFECT_API_URL, else the embedded local server).
    from ground.prefect_server import use_api

    with use_api(settings) as api_url:
        typer.echo(f"reading provider.ignore from the Prefect API at {api_url}")
        asyncio.run(run())
