"""Terminal output of the CLI (rich tables). Presentation only."""

from __future__ import annotations

import logging
from typing import Any

from rich.console import Console
from rich.table import Table

console = Console()


def quiet_task_logs() -> None:
    """Keep the console to per-endpoint progress lines: task-run chatter (started,
    finished) stays in the Prefect UI, where the audit log is."""
    logging.getLogger("prefect.task_runs").setLevel(logging.WARNING)


_VERDICT_STYLE = {"failed": "bold red", "frozen": "yellow", "clean": "green"}


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
    for d in summary.decisions:
        until = f" until {d['until']}" if d.get("until") else ""
        console.print(
            f"[bold]{d['kind']}[/] {d['tag']}{until}: {'; '.join(d.get('evidence') or []) or d['reason']}"
        )
    print_ignore(summary.ignore)


def print_ignore(ignore: list[dict[str, Any]]) -> None:
    if not ignore:
        console.print("provider.ignore: []")
        return
    console.print("provider.ignore:")
    for e in ignore:
        until = f" until {e['until']}" if e.get("until") else ""
        console.print(f"  {e['tag']:<22} {e['layer']:<9}{until}  {e.get('reason', '')}")


def print_status(status: dict[str, Any]) -> None:
    table = Table(title=f"{status['model']}  (mode {status['mode']})", title_justify="left")
    for col in ("endpoint", "state", "suspended_until", "failed", "clean", "rung"):
        table.add_column(col)
    for tag, p in sorted(status["providers"].items()):
        table.add_row(
            tag,
            p["state"],
            str(p.get("suspended_until") or ""),
            str(p["consecutive_failed_rounds"]),
            str(p["consecutive_clean_rounds"]),
            str(p["suspensions"]),
        )
    console.print(table)
    console.print(f"provider.ignore: {status['ignore']}")


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
