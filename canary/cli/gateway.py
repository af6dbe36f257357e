"""`canary gateway serve`: the OpenAI-compatible gateway in front of CANARY_BASE_URL;
`canary gateway report`: the router's own R11 figures over a window, from the ledger."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from canary.cli.common import settings_or_exit
from canary.cli.errors import BAD_INPUT, cli_errors, exit_with_error
from canary.cli.since import since_or_exit
from ground.clock import utc_now

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
        False,
        "--no-quarantine",
        help="Demo/bench only: pass no provider.ignore and send no events (no Prefect API).",
    ),
    log_level: str = typer.Option("warning", "--log-level"),
) -> None:
    """Serve POST /v1/chat/completions, GET /v1/models, GET /metrics and GET /healthz on
    HOST:PORT."""
    import asyncio

    import uvicorn

    from routing.compose import build_router
    from routing.errors import ContractError
    from routing.gateway import create_app
    from routing.serving import gateway_config, run_serving

    settings = settings_or_exit()
    if not settings.gateway.keys:
        exit_with_error("no client keys: set CANARY_GATEWAY__KEYS (comma-separated)", BAD_INPUT)
    try:
        from routing.exclusions import static_source

        source = static_source() if no_quarantine else None
        router = build_router(
            settings, contracts_dir=contracts, events=not no_events, ignore_source=source,
            suspect_events=not no_quarantine,
        )  # fmt: skip
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
        run_serving(run())
        return
    # The quarantine's provider.ignore lives in Prefect (block + Variable): use the same API
    # as every other canary command (PREFECT_API_URL, else the embedded local server).
    from ground.prefect_server import use_api

    with use_api(settings) as api_url:
        typer.echo(
            f"reading provider.ignore from the Prefect API at {api_url}"
            " (GET /healthz: ready once every workload model's list is loaded)"
        )
        run_serving(run())


def _pct(x: float) -> str:
    return f"{x * 100:.1f}%"


def print_report(since: str, r: dict[str, Any]) -> None:
    """The R11 table, one figure a line, then latency by final route and the warning."""
    typer.echo(f"gateway since {since}: {r['requests']} requests, {r['accepted']} accepted")
    rows = [
        ("fallback rate", _pct(r["fallback_rate"])),
        ("attempts per completed request", f"{r['attempts_per_completed_request']:.2f}"),
        ("deadline exhaustion", _pct(r["deadline_exhaustion_rate"])),
        ("HTTP success", f"{_pct(r['http_success_rate'])} of attempts"),
        (
            "validation rejection",
            f"{_pct(r['validation_rejection_rate'])} of HTTP-successful attempts",
        ),
        ("ambiguous outcomes", str(r["ambiguous"])),
        ("cost per accepted answer", f"${r['cost_per_accepted_usd']:.6f}"),
    ]
    for label, value in rows:
        typer.echo(f"  {label:<32}{value}")
    typer.echo("  latency by final route (accepted requests)")
    for route, lat in sorted(r["latency_ms_by_final_route"].items()):
        typer.echo(
            f"    {route:<28}p50 {lat['p50_ms']:.0f} ms, p95 {lat['p95_ms']:.0f} ms"
            f" ({lat['requests']} requests)"
        )
    if not r["latency_ms_by_final_route"]:
        typer.echo("    (none accepted)")
    if r["warning"]:
        typer.echo(f"warning: {r['warning']}")


@app.command()
@cli_errors
def report(
    since: Annotated[
        str, typer.Option("--since", help="How far back: 30m, 1h, 12h, 7d.", metavar="DURATION")
    ] = "1h",
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as JSON.")] = False,
) -> None:
    """The router's own figures from the ledger: fallback rate, attempts per completed
    request, deadline exhaustion, validation rejection next to HTTP success, ambiguous
    outcomes, cost per accepted answer, latency by final route; and a warning in words when
    HTTP success holds or rises while validation rejection rises."""
    from routing.report import router_report

    settings = settings_or_exit()
    start = since_or_exit(since, utc_now())
    figures = router_report(settings.resolved_ledger_url, since=start, config=settings.routing)
    if as_json:
        typer.echo(json.dumps({"since": start.isoformat(), **figures}, indent=2, default=str))
        return
    print_report(f"{start:%Y-%m-%d %H:%M}Z ({since})", figures)
