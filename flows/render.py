"""What an analyst reads in the Prefect UI (O3): the round's table (endpoint x contract,
failing endpoints first), the numbers behind an endpoint's outcomes in lines
(`probes.evidence`), the CLI's per-endpoint lines and a triage's transcripts. Pure
functions from round data to rows and text; the decisions artifact is built from them in
`flows/decisions_artifact.py`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from probes.evidence import evidence_brief, evidence_text
from probes.types import Outcome
from quarantine.verdicts import ProviderRound

_VERDICT_ORDER = {"failed": 0, "frozen": 1, "unjudged": 2, "control": 3, "clean": 4}
_STATUS_ORDER = {"fail": 0, "transport": 1, "misrouted": 1, "inconclusive": 2}


def outcome_rows(
    outcomes: Mapping[str, Sequence[Outcome]],
    locales: Mapping[str, str],
    verdicts: Mapping[str, ProviderRound],
    controls: Iterable[str] = (),
) -> list[dict[str, Any]]:
    """One row per endpoint and contract, failing endpoints first (their failing contracts
    first): verdict, outcome, locale and the numbers behind the outcome in a few words
    (TTFT against the bar, k/n anomalous starts, language shares, schema path). Columns are
    short so the table fits the UI; the reason codes and the long evidence are in the
    decisions markdown."""
    control_set = set(controls)
    rows: list[dict[str, Any]] = []
    for tag in outcomes:
        verdict = verdicts.get(tag)
        for o in outcomes[tag]:
            rows.append(
                {
                    "endpoint": tag + (" (control)" if tag in control_set else ""),
                    "verdict": verdict.verdict.value if verdict else "control",
                    "contract": o.contract.value,
                    "outcome": o.status.value,
                    "locale": o.locale or locales.get(tag, ""),
                    "evidence": evidence_brief(o),
                }
            )
    rows.sort(
        key=lambda r: (
            _VERDICT_ORDER.get(r["verdict"], 9),
            r["endpoint"],
            _STATUS_ORDER.get(r["outcome"], 3),
            r["contract"],
        )
    )
    return rows


def endpoint_lines(
    verdicts: Mapping[str, ProviderRound], locales: Mapping[str, str]
) -> list[tuple[str, str, str, str]]:
    """(tag, locale, verdict, reasons) per endpoint, for the CLI table."""
    return [
        (tag, locales.get(tag, ""), v.verdict.value, ", ".join(v.reasons) or "-")
        for tag, v in sorted(verdicts.items())
    ]


def evidence_lines(outcomes: Sequence[Outcome], statuses: Iterable[str] = ("fail",)) -> list[str]:
    """`contract: reason: the numbers` for the outcomes with one of `statuses` (pure)."""
    wanted = set(statuses)
    return [
        f"{o.contract.value} `{o.reason}`: {evidence_text(o)}"
        for o in sorted(outcomes, key=lambda o: o.contract.value)
        if o.status.value in wanted
    ]


TEXT_SHOWN = 4000  # characters of each reply shown in the triage artifact


def transcripts_markdown(
    model: str,
    provider: str,
    locale: str,
    transcripts: Sequence[Any],
    outcomes: Sequence[Outcome],
) -> str:
    """Full transcripts of a triage run (O5), one section per request."""
    out = [f"# Triage `{provider}` ({model}), locale `{locale}`", "", "## Outcomes", ""]
    out += [f"- {o.contract.value}: **{o.status.value}** `{o.reason}`" for o in outcomes]
    for i, t in enumerate(transcripts, 1):
        text = t.text if len(t.text) <= TEXT_SHOWN else t.text[:TEXT_SHOWN] + " [...]"
        fence = "````" if "```" in text else "```"
        err = f"{t.error.code} {t.error.error_type or ''} {t.error.message}" if t.error else ""
        out += [
            "",
            f"## {i}. {t.contract.value} `{t.request_id}`",
            "",
            f"- HTTP {t.http_status}, served by `{t.served_by}` (pinned `{t.pinned_provider}`)",
            f"- ttft {t.ttft_s if t.ttft_s is not None else '-'} s, total {t.total_s} s, "
            f"finish `{t.finish_reason}` / native `{t.native_finish_reason}`, [DONE] {t.done}",
            f"- transport error: {t.transport_error or '-'}; error: {err or '-'}",
            f"- usage: {t.usage}",
            "",
            fence,
            text,
            fence,
        ]
    return "\n".join(out) + "\n"
