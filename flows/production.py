"""Production traffic as evidence in the round (SPEC O8): the gateway's figures of the model
over the `round_window_s` before the round's logical time, read from the ledger the gateway
writes (`routing/passive_ledger.py`), as a section of the round's decisions artifact beside
the probes' evidence:

    ## Production evidence (gateway, 30 min before this round)
    - `startcorrupt/fp8`: production: 14 of 120 replies rejected for a stray start, peers 0 of 900
    - `startcorrupt/fp8`: suspect (start), ejected by the gateway for 60 s (2nd time) ...

It is evidence only: it never suspends nor clears a provider (the two-round rule on the
canary's own probes stands), and it changes nothing in the round's verdicts. A ledger that
cannot be read leaves the section out (the round goes on). `production_markdown` is pure.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from ground.settings import load_settings
from routing.passive import Reason
from routing.passive_ledger import ProviderFigures, SuspectRow, production_figures, suspects


def _name(f: ProviderFigures | SuspectRow) -> str:
    return f"`{f.tag}`" if f.tag else f"{f.provider} (no listed tag)"


def production_lines(figures: Sequence[ProviderFigures]) -> list[str]:
    """One line per provider and failure reason, highest share first: the provider's k/n
    against the pooled k/n of the model's other providers in the same window."""
    rows: list[tuple[float, str]] = []
    for f in figures:
        others = [g for g in figures if g is not f]
        peers_n = sum(g.replies for g in others)
        for reason, k in f.failures.items():
            peers_k = sum(g.failures.get(reason, 0) for g in others)
            words = Reason(reason).words if reason in Reason else reason
            line = (
                f"- {_name(f)}: production: {k} of {f.replies} replies {words},"
                f" peers {peers_k} of {peers_n}"
            )
            rows.append((-(k / f.replies if f.replies else 0.0), line))
    return [line for _, line in sorted(rows)]


_HELD = {
    "observed": "not ejected (ejection is off)",
    "held_share": "not ejected (the share of providers ejected at once is reached)",
    "held_floor": "not ejected (the capacity floor)",
    "kept_for_capacity": "suspect, kept for capacity (the capacity floor): not ejected",
    "held_unlisted": "not ejected (no listing names the provider)",
}


def _action(row: SuspectRow) -> str:
    if row.action == "ejected" and row.until is not None:
        length = (row.until - row.at).total_seconds()
        return (
            f"ejected by the gateway for {length:.0f} s (#{row.times}) until {row.until:%H:%M:%S}Z"
        )
    return _HELD.get(row.action, f"not ejected ({row.action})")


def production_markdown(
    figures: Sequence[ProviderFigures], rows: Sequence[SuspectRow], window: timedelta
) -> str:
    """The decisions artifact's production section (pure)."""
    minutes = window.total_seconds() / 60
    out = ["", f"## Production evidence (gateway, {minutes:.0f} min before this round)", ""]
    if not figures:
        out.append("No gateway traffic of this model recorded in the window.")
        return "\n".join(out) + "\n"
    lines = production_lines(figures)
    total = sum(f.replies for f in figures)
    out += lines or [f"No failures among {total} judged replies of {len(figures)} providers."]
    for row in rows:
        out.append(f"- {_name(row)}: suspect ({row.reason}: {row.evidence}), {_action(row)}")
    out += [
        "",
        "Evidence only: production figures never suspend or clear an endpoint; the canary's "
        "own probes decide (two failing rounds).",
    ]
    return "\n".join(out) + "\n"


def _read(model: str, at: datetime, window: timedelta) -> str:
    url = load_settings().resolved_ledger_url
    since = at - window
    return production_markdown(
        production_figures(url, model, since, at), suspects(url, model, since, at), window
    )


async def production_section(model: str, at: datetime, logger: Any) -> str:
    """The section for the round of `model` at `at`; "" when the ledger cannot be read."""
    window = timedelta(seconds=load_settings().passive.round_window_s)
    try:
        return await asyncio.to_thread(_read, model, at, window)
    except Exception as exc:  # evidence only: the round goes on without it
        logger.warning(
            "production evidence of %s unreadable (%s): %s", model, type(exc).__name__, exc
        )
        return ""
