"""The health report of one model over a window: frames, figures, and a self-contained HTML
page (figures embedded as PNG data, no script, no network) plus the PNG files.

    report = build_report(
        probes, decisions, model=M, now=now, since=since, ttft_bar_s=10, clean_rounds=2
    )
    paths = write_report(report, out_dir)          # report.html + one PNG per figure

`build_report` is pure (ledger frames and `now` in); `read_ledger` and `write_report` are
the only I/O, and `report_for` chains the three.
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from reports import frames, plots

FIGURES = {
    "verdict_timeline": "Verdict per round and endpoint",
    "failure_rates": "Failure rate by contract and endpoint",
    "ttft": "Time to first token per endpoint",
    "suspensions": "Suspensions over time",
    "daily_spend": "The canary's daily spend",
}


@dataclass
class Report:
    model: str
    since: datetime
    now: datetime
    ttft_bar_s: float
    probes: pd.DataFrame
    decisions: pd.DataFrame
    matrix: pd.DataFrame
    rates: pd.DataFrame
    ttft: pd.DataFrame
    intervals: pd.DataFrame
    false_positives: pd.DataFrame
    estimate: dict[str, Any]
    endpoints_table: pd.DataFrame
    rounds_frame: pd.DataFrame = field(default_factory=pd.DataFrame)  # one row per round
    spend: pd.DataFrame = field(default_factory=pd.DataFrame)  # per day (C13)
    bill: dict[str, Any] = field(default_factory=dict)  # today's spend and forecast
    refusal: dict[str, int] = field(default_factory=dict)  # rounds per refusal standing
    figures: dict[str, Figure] = field(default_factory=dict)

    @property
    def endpoints(self) -> list[str]:
        return sorted(self.probes["tag"].unique()) if not self.probes.empty else []

    @property
    def rounds(self) -> int:
        return int(self.probes["round_id"].nunique()) if not self.probes.empty else 0

    def summary(self) -> dict[str, Any]:
        """The headline numbers (for the CLI, the summary artifact and tests)."""
        failed = (
            self.probes[self.probes["verdict"] == "failed"]
            if not self.probes.empty
            else self.probes
        )
        return {
            "model": self.model,
            "since": self.since.isoformat(),
            "until": self.now.isoformat(),
            "rounds": self.rounds,
            "endpoints": len(self.endpoints),
            "failed_endpoint_rounds": len(failed),
            "suspensions": int((self.intervals["kind"] == "suspended").sum()),
            "shadow_suspensions": int((self.intervals["kind"] == "shadow").sum()),
            "ttft_over_bar": int(
                ((self.ttft["ttft_s"] > self.ttft_bar_s) | self.ttft["censored"]).sum()
            ),
            "false_positive_estimate": self.estimate,
            "bill": {k: str(v) if k == "day" else v for k, v in self.bill.items()},
            "spent_usd": float(self.spend["cost_usd"].sum()) if not self.spend.empty else 0.0,
            "refusal_probe": self.refusal,
        }


def build_report(
    probes: pd.DataFrame,
    decisions: pd.DataFrame,
    *,
    model: str,
    now: datetime,
    since: datetime,
    ttft_bar_s: float,
    clean_rounds: int,
    rounds: pd.DataFrame | None = None,
    cron: str | None = None,
    budget_usd: float | None = None,
) -> Report:
    """Frames and figures of the report (pure: nothing is read or written); `clean_rounds`
    judged rounds after a would-suspend decision make it a probable false positive.
    `rounds` (the ledger's round rows), `cron` and `budget_usd` give the bill: daily spend,
    today's forecast at the schedule (C13) and the refusal probe's standing (C5)."""
    start = frames.utc(since)
    intervals = frames.suspension_intervals(decisions, now)
    intervals = intervals[intervals["end"] >= start].reset_index(drop=True)
    recent = decisions[decisions["at"] >= start] if not decisions.empty else decisions
    ttft = frames.ttft_samples(probes)
    classified = frames.observe_false_positives(recent, probes, clean_rounds)
    report = Report(
        model=model,
        since=since,
        now=now,
        ttft_bar_s=ttft_bar_s,
        probes=probes,
        decisions=decisions,
        matrix=frames.verdict_matrix(probes),
        rates=frames.contract_failures(probes),
        ttft=ttft,
        intervals=intervals,
        false_positives=classified,
        estimate=frames.false_positive_estimate(classified),
        endpoints_table=frames.endpoint_summary(probes, ttft, intervals),
    )
    _add_bill(report, rounds, cron, budget_usd)
    report.figures = {
        "verdict_timeline": plots.verdict_timeline(report.matrix),
        "failure_rates": plots.failure_rates(report.rates),
        "ttft": plots.ttft_distribution(report.ttft, ttft_bar_s),
        "suspensions": plots.suspension_timeline(intervals, start, frames.utc(now)),
        "daily_spend": plots.daily_spend(report.spend, budget_usd),
    }
    return report


def _add_bill(
    report: Report, rounds: pd.DataFrame | None, cron: str | None, budget_usd: float | None
) -> None:
    """The report's bill (C13) and refusal-probe standing (C5), from the round rows."""
    frame = rounds if rounds is not None else pd.DataFrame()
    if not frame.empty:
        frame = frame[frame["at"] >= frames.utc(report.since)]
    report.rounds_frame = frame
    report.spend = frames.daily_spend(frame)
    report.bill = frames.day_bill(frame, report.now, cron, budget_usd)
    report.refusal = frames.refusal_standing(frame)


def read_rounds(ledger_url: str, model: str, since: datetime) -> pd.DataFrame:
    """The model's round rows (what each round cost) since `since`."""
    from quarantine.adapters.ledger import Ledger

    ledger = Ledger(ledger_url)
    try:
        return ledger.rounds_frame(model, since=since)
    finally:
        ledger.close()


def read_ledger(ledger_url: str, model: str, since: datetime) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The model's probe rows and decisions since `since` (the decisions from one window
    earlier too, so a suspension that began before the window is drawn)."""
    from quarantine.adapters.ledger import Ledger

    ledger = Ledger(ledger_url)
    try:
        probes = ledger.probes_frame(model, since=since)
        decisions = ledger.decisions_frame(model, since=since - timedelta(days=14))
    finally:
        ledger.close()
    return probes, decisions


def window_end(probes: pd.DataFrame, now: datetime) -> datetime:
    """The report's end: `now`, or the last round recorded if that is later (rounds run at
    logical times, e.g. a replay or the demo's rounds ahead of the clock)."""
    if probes.empty:
        return now
    latest = probes["at"].max().to_pydatetime()
    return max(now, latest)


