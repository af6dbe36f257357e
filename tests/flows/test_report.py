"""The health report (O3, Q3) from a ledger built by real rounds against the fleet: the
frames, the figures (their endpoints and counts), the HTML page, the observe-mode
false-positive estimate, the daily report flow's summary artifact, and `canary report` /
`canary history` on the same ledger."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from matplotlib.collections import PolyCollection
from prefect import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
from typer.testing import CliRunner

from canary.cli import app
from flows.canary_round import RoundSummary, canary_round
from flows.report import daily_report, report_key
from ground.settings import load_settings
from reports.build import build_report, read_ledger, read_rounds, write_report
from reports.frames import VERDICT_CODES
from tests.fixtures.canary_env import STRAY, TTFT_THRESHOLD_S, endpoint, load_model
from tests.fixtures.fleet import FleetHandle

# replies judged for their start per endpoint and round: the start samples, the
# refusal and the language reply
REPLIES = load_settings().probe.start_samples + 2

MODEL = "test/report"
TAGS = ["a/fp8", "b/fp8", "bad/fp8", "blip/fp8", "c/fp8"]
HALF_HOUR = timedelta(minutes=30)


def _scenario(blip_broken: bool) -> list[dict]:
    return [
        endpoint("a/fp8"),
        endpoint("b/fp8"),
        endpoint("c/fp8"),
        endpoint("bad/fp8", defects=STRAY),
        endpoint("blip/fp8", defects=STRAY if blip_broken else []),
    ]


def _labels(ticks: list) -> list[str]:
    return [t.get_text() for t in ticks]


async def test_o3_q3_report_from_real_rounds_plots_endpoints_counts_and_false_positives(
    canary_env: FleetHandle, tmp_path: Path
) -> None:
    """Four observe rounds (two hosts fail twice: would-suspend both; one is then fixed and
    stays clean) and two enforce rounds (the other is suspended). The report's figures
    name every endpoint and carry the counts of the ledger; the false-positive estimate
    counts the fixed host as a probable false positive and the other as confirmed."""
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    t0 = now.replace(minute=0) - timedelta(hours=6)
    load_model(canary_env, MODEL, _scenario(blip_broken=True))
    times = [t0 + HALF_HOUR * n for n in range(6)]
    for n, at in enumerate(times):
        if n == 2:
            load_model(canary_env, MODEL, _scenario(blip_broken=False))
        summary = await canary_round(model=MODEL, mode="observe" if n < 4 else "enforce", at=at)
        assert isinstance(summary, RoundSummary)

    settings = load_settings()
    probes, decisions = read_ledger(settings.resolved_ledger_url, MODEL, t0 - HALF_HOUR)
    kinds = sorted(zip(decisions["kind"], decisions["tag"], strict=True))
    assert ("would_suspend", "bad/fp8") in kinds and ("would_suspend", "blip/fp8") in kinds
    assert ("reinstated_early", "blip/fp8") in kinds and ("suspended", "bad/fp8") in kinds
    rounds = read_rounds(settings.resolved_ledger_url, MODEL, t0 - HALF_HOUR)
    report = build_report(
        probes, decisions, model=MODEL, now=times[-1], since=t0 - HALF_HOUR,
        ttft_bar_s=TTFT_THRESHOLD_S, clean_rounds=settings.policy.clean_rounds,
        rounds=rounds, cron=settings.round_cron,
    )  # fmt: skip

    # verdict timeline: every endpoint, 6 rounds, the ledger's count of failed endpoint-rounds
    failed_rounds = int((probes["verdict"] == "failed").sum())
    assert failed_rounds >= 8  # bad 6 times, blip twice
    assert (report.matrix.loc["bad/fp8"] == VERDICT_CODES["failed"]).all()
    assert list(report.matrix.loc["blip/fp8"].iloc[:2]) == [VERDICT_CODES["failed"]] * 2
    ax = report.figures["verdict_timeline"].axes[0]
    assert _labels(ax.get_yticklabels()) == TAGS
    assert f"(6 rounds, {failed_rounds} failed endpoint-rounds)" in ax.get_title()

    # failure rate by contract: "failed/judged" in the right cells
    ax = report.figures["failure_rates"].axes[0]
    assert _labels(ax.get_yticklabels()) == TAGS
    contracts = _labels(ax.get_xticklabels())
    cells = {
        (round(t.get_position()[1]), round(t.get_position()[0])): t.get_text() for t in ax.texts
    }
    start = contracts.index("start")
    assert cells[(TAGS.index("bad/fp8"), start)] == "6/6"
    assert cells[(TAGS.index("blip/fp8"), start)] == "2/6"
    assert cells[(TAGS.index("a/fp8"), start)] == "0/6"

    # TTFT: every endpoint, the bar drawn where it is
    ax = report.figures["ttft"].axes[0]
    assert sorted(_labels(ax.get_yticklabels())) == TAGS
    assert any(
        list(np.asarray(line.get_xdata())) == [TTFT_THRESHOLD_S] * 2 for line in ax.get_lines()
    )
    assert f"{len(report.ttft)} requests" in ax.get_title() and len(report.ttft) >= 6 * 5 * 4

    # suspensions: bad shadow then suspended, blip shadow (reinstated early)
    intervals = report.intervals.set_index(["tag", "kind"])
    assert intervals.loc[("blip/fp8", "shadow"), "ended_by"] == "reinstated_early"
    assert intervals.loc[("bad/fp8", "shadow"), "ended_by"] == "mode_changed"
    assert intervals.loc[("bad/fp8", "suspended"), "ended_by"] == "ongoing"
    ax = report.figures["suspensions"].axes[0]
    assert _labels(ax.get_yticklabels()) == ["bad/fp8", "blip/fp8"]
    assert "(1 suspended, 2 shadow)" in ax.get_title()
    assert len([c for c in ax.collections if isinstance(c, PolyCollection)]) == 3

    # observe mode: the fixed host is a probable false positive, the broken one confirmed
    verdicts = dict(
        zip(report.false_positives["tag"], report.false_positives["verdict"], strict=True)
    )
    assert verdicts == {"bad/fp8": "confirmed", "blip/fp8": "false positive (probable)"}
    assert report.estimate["estimate"] == 0.5

    # C13: the canary's daily spend, from the ledger's round rows, and today's forecast
    assert len(rounds) == 6 and rounds["cost_usd"].gt(0).all()
    assert report.spend["rounds"].sum() == 6
    assert report.spend["cost_usd"].sum() == pytest.approx(rounds["cost_usd"].sum())
    ax = report.figures["daily_spend"].axes[0]
    assert "(6 rounds, $" in ax.get_title()
    bill = report.bill
    assert bill["day"] == times[-1].date() and bill["rounds_per_day"] == 48
    assert bill["forecast_usd"] >= bill["spent_usd"] > 0

    # the page: self-contained, every figure embedded, every endpoint named
    paths = write_report(report, tmp_path / "report")
    page = paths["html"].read_text()
    assert page.count('src="data:image/png;base64,') == 5 and "<script" not in page
    assert "http://" not in page and "https://" not in page  # opens offline
    assert all(tag in page for tag in TAGS) and "<b>50%</b>" in page
    assert "The canary&#x27;s daily spend" in page or "The canary's daily spend" in page
    assert (
        f"The canary's bill on {times[-1].date()}: spent <b>$" in page and "forecast <b>$" in page
    )
    assert "<b>The refusal contract was unverified</b>" in page  # this model has no control
    for name in ("verdict_timeline", "failure_rates", "ttft", "suspensions", "daily_spend"):
        assert paths[name].read_bytes().startswith(b"\x89PNG")

    # the daily report flow publishes a summary artifact pointing at the page
    result = await daily_report(model=MODEL, since_days=1, at=times[-1])
    assert Path(result["html"]).exists() and result["rounds"] == 6
    async with get_client() as client:
        [artifact] = await client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[report_key(MODEL)]))
        )
    assert isinstance(artifact.data, str)  # a markdown artifact
    assert "estimated false-positive share **50%**" in artifact.data
    assert Path(result["html"]).as_uri() in artifact.data
    assert "![verdict per round and endpoint](data:image/png;base64," in artifact.data
    assert "| `bad/fp8` | start | 6 / 6 |" in artifact.data

    # the same ledger from the command line
    runner = CliRunner()
    out = runner.invoke(app, ["report", "--model", MODEL, "--since", "1d", "--out",
                              str(tmp_path / "cli"), "--json"])  # fmt: skip
    assert out.exit_code == 0, out.output
    summary = json.loads(out.output)
    assert summary["rounds"] == 6 and summary["endpoints"] == 5
    assert summary["spent_usd"] > 0 and summary["bill"]["forecast_usd"] is not None
    assert Path(summary["files"]["html"]).exists()
    out = runner.invoke(
        app, ["history", "--model", MODEL, "--provider", "bad/fp8", "--since", "1d"]
    )
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    for expected in (
        "decision: would_suspend",
        "decision: suspended",
        f"{REPLIES} of {REPLIES} replies anomalous",
    ):
        assert expected in text, expected
    assert text.count(" failed ") >= 6  # its six failed rounds
    out = runner.invoke(app, ["history", "--model", MODEL, "--provider", "nope/fp8"])
    assert out.exit_code == 1 and "bad/fp8" in out.output
    out = runner.invoke(app, ["report", "--model", MODEL, "--since", "a week"])
    assert out.exit_code == 2 and "7d" in out.output
