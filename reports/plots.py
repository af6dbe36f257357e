"""The report's figures (matplotlib, Agg backend: no display, files only). Each function
takes a frame from `reports.frames` and returns a Figure whose tick labels and texts carry
the endpoints and counts it shows (what the tests read back).

    verdict_timeline(matrix)         heatmap of rounds x endpoints: clean / frozen / failed
    failure_rates(rates)             heatmap of endpoints x contracts, annotated "k/n"
    ttft_distribution(samples, bar)  box plot per endpoint with the latency bar as a line
    suspension_timeline(intervals)   suspensions and shadow suspensions on a time axis
    daily_spend(spend, budget)       the canary's own cost per day, the budget as a line
"""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")  # before pyplot: files only, never a window

import matplotlib.dates as mdates
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from reports.frames import CONTRACTS, VERDICT_CODES

CLEAN, FROZEN, FAILED, MISSING = "#3a9d5d", "#e0b400", "#d03b3b", "#d9d9d9"
UNJUDGED = "#6fb7d6"  # no evidence either way (C5): neither clean nor failed
SHADOW = "#8f7fd6"
DPI = 110


def _height(rows: int) -> float:
    return max(2.6, 0.28 * rows + 1.6)


def _empty(title: str) -> Figure:
    fig, ax = plt.subplots(figsize=(8, 2))
    ax.set_title(title)
    ax.text(0.5, 0.5, "no data in this window", ha="center", va="center")
    ax.set_axis_off()
    return fig