def _table(frame: pd.DataFrame, columns: list[str]) -> str:
    if frame.empty:
        return "<p>None.</p>"
    shown = frame[columns].copy()
    for column in shown.columns:
        if pd.api.types.is_datetime64_any_dtype(shown[column]):
            shown[column] = shown[column].dt.strftime("%Y-%m-%d %H:%M")
    return shown.to_html(index=False, escape=True, na_rep="", float_format=lambda v: f"{v:.2f}")


def _estimate_text(estimate: dict[str, Any]) -> str:
    if not estimate["would_suspend"]:
        return "No would-suspend decisions (observe mode) in this window."
    value = estimate["estimate"]
    share = "not defined yet" if value is None else f"{value:.0%}"
    return (
        f"{estimate['would_suspend']} would-suspend decision(s): {estimate['false_positive']} "
        f"probable false positive(s), {estimate['confirmed']} confirmed, {estimate['changed']} "
        f"changed at the provider, {estimate['undetermined']} undetermined. "
        f"Estimated false-positive share: <b>{share}</b> (an upper bound: a silent fix at "
        "the provider looks like a false positive)."
    )


def _usd(value: float) -> str:
    return f"${value:.4f}" if value < 1 else f"${value:,.2f}"


def _bill_text(bill: dict[str, Any]) -> str:
    """Today's spend and forecast (C13), HTML-safe (numbers and a date only)."""
    if not bill:
        return "The canary's bill: no rounds recorded."
    budget = f" of the daily budget {_usd(bill['budget_usd'])}" if bill.get("budget_usd") else ""
    text = (
        f"The canary's bill on {bill['day']}: spent <b>{_usd(bill['spent_usd'])}</b>{budget} "
        f"in {bill['rounds']} round(s)"
    )
    if bill.get("forecast_usd") is not None:
        text += (
            f"; forecast <b>{_usd(bill['forecast_usd'])}</b> for the day at "
            f"{bill['rounds_per_day']} rounds a day (last round {_usd(bill['last_round_usd'])})"
        )
    return text + "."


