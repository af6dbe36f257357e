"""`canary fleet serve`: run the local OpenRouter-compatible fleet."""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_show_locals=False)


@app.callback()
def _group() -> None:
    """The local OpenRouter-compatible provider fleet (a stand-in for OpenRouter)."""


@app.command()
def serve(
    scenario: str = typer.Option(
        "seed-incidents", "--scenario", help="Built-in scenario name or a YAML/TOML file."
    ),
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int = typer.Option(8600, "--port", min=0, max=65535),
    time_scale: float | None = typer.Option(
        None, "--time-scale", help="Multiply every scripted delay (0.1 = 10x faster)."
    ),
    seed: int | None = typer.Option(None, "--seed", help="Override the scenario's seed."),
    log_level: str = typer.Option("warning", "--log-level"),
) -> None:
    """Serve SCENARIO under http://HOST:PORT/api/v1 until interrupted."""
    import uvicorn

    from fleet.app import create_app
    from fleet.scenario import ScenarioError, load_scenario, parse_scenario
    from ground.settings import load_settings

    try:
        spec = load_scenario(scenario)
        overrides = {k: v for k, v in (("time_scale", time_scale), ("seed", seed)) if v is not None}
        if overrides:
            spec = parse_scenario({**spec.model_dump(mode="json"), **overrides}, scenario)
    except ScenarioError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    key = load_settings().fleet_key.get_secret_value()
    config = uvicorn.Config(
        create_app(spec, key=key),
        host=host,
        port=port,
        log_level=log_level,
        http="h11",
        loop="asyncio",
        lifespan="off",
    )
    server = uvicorn.Server(config)

    async def announce_and_serve() -> None:
        import asyncio

        task = asyncio.create_task(server.serve())
        while not server.started and not task.done():
            await asyncio.sleep(0.02)
        if server.started:
            bound = server.servers[0].sockets[0].getsockname()[1]
            base = f"http://{host}:{bound}/api/v1"
            typer.echo(
                f"fleet '{spec.name}' serving {len(spec.models)} models at {base} (time_scale {spec.time_scale}, seed {spec.seed})"
            )
            typer.echo(f"key: {key}   (the local fleet key, CANARY_FLEET_KEY)")
            typer.echo(f"try: curl -s {base}/models/{spec.models[0].id}/endpoints")
            typer.echo(
                f"     curl -sN {base}/chat/completions -H 'Authorization: Bearer {key}' -H 'Content-Type: application/json' "
                f"""-d '{{"model":"{spec.models[0].id}","stream":true,"messages":[{{"role":"user","content":"Continue the scene."}}],"provider":{{"only":["{spec.models[0].endpoints[0].tag}"],"allow_fallbacks":false}}}}'"""
            )
            typer.echo(
                f"controls: GET/DELETE http://{host}:{bound}/_fleet/requests, GET/POST http://{host}:{bound}/_fleet/scenario",
                nl=True,
            )
        await task

    import asyncio

    asyncio.run(announce_and_serve())
