"""The round's decisions artifact (O3, `canary-decisions-<slug>`): why each host was (would
be) suspended, blocked or reinstated, and the numbers behind every failing verdict. Pure:
an applied round in, markdown out (the peer comparison's section follows it,
`flows.peer_step.peers_markdown`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from flows.applied import AppliedRound
from flows.render import evidence_lines
from probes.evidence import evidence_text
from probes.types import Outcome
from quarantine.exclusions import IgnoreEntry
from quarantine.models import Decision
from quarantine.verdicts import ProviderRound


def decisions_markdown(applied: AppliedRound) -> str:
    """The round summary, failing endpoints first. The decisions table has short columns
    only; evidence and round ids follow it as a list, so nothing is cut off on the right in
    the UI."""
    plan, outcomes, verdicts = applied.plan, applied.judged.voted, applied.judged.verdicts
    out = [
        f"# Canary round `{plan.round_id}`",
        "",
        f"Model `{plan.model}`, mode **{applied.mode.value}**.",
        "",
    ]
    out += _weak_probe(applied.weak_controls)
    out += ["## Decisions", "", *_decisions(applied.decisions, outcomes)]
    out += ["", "## Failing endpoints this round", "", *_failing(verdicts, outcomes)]
    out += _frozen(verdicts, outcomes)
    out += _controls(applied.controls)
    out += ["", "## provider.ignore after this round", "", *_ignore(applied.ignore)]
    return "\n".join(out) + "\n"


def _endpoint(tag: str) -> str:
    return f"`{tag}`" if tag else "(whole model)"


def _weak_probe(weak_controls: Sequence[str]) -> list[str]:
    if not weak_controls:
        return []
    return [
        "> **Weak refusal probe**: positive control(s) "
        + ", ".join(f"`{c}`" for c in weak_controls)
        + " passed although they are known to filter. Refusal failures were not "
        "counted this round.",
        "",
    ]


def _decisions(
    decisions: Sequence[Decision], outcomes: Mapping[str, Sequence[Outcome]]
) -> list[str]:
    if not decisions:
        return ["No state changes this round."]
    out = ["| decision | endpoint | until | rung |", "|---|---|---|---|"]
    for d in decisions:
        until = f"{d.until:%Y-%m-%d %H:%M}Z" if d.until else ""
        out.append(f"| {d.kind.value} | {_endpoint(d.tag)} | {until} | {d.rung or ''} |")
    out.append("")
    for d in decisions:
        out.append(f"- **{d.kind.value}** {_endpoint(d.tag)}: {d.reason}")
        if d.evidence:
            out.append(f"  - evidence: {', '.join(f'`{e}`' for e in d.evidence)}")
        if d.round_ids:
            out.append(f"  - rounds: {', '.join(f'`{r}`' for r in d.round_ids)}")
        out += [f"  - this round: {line}" for line in evidence_lines(outcomes.get(d.tag, ()))]
    return out


def _failing(
    verdicts: Mapping[str, ProviderRound], outcomes: Mapping[str, Sequence[Outcome]]
) -> list[str]:
    failed = {t: v for t, v in verdicts.items() if v.verdict.value == "failed"}
    if not failed:
        return ["None."]
    out = []
    for t, v in sorted(failed.items()):
        out.append(f"- `{t}`: {', '.join(v.reasons)}")
        out += [f"  - {line}" for line in evidence_lines(outcomes.get(t, ()))]
    return out


def _frozen(
    verdicts: Mapping[str, ProviderRound], outcomes: Mapping[str, Sequence[Outcome]]
) -> list[str]:
    frozen = sorted(t for t, v in verdicts.items() if v.verdict.value == "frozen")
    if not frozen:
        return []
    out = ["", "## Frozen (transport errors, streaks unchanged)", ""]
    for t in frozen:
        lines = evidence_lines(outcomes.get(t, ()), ("transport", "misrouted"))
        out.append(f"- `{t}`: " + ("; ".join(lines) or "no verdict"))
    return out


def _controls(controls: Mapping[str, Sequence[Outcome]]) -> list[str]:
    if not controls:
        return []
    out = ["", "## Positive controls (known to filter)", ""]
    for tag, items in sorted(controls.items()):
        out += [
            f"- `{tag}` {o.contract.value}: **{o.status.value}** `{o.reason}`: {evidence_text(o)}"
            for o in items
        ]
    return out


def _ignore(ignore: Sequence[IgnoreEntry]) -> list[str]:
    if not ignore:
        return ["Empty."]
    return [f"- `{e.tag}` ({e.layer.value}): {e.reason}" for e in ignore]