def _refusal_text(refusal: dict[str, int]) -> str:
    """The refusal probe's standing over the window (C5)."""
    if not refusal:
        return "Refusal contract: no rounds recorded."
    counts = ", ".join(f"{n} {k}" for k, n in refusal.items())
    warn = (
        " <b>The refusal contract was unverified</b>: no positive control judged the probe "
        "(configure CANARY_CONTROL_PROVIDERS)."
        if refusal.get("unverified")
        else ""
    )
    return f"Refusal probe per round: {html.escape(counts)}.{warn}"


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
img { max-width: 100%; border: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.9em; } td, th { border: 1px solid #ccc;
padding: 3px 8px; text-align: left; vertical-align: top; } th { background: #f2f2f2; }
.note { color: #555; }
"""


def render_html(report: Report, pngs: dict[str, str]) -> str:
    """The page: headline numbers, each figure (as embedded PNG data), and the tables
    behind the suspensions and the false-positive estimate. `pngs` maps figure names to
    base64 PNG data."""
    s = report.summary()
    esc = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>provider-canary report: {esc(report.model)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>provider-canary report: {esc(report.model)}</h1>",
        f'<p class="note">Window {report.since:%Y-%m-%d %H:%M}Z to {report.now:%Y-%m-%d %H:%M}Z '
        f"(logical round times, UTC), built from the ledger.</p>",
        "<ul>",
        f"<li>{s['rounds']} rounds, {s['endpoints']} endpoints, "
        f"{s['failed_endpoint_rounds']} failed endpoint-rounds</li>",
        f"<li>{s['suspensions']} suspension(s), {s['shadow_suspensions']} shadow suspension(s)</li>",
        f"<li>{s['ttft_over_bar']} requests without a first token within the "
        f"{report.ttft_bar_s:g} s bar</li>",
        f"<li>Observe mode: {_estimate_text(report.estimate)}</li>",
        f"<li>{_bill_text(report.bill)}</li>",
        f"<li>{_refusal_text(report.refusal)}</li>",
        "</ul>",
        '<h2 id="endpoints">Endpoints</h2>',
        _table(
            report.endpoints_table,
            [
                "tag",
                "rounds",
                "failed",
                "frozen",
                "not_judged",
                "ttft_median_s",
                "ttft_max_s",
                "suspensions",
                "shadow",
                "last_verdict",
            ],
        ),
    ]
    for name, title in FIGURES.items():
        parts += [
            f'<h2 id="{name}">{esc(title)}</h2>',
            f'<img alt="{esc(title)}" src="data:image/png;base64,{pngs[name]}">',
        ]
        if name == "failure_rates":
            failing = report.rates[report.rates["failed"] > 0]
            parts.append(
                _table(failing, ["tag", "contract", "failed", "judged", "rate", "reasons"])
            )
        if name == "daily_spend":
            parts.append(_table(report.spend, list(frames.SPEND_COLUMNS)))
        if name == "suspensions":
            parts.append(
                _table(
                    report.intervals, ["tag", "kind", "start", "end", "ended_by", "rung", "reasons"]
                )
            )
    parts += [
        '<h2 id="false_positives">Observe mode: false-positive estimate</h2>',
        f"<p>{_estimate_text(report.estimate)}</p>",
        '<p class="note">A would-suspend decision counts as a probable false positive when '
        "the endpoint's next two judged rounds were clean, the failing contracts never failed "
        "again in the window, and the provider name serving it did not change.</p>",
        _table(report.false_positives, ["tag", "at", "reasons", "verdict", "why"]),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def write_report(report: Report, out_dir: Path) -> dict[str, Path]:
    """Write one PNG per figure and `report.html` (PNGs embedded) into `out_dir`."""
    import base64

    out_dir.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    encoded: dict[str, str] = {}
    for name, fig in report.figures.items():
        data = plots.png(fig)
        path = out_dir / f"{name}.png"
        path.write_bytes(data)
        paths[name] = path
        encoded[name] = base64.b64encode(data).decode("ascii")
    page = out_dir / "report.html"
    page.write_text(render_html(report, encoded), encoding="utf-8")
    paths["html"] = page
    return paths


def close(report: Report) -> None:
    for fig in report.figures.values():
        plots.close(fig)


@contextmanager
def open_report(
    ledger_url: str,
    model: str,
    *,
    now: datetime,
    since: datetime,
    ttft_bar_s: float,
    clean_rounds: int,
    cron: str | None = None,
    budget_usd: float | None = None,
) -> Iterator[Report]:
    """Read the ledger and build the report of `model` since `since`; its figures are
    closed when the block ends."""
    probes, decisions = read_ledger(ledger_url, model, since)
    report = build_report(
        probes,
        decisions,
        model=model,
        now=window_end(probes, now),
        since=since,
        ttft_bar_s=ttft_bar_s,
        clean_rounds=clean_rounds,
        rounds=read_rounds(ledger_url, model, since),
        cron=cron,
        budget_usd=budget_usd,
    )
    try:
        yield report
    finally:
        close(report)


def report_for(
    ledger_url: str,
    model: str,
    *,
    now: datetime,
    since: datetime,
    ttft_bar_s: float,
    clean_rounds: int,
    out_dir: Path,
    cron: str | None = None,
    budget_usd: float | None = None,
) -> tuple[Report, dict[str, Path]]:
    """Read the ledger, build the report and write it (figures closed afterwards)."""
    with open_report(
        ledger_url,
        model,
        now=now,
        since=since,
        ttft_bar_s=ttft_bar_s,
        clean_rounds=clean_rounds,
        cron=cron,
        budget_usd=budget_usd,
    ) as report:
        return report, write_report(report, out_dir)
