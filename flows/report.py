"""The daily health report (O3) as a flow run: build the report of a model from the ledger
(`reports.build`), write the page and its PNGs under `<CANARY_HOME>/reports/<model-slug>/`,
and publish a summary artifact (`canary-report-<model-slug>`) with the headline numbers, the
verdict timeline inline and where the page is. `canary serve` schedules it once a day.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import acreate_markdown_artifact

from ground.clock import as_utc
from ground.settings import DEFAULT_MODEL, Settings, load_settings
from ground.slugs import model_slug
from reports.build import Report, open_report, write_report
from reports.plots import png

INLINE_DPI = 60  # the timeline shown inside the artifact: small enough to keep it light


def report_dir(settings: Settings, model: str) -> Path:
    return settings.home / "reports" / model_slug(model)


def report_key(model: str) -> str:
    return f"canary-report-{model_slug(model)}"


def summary_markdown(report: Report, paths: dict[str, Path], timeline_png: bytes) -> str:
    """The summary artifact: headline numbers, the timeline, links to the page (pure)."""
    s, est = report.summary(), report.estimate
    share = "not defined yet" if est["estimate"] is None else f"{est['estimate']:.0%}"
    page = paths["html"].resolve()
    out = [
        f"# Health report: `{report.model}`",
        "",
        f"Window {report.since:%Y-%m-%d %H:%M}Z to {report.now:%Y-%m-%d %H:%M}Z: "
        f"{s['rounds']} rounds, {s['endpoints']} endpoints, {s['failed_endpoint_rounds']} "
        f"failed endpoint-rounds, {s['suspensions']} suspension(s), "
        f"{s['shadow_suspensions']} shadow suspension(s), {s['ttft_over_bar']} first tokens "
        f"over the {report.ttft_bar_s:g} s bar.",
        "",
        f"Observe mode: {est['would_suspend']} would-suspend decision(s), "
        f"{est['false_positive']} probable false positive(s), {est['confirmed']} confirmed: "
        f"estimated false-positive share **{share}** (upper bound).",
        "",
        f"![verdict per round and endpoint](data:image/png;base64,{base64.b64encode(timeline_png).decode()})",
        "",
        f"The full page (opens offline): [{page.name}]({page.as_uri()}) at `{page}`; "
        f"figures next to it: {', '.join(f'`{p.name}`' for n, p in paths.items() if n != 'html')}.",
        "",
        f"On any machine with the ledger: `canary report --model {report.model}`.",
    ]
    failing = report.rates[report.rates["failed"] > 0]
    if not failing.empty:
        out += ["", "| endpoint | contract | failed / judged |", "|---|---|---|"]
        for r in failing.sort_values(["rate", "tag"], ascending=[False, True]).itertuples():
            out.append(f"| `{r.tag}` | {r.contract} | {r.failed} / {r.judged} |")
    return "\n".join(out) + "\n"


@flow(name="canary-report", flow_run_name="report {model}")
async def daily_report(
    model: str = DEFAULT_MODEL, since_days: float = 7.0, at: datetime | None = None
) -> dict[str, Any]:
    """Build the report of `model` over the last `since_days` days (before `at`, default
    now), write it and publish the summary artifact."""
    settings = load_settings()
    now = as_utc(at or datetime.now(UTC))
    since = now - timedelta(days=since_days)
    with open_report(
        settings.resolved_ledger_url,
        model,
        now=now,
        since=since,
        ttft_bar_s=settings.probe.ttft_threshold_s,
        clean_rounds=settings.policy.clean_rounds,
        cron=settings.round_cron,
        budget_usd=settings.budget.for_model(model),
    ) as report:
        paths = write_report(report, report_dir(settings, model))
        timeline = png(report.figures["verdict_timeline"], dpi=INLINE_DPI)
        await acreate_markdown_artifact(
            key=report_key(model),
            markdown=summary_markdown(report, paths, timeline),
            description=f"Health report of {model}: {paths['html']}",
        )
    get_run_logger().info("report of %s written to %s", model, paths["html"])
    return {"html": str(paths["html"]), **report.summary()}
