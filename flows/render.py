"""What an analyst reads in the Prefect UI (O3): the round's table
(endpoint x contract) and a markdown summary of the decisions with their
evidence. Pure functions from round data to rows and text."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from probes.types import Outcome
from quarantine.models import Decision
from quarantine.verdicts import ProviderRound


def outcome_rows(
    outcomes: Mapping[str, Sequence[Outcome]],
    locales: Mapping[str, str],
    verdicts: Mapping[str, ProviderRound],
    controls: Iterable[str] = (),
) -> list[dict[str, Any]]:
    """One row per endpoint and contract: outcome, reason, ttft, locale, round verdict."""
    control_set = set(controls)
    rows: list[dict[str, Any]] = []
    for tag in sorted(outcomes):
        verdict = verdicts.get(tag)
        for o in sorted(outcomes[tag], key=lambda o: o.contract.value):
            rows.append(
                {
                    "endpoint": tag + (" (control)" if tag in control_set else ""),
                    "contract": o.contract.value,
                    "outcome": o.status.value,
                    "reason": o.reason,
                    "ttft_s": None if o.ttft_s is None else round(o.ttft_s, 3),
                    "locale": o.locale or locales.get(tag, ""),
                    "round_verdict": verdict.verdict.value if verdict else "control",
                }
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


def decisions_markdown(
    *,
    model: str,
    round_id: str,
    mode: str,
    decisions: Sequence[Decision],
    verdicts: Mapping[str, ProviderRound],
    ignore: Sequence[Mapping[str, Any]],
    weak_controls: Sequence[str] = (),
) -> str:
    """The round summary: why each host was (would be) suspended, blocked or reinstated."""
    failed = {t: v for t, v in verdicts.items() if v.verdict.value == "failed"}
    frozen = sorted(t for t, v in verdicts.items() if v.verdict.value == "frozen")
    out = [f"# Canary round `{round_id}`", "", f"Model `{model}`, mode **{mode}**.", ""]
    if weak_controls:
        out += [
            "> **Weak refusal probe**: positive control(s) "
            + ", ".join(f"`{c}`" for c in weak_controls)
            + " passed although they are known to filter. Refusal failures were not "
            "counted this round (C5).",
            "",
        ]
    out += ["## Decisions", ""]
    if decisions:
        out += [
            "| decision | endpoint | until | rung | evidence | rounds |",
            "|---|---|---|---|---|---|",
        ]
        for d in decisions:
            until = f"{d.until:%Y-%m-%d %H:%M}Z" if d.until else ""
            out.append(
                f"| {d.kind.value} | `{d.tag}` | {until} | {d.rung or ''} | "
                f"{'; '.join(d.evidence) or d.reason} | {', '.join(d.round_ids)} |"
            )
    else:
        out.append("No state changes this round.")
    out += ["", "## Failing endpoints this round", ""]
    if failed:
        out += [f"- `{t}`: {', '.join(v.reasons)}" for t, v in sorted(failed.items())]
    else:
        out.append("None.")
    if frozen:
        out += [
            "",
            "Frozen (transport errors, streaks unchanged): " + ", ".join(f"`{t}`" for t in frozen),
        ]
    out += ["", "## provider.ignore after this round", ""]
    if ignore:
        out += [f"- `{e['tag']}` ({e['layer']}): {e.get('reason', '')}" for e in ignore]
    else:
        out.append("Empty.")
    return "\n".join(out) + "\n"


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
