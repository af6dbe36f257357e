"""The canary's bill in the round's artifacts (SPEC C13), pure: the round's cost per endpoint
and in total with how it ran for the budget (a section of `canary-decisions-<slug>`), and the
day's spend and forecast (a section of `canary-status-<slug>`)."""

from __future__ import annotations

from typing import Any

from probes.cost import EndpointBill, RoundBill
from quarantine.budget import BillView, BudgetPlan


def usd(value: float) -> str:
    """Dollars to the cent, or to a hundredth of a cent below one dollar."""
    return f"${value:.4f}" if abs(value) < 1 else f"${value:,.2f}"


def _row(bill: EndpointBill) -> dict[str, Any]:
    return {
        "requests": bill.requests,
        "prompt_tokens": bill.prompt_tokens,
        "completion_tokens": bill.completion_tokens,
        "usd": round(bill.usd, 8),
        "estimated_usd": round(bill.estimated_usd, 8),
        "estimated_requests": bill.estimated_requests,
    }


def bill_summary(bill: RoundBill | None) -> dict[str, Any]:
    """The round's bill as JSON-friendly data (the round's summary, `canary round --json`)."""
    if bill is None:
        return {}
    return {
        "total": _row(bill.total),
        "endpoints": {tag: _row(b) for tag, b in sorted(bill.endpoints.items())},
    }


def _line(name: str, b: EndpointBill) -> str:
    estimated = f"{usd(b.estimated_usd)} ({b.estimated_requests})" if b.estimated_requests else "-"
    return (
        f"| {name} | {b.requests} | {b.prompt_tokens} | {b.completion_tokens} | {usd(b.usd)} "
        f"| {estimated} |"
    )


def budget_lines(budget: BudgetPlan | None) -> list[str]:
    """How the round ran for the budget, in two lines."""
    if budget is None:
        return []
    cap = usd(budget.budget_usd) if budget.budget_usd is not None else "none"
    return [
        f"Budget: **{budget.level.value}** ({budget.start_samples} start samples): "
        f"{budget.reason}.",
        "",
        f"Today before this round {usd(budget.spent_usd)}, this round estimated "
        f"{usd(budget.round_usd)}, {budget.rounds_left} round(s) left today including it: "
        f"forecast {usd(budget.forecast_usd)} (daily budget {cap}).",
    ]


def bill_markdown(bill: RoundBill | None, budget: BudgetPlan | None) -> str:
    """The decisions artifact's section: requests, tokens and cost per endpoint (controls
    included) and in total; probes without usage are priced by estimate and marked."""
    out = ["", "## The round's bill", ""]
    out += [*budget_lines(budget), ""] if budget is not None else []
    if bill is None or not bill.endpoints:
        out.append("No probe was sent.")
        return "\n".join(out) + "\n"
    out += [
        "| endpoint | requests | prompt tokens | completion tokens | cost | estimated (requests) |",
        "|---|---|---|---|---|---|",
    ]
    out += [_line(f"`{tag}`", b) for tag, b in sorted(bill.endpoints.items())]
    out.append(_line("**total**", bill.total))
    out += [
        "",
        "Cost is the reply's `usage.cost`, else the listing's prices times its tokens; a probe "
        "without usage is priced by its request's estimate (prompt characters / 4 and "
        "`max_tokens`) and counted as estimated.",
    ]
    return "\n".join(out) + "\n"


def status_bill_markdown(view: BillView | None, refusal: str) -> str:
    """The status artifact's section: the refusal contract's standing (C5), and the day's
    spend and forecast at the current schedule (C13)."""
    out = ["", "## Evidence and bill", "", f"- {refusal}."]
    if view is not None:
        budget = f" of the daily budget {usd(view.budget_usd)}" if view.budget_usd else ""
        frozen = f", {view.frozen_rounds} frozen for the budget" if view.frozen_rounds else ""
        out += [
            f"- Spent on {view.day}: **{usd(view.spent_usd)}**{budget} ({view.rounds} rounds"
            f"{frozen}, {view.requests} requests, {view.tokens} tokens; "
            f"{usd(view.estimated_usd)} of it estimated).",
            f"- Forecast for the day: **{usd(view.forecast_usd)}** at {view.rounds_per_day} "
            f"rounds a day ({view.rounds_left} still to come at the last round's "
            f"{usd(view.last_round_usd)}); level of the last round: {view.level.value}.",
        ]
    return "\n".join(out) + "\n"
