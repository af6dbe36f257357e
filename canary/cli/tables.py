"""Terminal output of the CLI (rich tables). Presentation only."""

from __future__ import annotations

import logging
from typing import Any

from rich.console import Console
from rich.table import Table

console = Console()


_RUN_LOGGERS = ("prefect.flow_runs", "prefect.task_runs", "prefect.engine")


class _QuietRunLogs(logging.Filter):
    """Keep flow- and task-run INFO lines (per-endpoint progress, started/finished, the
    run's address) out of the terminal, and every line of the `also` loggers; warnings and
    errors of the run loggers still show."""

    def __init__(self, also: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.also = also

    def filter(self, record: logging.LogRecord) -> bool:
        if self.also and record.name.startswith(self.also):
            return False
        return not (record.name.startswith(_RUN_LOGGERS) and record.levelno < logging.WARNING)


def quiet_task_logs(verbose: bool = False, also: tuple[str, ...] = ()) -> None:
    """Unless `verbose`, keep Prefect's run log lines (and the `also` loggers) out of the
    terminal. Only the console handler is filtered: every run line still reaches the Prefect
    API, so the UI's logs are complete."""
    from prefect.logging.configuration import ensure_logging_setup
    from prefect.logging.handlers import PrefectConsoleHandler

    ensure_logging_setup()
    if verbose:
        return
    for handler in logging.getLogger().handlers:
        if isinstance(handler, PrefectConsoleHandler) and not any(
            isinstance(f, _QuietRunLogs) for f in handler.filters
        ):
            handler.addFilter(_QuietRunLogs(also))


def _short_time(value: str | None) -> str:
    """An ISO time as `2026-11-04 00:30Z` (never cut: the column does not wrap)."""
    return f"{value[:10]} {value[11:16]}Z" if value else ""


_VERDICT_STYLE = {"failed": "bold red", "frozen": "yellow", "clean": "green", "unjudged": "cyan"}
_VERDICT_SHOWN = {"unjudged": "not judged"}  # a round that proved nothing is no clean one


def print_round(summary: Any) -> None:
    table = Table(title=f"{summary.round_id}  ({summary.mode})", title_justify="left")
    for col in ("endpoint", "locale", "verdict", "reasons"):
        table.add_column(col)
    for tag, locale, verdict, reasons in summary.endpoints:
        style = _VERDICT_STYLE.get(verdict, "")
        table.add_row(tag, locale, f"[{style}]{verdict}[/]" if style else verdict, reasons)
    console.print(table)
    if summary.controls:
        weak = " -> WEAK refusal probe this round" if summary.weak_refusal_probe else ""
        console.print(
            "controls: " + ", ".join(f"{t}={s}" for t, s in sorted(summary.controls.items())) + weak
        )
    for tag, lines in sorted((getattr(summary, "unjudged", None) or {}).items()):
        console.print(f"[cyan]not judged[/] {tag}: {'; '.join(lines)}", overflow="fold")
    print_round_bill(summary)
    for d in summary.decisions:
        until = f" until {d['until']}" if d.get("until") else ""
        console.print(
            f"[bold]{d['kind']}[/] {d['tag']}{until}: {'; '.join(d.get('evidence') or []) or d['reason']}"
        )
    print_ignore(summary.ignore)


def print_round_bill(summary: Any) -> None:
    """The round's cost and how it ran for the budget (C13)."""
    total = (getattr(summary, "bill", None) or {}).get("total")
    budget = getattr(summary, "budget", None) or {}
    if total:
        estimated = (
            f", {_usd(total['estimated_usd'])} estimated" if total["estimated_requests"] else ""
        )
        console.print(
            f"cost: {_usd(total['usd'])} ({total['requests']} requests, "
            f"{total['prompt_tokens'] + total['completion_tokens']} tokens{estimated})"
        )
    if budget and budget.get("level") != "full":
        console.print(
            f"[bold yellow]budget: {budget['level']}[/]: {budget['reason']}", overflow="fold"
        )


def print_ignore(ignore: list[dict[str, Any]]) -> None:
    if not ignore:
        console.print("provider.ignore: []")
        return
    table = Table(
        title="provider.ignore", title_justify="left", box=None, padding=(0, 1), pad_edge=False
    )
    for column in ("tag", "layer", "until"):
        table.add_column(column, no_wrap=True)
    table.add_column("reason", overflow="fold")
    for e in ignore:
        table.add_row(e["tag"], e["layer"], _short_time(e.get("until")), e.get("reason", ""))
    console.print(table)


_STATE_STYLE = {
    "suspended": "bold red",
    "shadow-suspended": "magenta",
    "excluded": "yellow",
    "active": "green",
}


def print_status(status: dict[str, Any]) -> None:
    """Per endpoint: state (and the layer keeping it out of traffic), until, rung, streaks and
    the last round's verdict; then why each endpoint that is out of traffic is out."""
    table = Table(
        title=f"{status['model']}  (mode {status['mode']})",
        title_justify="left",
        box=None,
        padding=(0, 1),
        pad_edge=False,
    )
    table.add_column("endpoint", no_wrap=True)
    table.add_column("state", no_wrap=True)
    table.add_column("until", no_wrap=True)
    table.add_column("rung", justify="right", no_wrap=True)
    table.add_column("fail/clean", justify="right", no_wrap=True)
    table.add_column("last round", no_wrap=True)
    providers = status["providers"]
    order = list(_STATE_STYLE)
    tags = sorted(providers, key=lambda t: (order.index(providers[t]["state"]), t))
    last_times = {p["last_round"]["at"] for p in providers.values() if p["last_round"]["at"]}
    for tag in tags:
        p = providers[tag]
        style = _STATE_STYLE.get(p["state"], "")
        table.add_row(
            tag,
            f"[{style}]{p['state']}[/]" if style else p["state"],
            _short_time(p.get("suspended_until")),
            str(p["suspensions"]),
            f"{p['consecutive_failed_rounds']}/{p['consecutive_clean_rounds']}",
            _VERDICT_SHOWN.get(p["last_round"]["verdict"], p["last_round"]["verdict"] or "-"),
        )
    console.print(table)
    if len(last_times) == 1:
        console.print(f"last round at {_short_time(last_times.pop())}")
    out = [t for t in tags if providers[t]["state"] != "active"]
    failing = [
        t
        for t in tags
        if providers[t]["state"] == "active" and providers[t]["last_round"]["reasons"]
    ]
    if out or failing:
        console.print("why:")
    for tag in out:
        p = providers[tag]
        layer = f" ({p['layer']})" if p.get("layer") else ""
        console.print(f"  {tag}{layer}: {p['reason']}", overflow="fold")
    for tag in failing:
        reasons = ", ".join(providers[tag]["last_round"]["reasons"])
        console.print(f"  {tag}: failed its last round: {reasons}", overflow="fold")
    print_evidence_and_bill(status)
    console.print(f"provider.ignore: {status['ignore']}")


def print_evidence_and_bill(status: dict[str, Any]) -> None:
    """What the last round could not judge per endpoint (C5), the contracts each endpoint is
    held to, the refusal contract's standing, and the day's bill and forecast (C13)."""
    providers = status["providers"]
    unjudged = {t: p["last_round"].get("why", "") for t, p in sorted(providers.items())
                if p["last_round"]["verdict"] == "unjudged"}  # fmt: skip
    if unjudged:
        console.print("not judged in their last round (no evidence of health):")
        for tag, why in unjudged.items():
            console.print(f"  {tag}: {why.removeprefix('not judged: ')}", overflow="fold")
    groups: dict[str, list[str]] = {}
    for tag, p in sorted(providers.items()):
        groups.setdefault(", ".join(p.get("held_to") or []) or "(not seen yet)", []).append(tag)
    for held, tags in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        who = f"{len(tags)} endpoints" if len(tags) > 3 else ", ".join(tags)
        console.print(f"held to {held}: {who}", overflow="fold")
    refusal = status.get("refusal") or {}
    if refusal.get("line"):
        style = (
            "bold yellow" if "unverified" in refusal["line"] or "weak" in refusal["line"] else ""
        )
        console.print(
            f"[{style}]{refusal['line']}[/]" if style else refusal["line"], overflow="fold"
        )
    bill = status.get("bill")
    if bill:
        budget = f" of {_usd(bill['budget_usd'])}" if bill.get("budget_usd") else ""
        console.print(
            f"bill {bill['day']}: spent {_usd(bill['spent_usd'])}{budget} ({bill['rounds']} "
            f"rounds, {bill['requests']} requests, {bill['tokens']} tokens); forecast "
            f"{_usd(bill['forecast_usd'])} for the day at {bill['rounds_per_day']} rounds a day "
            f"(last round {_usd(bill['last_round_usd'])}, level {bill['level']})",
            overflow="fold",
        )


def _usd(value: float) -> str:
    return f"${value:.4f}" if value < 1 else f"${value:.2f}"


def print_exclusions(model: str, rows: list[dict[str, Any]]) -> None:
    """Built-in and runtime incident exclusions of a model."""
    if not rows:
        console.print(f"{model}: no built-in or runtime incident exclusions")
        return
    table = Table(title=model, title_justify="left", box=None, padding=(0, 1), pad_edge=False)
    for column in ("tag", "layer", "until", "by"):
        table.add_column(column, no_wrap=True)
    table.add_column("reason", overflow="fold")
    for r in rows:
        until = _short_time(r["until"]) or "-"
        if not r["active"]:
            until += " (expired)"
        table.add_row(r["tag"], r["layer"], until, r["by"], r["reason"])
    console.print(table)


def print_history(model: str, tag: str, history: Any) -> None:
    """One endpoint's rounds and decisions (a frame from `reports.frames.endpoint_history`):
    one line per round or decision, its evidence indented below it (wrapped, never cut)."""
    from rich.padding import Padding
    from rich.text import Text

    console.print(f"[bold]{tag}[/] ({model}): {len(history)} rounds and decisions")
    for row in history.itertuples():
        what = str(row.what)
        style = "bold" if what.startswith("decision") else _VERDICT_STYLE.get(what, "")
        line = Text(f"{row.at:%Y-%m-%d %H:%M}Z  ")
        line.append(what, style=style)
        if row.detail:
            line.append(f"  {row.detail}")
        console.print(line)
        if row.evidence:
            console.print(Padding(Text(str(row.evidence), overflow="fold"), (0, 0, 0, 4)))


def print_triage(result: Any) -> None:
    data = result if isinstance(result, dict) else result.model_dump(mode="json")
    console.print(f"triage {data.get('provider')} ({data.get('model')}):")
    for o in data.get("outcomes", []):
        console.print(
            f"  {o['contract']:<10} {o['status']:<12} {o['reason']}"
            + (f"  ttft={o['ttft_s']:.3f}s" if o.get("ttft_s") is not None else "")
        )
    if data.get("artifact"):
        console.print(f"transcripts: artifact {data['artifact']}")
