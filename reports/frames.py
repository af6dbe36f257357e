"""Health over time from the ledger, as pandas frames (pure: frames and `now` in, frames out).

The ledger keeps one probe row per endpoint and round (`verdict`, `reasons`, `ttft_s`, and
`outcomes`, the JSON of every contract's `Outcome`) and one row per decision. From them:

    verdict_matrix(probes)                 endpoints x rounds: clean / frozen / failed
    contract_failures(probes)              per endpoint and contract: failed, judged, rate and
                                           the failing reasons in words (`bad_arguments 3, ...`)
    ttft_samples(probes)                   every first-token time measured, per endpoint
    suspension_intervals(decisions, now)   each (shadow) suspension as start, end, how it ended
    observe_false_positives(decisions, probes, clean_rounds)
                                           would-suspend decisions classified (see below)
    endpoint_summary(probes, ttft, intervals)
                                           per endpoint: rounds, failed, frozen, TTFT, suspensions
    endpoint_history(probes, decisions, tag)
                                           one endpoint's rounds and decisions, with evidence
    daily_spend(rounds)                    per UTC day: rounds, requests, cost (C13)
    refusal_standing(rounds)               rounds per refusal-probe standing (C5)

Observe-mode false positives (Q3): a would-suspend decision is
- `false positive (probable)` when the endpoint's next `clean_rounds` judged rounds (frozen
  ones skipped) are clean, the failing contracts never fail again in the window, and nothing
  changed at the provider that the ledger can see (the provider name serving the replies is
  the same before and after);
- `confirmed` when a failing contract of the decision fails again in the window;
- `changed at the provider` when it turned clean while another provider name served it;
- `undetermined` when too few judged rounds followed yet.
The estimate is false positives / (false positives + confirmed). A provider that fixes a
defect silently looks like a false positive here, so the estimate is an upper bound.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import pandas as pd

from probes.evidence import evidence_text
from quarantine.budget import rounds_after, rounds_per_day

VERDICT_CODES = {"clean": 0, "frozen": 1, "failed": 2, "unjudged": 3}
CONTRACTS = ("latency", "refusal", "structured", "language", "start", "tools", "stream")
_JUDGED = ("pass", "fail")
_ENDS = {"reinstated_early", "lifted", "expired"}


def utc(value: datetime | pd.Timestamp) -> pd.Timestamp:
    """`value` as a UTC Timestamp (a naive one is taken to be UTC)."""
    ts = pd.Timestamp(value)
    return ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")


def _outcomes(row: Mapping[Any, Any]) -> list[Mapping[str, Any]]:
    items = row.get("outcomes")
    return [o for o in items if isinstance(o, Mapping)] if isinstance(items, list) else []


def verdict_matrix(probes: pd.DataFrame) -> pd.DataFrame:
    """Endpoints (rows, sorted) x round times (columns, oldest first): verdict codes
    (`VERDICT_CODES`), NaN where an endpoint was not probed in a round."""
    if probes.empty:
        return pd.DataFrame(dtype=float)
    codes = probes.assign(code=probes["verdict"].map(VERDICT_CODES).astype(float))
    matrix = codes.pivot_table(index="tag", columns="at", values="code", aggfunc="max")
    return matrix.sort_index().reindex(sorted(matrix.columns), axis=1)


def contract_outcomes(probes: pd.DataFrame) -> pd.DataFrame:
    """One row per endpoint, round and contract: status and reason (the ledger's outcomes
    exploded)."""
    rows = [
        {
            "tag": row["tag"],
            "round_id": row["round_id"],
            "at": row["at"],
            "contract": o.get("contract"),
            "status": o.get("status"),
            "reason": o.get("reason"),
            "outcome": o,
        }
        for row in probes.to_dict("records")
        for o in _outcomes(row)
    ]
    return pd.DataFrame(
        rows, columns=["tag", "round_id", "at", "contract", "status", "reason", "outcome"]
    )


def contract_failures(probes: pd.DataFrame) -> pd.DataFrame:
    """Per endpoint and contract: `failed` rounds, `judged` rounds (pass or fail),
    `rate` = failed / judged (NaN when never judged) and `reasons`, the failing outcomes'
    reasons with their counts, most frequent first. Every endpoint x contract is present."""
    outcomes = contract_outcomes(probes)
    tags = sorted(probes["tag"].unique()) if not probes.empty else []
    index = pd.MultiIndex.from_product([tags, CONTRACTS], names=["tag", "contract"])
    judged = outcomes[outcomes["status"].isin(_JUDGED)]
    # one row per endpoint, round and contract (a contract can carry several outcomes in a
    # round, e.g. the start share and the peer comparison): failed if any of them failed
    per_round: pd.DataFrame = (
        judged.assign(failed=judged["status"] == "fail")
        .groupby(["tag", "round_id", "contract"], as_index=False)
        .agg(failed=("failed", "any"))
    )
    judged = per_round.assign(status=per_round["failed"].map({True: "fail", False: "pass"}))
    counts = pd.DataFrame(
        {
            "failed": judged[judged["status"] == "fail"].groupby(["tag", "contract"]).size(),
            "judged": judged.groupby(["tag", "contract"]).size(),
        }
    )
    frame = counts.reindex(index).fillna(0).astype(int)
    frame["rate"] = frame["failed"] / frame["judged"].where(frame["judged"] > 0)
    frame["reasons"] = _reason_words(outcomes).reindex(index).fillna("")
    return frame.reset_index()


def _reason_words(outcomes: pd.DataFrame) -> pd.Series:
    """Per endpoint and contract: `reason count, ...` of its failing outcomes."""
    failing = outcomes[outcomes["status"] == "fail"]
    words: dict[tuple[str, str], list[str]] = {}
    counts = failing.groupby(["tag", "contract", "reason"]).size().reset_index(name="n")
    for row in counts.sort_values(["n", "reason"], ascending=[False, True]).itertuples():
        words.setdefault((str(row.tag), str(row.contract)), []).append(f"{row.reason} {row.n}")
    index = pd.MultiIndex.from_tuples(list(words), names=["tag", "contract"]) if words else None
    return pd.Series([", ".join(v) for v in words.values()], index=index, dtype=str)


def ttft_samples(probes: pd.DataFrame) -> pd.DataFrame:
    """Every first-token time measured (the latency outcome's `ttfts_s`, one per text
    request; the row's `ttft_s` where those are missing): columns tag, at, ttft_s, censored.
    A request that produced no text within the bar has no time: it is kept as a `censored`
    sample at the bar (at least that slow), so a host that never answers in time shows."""
    rows: list[dict[str, Any]] = []
    for row in probes.to_dict("records"):
        latency = [o for o in _outcomes(row) if o.get("contract") == "latency"]
        ev = (latency[0].get("evidence") or {}) if latency else {}
        values = [float(v) for v in ev.get("ttfts_s") or [] if isinstance(v, int | float)]
        if not values and isinstance(row.get("ttft_s"), int | float) and pd.notna(row["ttft_s"]):
            values = [float(row["ttft_s"])]
        rows += [
            {"tag": row["tag"], "at": row["at"], "ttft_s": v, "censored": False} for v in values
        ]
        bar = ev.get("threshold_s")
        if isinstance(bar, int | float) and isinstance(ev.get("failed"), int):
            missing = ev["failed"] - sum(1 for v in values if v > bar)
            rows += [
                {"tag": row["tag"], "at": row["at"], "ttft_s": float(bar), "censored": True}
            ] * max(0, missing)
    return pd.DataFrame(rows, columns=["tag", "at", "ttft_s", "censored"])


def suspension_intervals(decisions: pd.DataFrame, now: datetime) -> pd.DataFrame:
    """Each suspension (enforce) and shadow suspension (observe) as an interval: tag, kind
    (`suspended` | `shadow`), start, end and `ended_by` (reinstated_early, lifted, expired,
    mode_changed, or `ongoing` when it is still in force at `now`)."""
    now_ts = utc(now)
    open_: dict[str, dict[str, Any]] = {}
    done: list[dict[str, Any]] = []

    def close(tag: str, end: pd.Timestamp, how: str) -> None:
        interval = open_.pop(tag)
        done.append({**interval, "end": min(end, interval["until"]), "ended_by": how})

    for d in decisions.sort_values(["at", "id"]).to_dict("records") if not decisions.empty else []:
        tag, kind, at = d["tag"], d["kind"], d["at"]
        if kind in ("suspended", "would_suspend"):
            if tag in open_:
                close(tag, at, "replaced")
            until = d["until"] if pd.notna(d["until"]) else now_ts
            open_[tag] = {
                "tag": tag,
                "kind": "suspended" if kind == "suspended" else "shadow",
                "start": at,
                "until": until,
                "rung": d.get("rung"),
                "reasons": ", ".join(d.get("evidence") or []),
            }
        elif kind in _ENDS and tag in open_:
            close(tag, d["until"] if kind == "expired" and pd.notna(d["until"]) else at, kind)
        elif kind == "mode_changed":
            affected = set(d.get("evidence") or [])
            for t in [t for t, i in open_.items() if t in affected and i["kind"] == "shadow"]:
                close(t, at, "mode_changed")
    for tag in list(open_):
        interval = open_[tag]
        close(tag, now_ts, "ongoing" if interval["until"] > now_ts else "expired")
    columns = ["tag", "kind", "start", "end", "until", "ended_by", "rung", "reasons"]
    return pd.DataFrame(done, columns=columns).sort_values(["tag", "start"]).reset_index(drop=True)


def _contracts(reasons: Iterable[str]) -> set[str]:
    return {str(r).split(":", 1)[0] for r in reasons}


def _served_by(rows: pd.DataFrame) -> set[str]:
    names: set[str] = set()
    for row in rows.to_dict("records"):
        for o in _outcomes(row):
            name = (o.get("evidence") or {}).get("served_by")
            if isinstance(name, str) and name:
                names.add(name)
    return names


def observe_false_positives(
    decisions: pd.DataFrame, probes: pd.DataFrame, clean_rounds: int
) -> pd.DataFrame:
    """Each would-suspend decision classified (see module docstring): tag, at, reasons,
    verdict (`false positive (probable)`, `confirmed`, `changed at the provider`,
    `undetermined`) and the rounds it was judged on."""
    columns = ["tag", "at", "reasons", "verdict", "after", "why"]
    if decisions.empty or probes.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    would = decisions[decisions["kind"] == "would_suspend"]
    for d in would.to_dict("records"):
        tag, at = d["tag"], d["at"]
        contracts = _contracts(d.get("evidence") or [])
        mine = probes[probes["tag"] == tag]
        before = mine[mine["round_id"].isin(list(d.get("round_ids") or []))]
        judged = ~mine["verdict"].isin(["frozen", "unjudged"])  # rounds without evidence skipped
        after = mine[(mine["at"] > at) & judged].sort_values("at")
        recurred = [
            r
            for r in after.to_dict("records")
            if r["verdict"] == "failed" and contracts & _contracts(r.get("reasons") or [])
        ]
        following = after.head(clean_rounds)
        base = {"tag": tag, "at": at, "reasons": ", ".join(d.get("evidence") or [])}
        if recurred:
            first = recurred[0]
            verdict = "confirmed"
            why = f"failed again at {first['at']:%Y-%m-%d %H:%M}Z: {', '.join(first['reasons'])}"
        elif len(following) < clean_rounds:
            verdict, why = "undetermined", f"{len(following)} judged round(s) since"
        elif (following["verdict"] == "clean").all():
            then, later = _served_by(before), _served_by(following)
            if then and later and then != later:
                verdict = "changed at the provider"
                why = f"served by {', '.join(sorted(then))}, then {', '.join(sorted(later))}"
            else:
                verdict = "false positive (probable)"
                why = f"next {clean_rounds} judged rounds clean, never failed again"
        else:
            verdict, why = "undetermined", "failed later on other contracts"
        rows.append({**base, "verdict": verdict, "after": len(after), "why": why})
    return pd.DataFrame(rows, columns=columns)


def false_positive_estimate(classified: pd.DataFrame) -> dict[str, Any]:
    """Counts per verdict and the estimate fp / (fp + confirmed) (None when undefined)."""
    counts = classified["verdict"].value_counts().to_dict() if not classified.empty else {}
    fp = int(counts.get("false positive (probable)", 0))
    confirmed = int(counts.get("confirmed", 0))
    return {
        "would_suspend": len(classified),
        "false_positive": fp,
        "confirmed": confirmed,
        "changed": int(counts.get("changed at the provider", 0)),
        "undetermined": int(counts.get("undetermined", 0)),
        "estimate": fp / (fp + confirmed) if fp + confirmed else None,
    }


def endpoint_summary(
    probes: pd.DataFrame, ttft: pd.DataFrame, intervals: pd.DataFrame
) -> pd.DataFrame:
    """Per endpoint: rounds, failed and frozen rounds, the median and slowest first token
    (seconds; requests without text count at the bar), suspensions and shadow suspensions,
    and the last verdict."""
    columns = ["tag", "rounds", "failed", "frozen", "not_judged", "ttft_median_s", "ttft_max_s",
               "suspensions", "shadow", "last_verdict"]  # fmt: skip
    if probes.empty:
        return pd.DataFrame(columns=columns)
    ordered = probes.sort_values("at")
    grouped = ordered.groupby("tag")
    frame = pd.DataFrame(
        {
            "rounds": grouped.size(),
            "failed": grouped["verdict"].apply(lambda v: int((v == "failed").sum())),
            "frozen": grouped["verdict"].apply(lambda v: int((v == "frozen").sum())),
            "not_judged": grouped["verdict"].apply(lambda v: int((v == "unjudged").sum())),
            "last_verdict": grouped["verdict"].last(),
        }
    )
    times = ttft.groupby("tag")["ttft_s"]
    frame["ttft_median_s"] = times.median()
    frame["ttft_max_s"] = times.max()
    kinds = (
        intervals.groupby(["tag", "kind"]).size().unstack(fill_value=0)
        if not intervals.empty
        else None
    )
    for kind, column in (("suspended", "suspensions"), ("shadow", "shadow")):
        counts = kinds[kind] if kinds is not None and kind in kinds else pd.Series(dtype=int)
        frame[column] = counts.reindex(frame.index).fillna(0).astype(int)
    return frame.reset_index()[columns]


def endpoint_history(probes: pd.DataFrame, decisions: pd.DataFrame, tag: str) -> pd.DataFrame:
    """One endpoint's rounds and decisions, oldest first: at, what (the round's verdict or
    `decision: <kind>`), detail (the round's locale; a decision's until and rung), evidence
    (the numbers behind failing contracts; a decision's reason and evidence codes) and the
    round id (rounds) or the round ids behind it (decisions)."""
    rows: list[dict[str, Any]] = []
    for row in probes[probes["tag"] == tag].to_dict("records") if not probes.empty else []:
        lines = [
            f"{o.get('contract')}: {evidence_text(o)}"
            for o in _outcomes(row)
            if o.get("status") in ("fail", "transport", "misrouted")
        ]
        rows.append(
            {
                "at": row["at"],
                "what": row["verdict"],
                "detail": row.get("locale") or "",
                "evidence": "; ".join(lines),
                "rounds": row["round_id"],
            }
        )
    mine = decisions[decisions["tag"] == tag] if not decisions.empty else decisions
    for d in mine.to_dict("records") if not mine.empty else []:
        until = f"until {d['until']:%Y-%m-%d %H:%M}Z" if pd.notna(d.get("until")) else ""
        rung = f"rung {int(d['rung'])}" if pd.notna(d.get("rung")) else ""
        evidence = ", ".join(d.get("evidence") or [])
        rows.append(
            {
                "at": d["at"],
                "what": f"decision: {d['kind']}",
                "detail": " ".join(p for p in (until, rung) if p),
                "evidence": "; ".join(p for p in (d["reason"], evidence) if p),
                "rounds": ", ".join(d.get("round_ids") or []),
            }
        )
    frame = pd.DataFrame(rows, columns=["at", "what", "detail", "evidence", "rounds"])
    return frame.sort_values("at", kind="stable").reset_index(drop=True)


SPEND_COLUMNS = ["day", "rounds", "requests", "cost_usd", "estimated_usd", "frozen_rounds"]


def daily_spend(rounds: pd.DataFrame) -> pd.DataFrame:
    """Per UTC day (oldest first): the model's rounds, their requests and cost in USD, the
    part of it priced by estimate, and the rounds frozen for the budget (C13)."""
    if rounds.empty:
        return pd.DataFrame(columns=SPEND_COLUMNS)
    days = rounds.assign(
        day=rounds["at"].dt.tz_convert("UTC").dt.date,
        frozen=rounds["budget_level"] == "frozen",
    )
    frame = days.groupby("day", as_index=False).agg(
        rounds=("round_id", "nunique"),
        requests=("requests", "sum"),
        cost_usd=("cost_usd", "sum"),
        estimated_usd=("estimated_usd", "sum"),
        frozen_rounds=("frozen", "sum"),
    )
    return frame[SPEND_COLUMNS].sort_values("day").reset_index(drop=True)


def refusal_standing(rounds: pd.DataFrame) -> dict[str, int]:
    """How many rounds the refusal probe was verified, weak or unverified in (C5)."""
    if rounds.empty or "refusal_probe" not in rounds:
        return {}
    counts = rounds["refusal_probe"].fillna("unknown").value_counts().to_dict()
    return {str(k): int(v) for k, v in sorted(counts.items())}


def day_bill(
    rounds: pd.DataFrame, now: datetime, cron: str | None, budget_usd: float | None
) -> dict[str, Any]:
    """Spent on the UTC day of `now` and the forecast for that day at the schedule `cron`:
    the last round's cost for each round still to come (C13)."""
    day = utc(now).date()
    if rounds.empty:
        today, last = rounds, 0.0
    else:
        today = rounds[rounds["at"].dt.tz_convert("UTC").dt.date == day]
        last = float(rounds.sort_values("at")["cost_usd"].iloc[-1])
    spent = float(today["cost_usd"].sum()) if not today.empty else 0.0
    left = rounds_after(cron, utc(now).to_pydatetime()) if cron else None
    return {
        "day": day,
        "spent_usd": spent,
        "rounds": len(today),
        "last_round_usd": last,
        "rounds_per_day": rounds_per_day(cron, day) if cron else None,
        "forecast_usd": spent + last * left if left is not None else None,
        "budget_usd": budget_usd,
    }