def verdict_timeline(matrix: pd.DataFrame) -> Figure:
    """Rounds (x) x endpoints (y), coloured by verdict; grey where not probed."""
    title = "Verdict per round and endpoint"
    if matrix.empty:
        return _empty(title)
    values = np.ma.masked_invalid(matrix.to_numpy(dtype=float))
    cmap = ListedColormap([CLEAN, FROZEN, FAILED, UNJUDGED]).with_extremes(bad=MISSING)
    fig, ax = plt.subplots(figsize=(max(8.0, 0.12 * matrix.shape[1] + 4), _height(len(matrix))))
    ax.imshow(values, aspect="auto", cmap=cmap, vmin=0, vmax=len(VERDICT_CODES) - 1,
              interpolation="nearest")  # fmt: skip
    ax.set_yticks(range(len(matrix)), labels=list(matrix.index))
    step = max(1, matrix.shape[1] // 12)
    ticks = list(range(0, matrix.shape[1], step))
    ax.set_xticks(ticks, labels=[f"{matrix.columns[i]:%m-%d %H:%M}" for i in ticks],
                  rotation=45, ha="right")  # fmt: skip
    failed = int((matrix == VERDICT_CODES["failed"]).sum().sum())
    ax.set_title(f"{title} ({matrix.shape[1]} rounds, {failed} failed endpoint-rounds)")
    ax.set_xlabel("round (logical time, UTC)")
    ax.legend(
        handles=[Patch(color=c, label=k) for k, c in
                 (("clean", CLEAN), ("frozen", FROZEN), ("failed", FAILED),
                  ("not judged", UNJUDGED), ("not probed", MISSING))],
        loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False,
    )  # fmt: skip
    fig.tight_layout()
    return fig


def failure_rates(rates: pd.DataFrame) -> Figure:
    """Endpoints (y) x contracts (x), coloured by failure rate, each cell "failed/judged"."""
    title = "Failure rate by contract and endpoint"
    if rates.empty:
        return _empty(title)
    rate = rates.pivot(index="tag", columns="contract", values="rate").reindex(columns=CONTRACTS)
    failed = rates.pivot(index="tag", columns="contract", values="failed").reindex(
        columns=CONTRACTS
    )
    judged = rates.pivot(index="tag", columns="contract", values="judged").reindex(
        columns=CONTRACTS
    )
    fig, ax = plt.subplots(figsize=(10, _height(len(rate))))
    image = ax.imshow(np.ma.masked_invalid(rate.to_numpy(dtype=float)), aspect="auto",
                      cmap="Reds", vmin=0, vmax=1)  # fmt: skip
    for (i, j), n in np.ndenumerate(judged.to_numpy()):
        k = failed.to_numpy()[i, j]
        ax.text(j, i, f"{int(k)}/{int(n)}" if n else "-", ha="center", va="center", fontsize=8,
                color="white" if n and k / n > 0.6 else "black")  # fmt: skip
    ax.set_yticks(range(len(rate)), labels=list(rate.index))
    ax.set_xticks(range(len(CONTRACTS)), labels=list(CONTRACTS))
    ax.set_title(title + " (failed / judged rounds)")
    fig.colorbar(image, ax=ax, label="failure rate")
    fig.tight_layout()
    return fig


def ttft_distribution(samples: pd.DataFrame, bar_s: float) -> Figure:
    """Box plot of every first-token time per endpoint, the latency bar as a line, and the
    requests without any text within the bar as red crosses at the bar."""
    title = "Time to first token per endpoint"
    if samples.empty:
        return _empty(title)
    tags = sorted(samples["tag"].unique(), reverse=True)  # first tag at the top
    timed = samples[~samples["censored"]]
    data = [timed.loc[timed["tag"] == t, "ttft_s"].to_numpy() for t in tags]
    fig, ax = plt.subplots(figsize=(9, _height(len(tags))))
    ax.boxplot(data, orientation="horizontal", tick_labels=tags, showfliers=True)
    censored = samples[samples["censored"]]
    if not censored.empty:
        ys = [tags.index(t) + 1 for t in censored["tag"]]
        ax.scatter(censored["ttft_s"], ys, marker="x", color=FAILED, zorder=3,
                   label="no text within the bar")  # fmt: skip
    ax.axvline(bar_s, color=FAILED, linestyle="--", label=f"bar {bar_s:g} s")
    over = int((timed["ttft_s"] > bar_s).sum()) + len(censored)
    ax.set_title(f"{title} ({len(samples)} requests, {over} over the bar)")
    ax.set_xlabel("seconds")
    ax.legend(loc="lower right")
    fig.tight_layout()
    return fig


def suspension_timeline(intervals: pd.DataFrame, start: pd.Timestamp, end: pd.Timestamp) -> Figure:
    """Each suspension (red) and shadow suspension (violet) of each endpoint on a time axis."""
    title = "Suspensions over time"
    if intervals.empty:
        return _empty(title + ": none in this window")
    tags = sorted(intervals["tag"].unique())
    fig, ax = plt.subplots(figsize=(10, _height(len(tags))))
    for i, tag in enumerate(tags):
        rows = intervals[intervals["tag"] == tag]
        for kind, colour in (("suspended", FAILED), ("shadow", SHADOW)):
            spans = [
                (mdates.date2num(r.start), mdates.date2num(r.end) - mdates.date2num(r.start))
                for r in rows[rows["kind"] == kind].itertuples()
            ]
            if spans:
                ax.broken_barh(spans, (i - 0.35, 0.7), facecolors=colour)
    ax.set_yticks(range(len(tags)), labels=tags)
    ax.set_xlim(mdates.date2num(start), mdates.date2num(end))
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d %H:%M"))
    fig.autofmt_xdate()
    counts = intervals["kind"].value_counts()
    ax.set_title(
        f"{title} ({int(counts.get('suspended', 0))} suspended, "
        f"{int(counts.get('shadow', 0))} shadow)"
    )
    ax.legend(handles=[Patch(color=FAILED, label="suspended (enforce)"),
                       Patch(color=SHADOW, label="shadow (observe)")],
              loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)  # fmt: skip
    fig.tight_layout()
    return fig


def daily_spend(spend: pd.DataFrame, budget_usd: float | None = None) -> Figure:
    """The canary's own cost per UTC day (bars, the estimated part hatched), the daily
    budget as a line, each bar labelled with its dollars."""
    title = "The canary's daily spend"
    if spend.empty:
        return _empty(title)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.6 * len(spend) + 3), 3.6))
    labels = [f"{d:%m-%d}" for d in spend["day"]]
    measured = spend["cost_usd"] - spend["estimated_usd"]
    ax.bar(labels, measured, color=CLEAN, label="from usage / listing prices")
    ax.bar(labels, spend["estimated_usd"], bottom=measured, color=CLEAN, hatch="//",
           edgecolor="white", label="estimated (no usage)")  # fmt: skip
    for x, total in zip(labels, spend["cost_usd"], strict=True):
        ax.annotate(f"${total:.4f}" if total < 1 else f"${total:.2f}", (x, total),
                    ha="center", va="bottom", fontsize=8)  # fmt: skip
    if budget_usd:
        ax.axhline(budget_usd, color=FAILED, linestyle="--", label=f"budget ${budget_usd:g}/day")
    ax.set_ylabel("USD")
    ax.set_title(f"{title} ({int(spend['rounds'].sum())} rounds, ${spend['cost_usd'].sum():.4f})")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    fig.tight_layout()
    return fig


def png(fig: Figure, dpi: int = DPI) -> bytes:
    """The figure as PNG bytes."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def close(fig: Figure) -> None:
    plt.close(fig)
