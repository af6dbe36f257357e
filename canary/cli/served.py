"""`canary served`: which provider served a user's request (SPEC O7), from the ledger.

    canary served --model M --around 2026-12-01T12:00Z [--window 15m] [--json]
    canary served --request req-…                              (or an operation id)

A request's attempts each carry why they were made: a fallback's reason, or, for a mid-stream
continuation (R15), the cut it continued and on which model.

Reads the gateway's events and the canary's rounds and decisions (`CANARY_LEDGER_URL`; no
Prefect server needed).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime
from typing import Annotated, Any

import typer

from canary.cli.common import ModelOpt, model_or_default, parse_at, settings_or_exit
from canary.cli.errors import BAD_INPUT, cli_errors, exit_with_error
from canary.cli.since import parse_duration

app = typer.Typer()


def _when(value: datetime | None) -> str:
    return f"{value:%Y-%m-%d %H:%M}Z" if value is not None else ""


def _json(value: Any) -> str:
    return json.dumps(
        value, indent=2, default=lambda v: v.isoformat() if isinstance(v, datetime) else str(v)
    )


def _standing(s: Any) -> str:
    """`failed 11:30Z (start:stray_start); would_suspend 11:30Z` or `no canary record`."""
    if s is None:
        return "no canary record of this endpoint"
    parts = []
    if s.verdict:
        why = f" ({', '.join(s.reasons)})" if s.reasons else ""
        parts.append(f"round {s.verdict} {_when(s.verdict_at)}{why}")
    if s.decision:
        until = f" until {_when(s.until)}" if s.until else ""
        parts.append(f"{s.decision} {_when(s.decision_at)}{until}")
    return "; ".join(parts) or f"no round or decision of {s.tag} before then"


def _print_providers(model: str, around: datetime, window: str, rows: list[Any]) -> None:
    total = sum(r.requests for r in rows)
    typer.echo(f"{model} around {_when(around)} ± {window}: {total} requests")
    for r in rows:
        tag = f" [{r.tag}]" if r.tag else ""
        ttft = f"{r.median_ttft_ms:.0f} ms" if r.median_ttft_ms is not None else "n/a"
        rejected = ", ".join(f"{k} {n}" for k, n in r.rejected.items()) or "none"
        continued = f" ({r.continued} continuing a cut stream)" if r.continued else ""
        typer.echo(
            f"  {r.provider}{tag}: {r.requests} requests, {r.attempts} attempts,"
            f" {r.accepted} accepted{continued}, rejected: {rejected};"
            f" median first token {ttft}"
        )
        if r.provider != "(no reply)":
            typer.echo(f"      canary then: {_standing(r.standing)}")


def _print_trail(trail: Any) -> None:
    req = trail.request or {}
    if req:
        typer.echo(
            f"request {req.get('request_id')} (operation {req.get('operation_id')}),"
            f" {req.get('workload')} at {_when(req.get('at'))}: {req.get('outcome')}"
            f" on {req.get('final_route')} by {req.get('final_provider')},"
            f" {req.get('attempts')} attempts, {req.get('latency_ms', 0):.0f} ms"
        )
    for a in trail.attempts:
        tag = f" [{a['provider_tag']}]" if a.get("provider_tag") else ""
        result = f"{a['failure_class']} ({a['reason']})" if a["failure_class"] else "accepted"
        budget = f"budget {a['budget_ms']:.0f} ms" if a.get("budget_ms") is not None else ""
        if a.get("ttft_budget_ms") is not None:
            budget += f", first token {a['ttft_budget_ms']:.0f} ms"
        excluded = f"; excluded {a['excluded']}" if a.get("excluded") else ""
        note = f"; {a['note']}" if a.get("note") else ""
        typer.echo(
            f"  #{a['attempt_index']} {a['route_id']} {a['model']} by {a['provider'] or '-'}{tag}:"
            f" {result}, HTTP {a['status_code']}, {a['latency_ms']:.0f} ms; {budget}{excluded}"
            f"{note}"
        )


@app.command("served")
@cli_errors
def served_cmd(
    model: ModelOpt = None,
    around: Annotated[
        str | None, typer.Option("--around", help="ISO-8601 time of the user's report.")
    ] = None,
    window: Annotated[
        str, typer.Option("--window", help="How far either side of --around: 15m, 1h.")
    ] = "15m",
    request: Annotated[
        str | None, typer.Option("--request", help="A request id (X-Request-Id) or operation id.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Which providers served a model around a time, with their canary standing then; or one
    request's attempts (read from the ledger; no Prefect server needed)."""
    settings = settings_or_exit()
    url = settings.resolved_ledger_url
    if request is not None:
        from routing.served import request_trail

        trail = request_trail(url, request)
        if trail is None:
            exit_with_error(f"no request or operation {request!r} in the ledger")
        if as_json:
            typer.echo(_json(asdict(trail)))
        else:
            _print_trail(trail)
        return
    when = parse_at(around, "--around")
    if when is None:
        exit_with_error("give --around ISO-8601 (with --model), or --request ID", BAD_INPUT)
    try:
        span = parse_duration(window)
    except ValueError:
        exit_with_error(f"--window takes a duration such as 15m or 1h, got {window!r}", BAD_INPUT)
    from routing.served import served_around

    target = model_or_default(settings, model)
    rows = served_around(url, target, when, span)
    if not rows:
        exit_with_error(f"no attempts of {target!r} within {window} of {_when(when)} in the ledger")
    if as_json:
        typer.echo(_json([asdict(r) for r in rows]))
        return
    _print_providers(target, when, window, rows)
