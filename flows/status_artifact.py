"""The living status of a model's quarantine (O3): one markdown artifact per model with a
stable key, `canary-status-<model-slug>`, a new version each round, so the artifact's
history in the Prefect UI is the quarantine's history.

It lists suspended, shadow-suspended, excluded (with the layer and reason) and active
endpoints, each with the last evidence: the numbers behind its verdict in the round that
wrote the version; the active ones with a "why" that tells `clean` from `not judged: ...`
(C5). Pure: views and evidence in, markdown out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from ground.slugs import model_slug
from quarantine.exclusions import IgnoreEntry, Layer
from quarantine.overview import EndpointView, Standing

_TITLES = {
    Standing.SUSPENDED: "Suspended (in provider.ignore)",
    Standing.SHADOW_SUSPENDED: "Shadow-suspended (observe mode: recorded, not enforced)",
    Standing.EXCLUDED: "Excluded by a built-in or incident entry (in provider.ignore)",
}


def status_key(model: str) -> str:
    return f"canary-status-{model_slug(model)}"


def _until(at: datetime | None) -> str:
    return f"{at:%Y-%m-%d %H:%M}Z" if at else "no end"


def _evidence(view: EndpointView, evidence: Mapping[str, Sequence[str]]) -> list[str]:
    lines = evidence.get(view.tag)
    if lines:
        return [f"  - this round: {line}" for line in lines]
    if view.last_verdict:
        return [f"  - last round `{view.last_round_id}`: {view.why}"]
    return []


def status_markdown(
    *,
    model: str,
    mode: str,
    round_id: str | None,
    at: datetime,
    views: Sequence[EndpointView],
    ignore: Sequence[IgnoreEntry],
    evidence: Mapping[str, Sequence[str]],
) -> str:
    """The status artifact's markdown (see module docstring). `evidence` holds, per endpoint,
    the evidence lines of its failing contracts in this round (empty when it passed)."""
    by: dict[Standing, list[EndpointView]] = {s: [] for s in Standing}
    for v in views:
        by[v.standing].append(v)
    counts = ", ".join(f"{len(by[s])} {s.value}" for s in Standing)
    out = [
        f"# Quarantine of `{model}`",
        "",
        f"As of round `{round_id or '-'}` ({at:%Y-%m-%d %H:%M}Z), mode **{mode}**: {counts}.",
        "",
        f"provider.ignore: {', '.join(f'`{e.tag}`' for e in ignore) or 'empty'}.",
    ]
    for standing in (Standing.SUSPENDED, Standing.SHADOW_SUSPENDED, Standing.EXCLUDED):
        out += ["", f"## {_TITLES[standing]}", ""]
        if not by[standing]:
            out.append("None.")
            continue
        for v in by[standing]:
            layer = f" ({v.layer.value})" if v.layer and standing is Standing.EXCLUDED else ""
            rung = f", rung {v.rung}" if standing is not Standing.EXCLUDED else ""
            out.append(f"- `{v.tag}`{layer} until {_until(v.until)}{rung}: {v.reason}")
            out += _evidence(v, evidence)
    covered = {v.tag for v in by[Standing.EXCLUDED]}
    loose = [
        e
        for e in ignore
        if e.layer is not Layer.CANARY
        and not any(t == e.tag or t.split("/", 1)[0] == e.tag for t in covered)
    ]
    if loose:
        out += ["", "Entries covering no endpoint the canary judged:", ""]
        out += [f"- `{e.tag}` ({e.layer.value}) until {_until(e.until)}: {e.reason}" for e in loose]
    out += ["", "## Active", "", *_active(by[Standing.ACTIVE], evidence)]
    return "\n".join(out) + "\n"


def _active(active: Sequence[EndpointView], evidence: Mapping[str, Sequence[str]]) -> list[str]:
    """The active endpoints' table (its "why" tells `clean` from `not judged: ...`), then
    those that failed this round."""
    if not active:
        return ["None."]
    out = [
        "| endpoint | last round | why | failed / clean streak | rung |",
        "|---|---|---|---|---|",
    ]
    for v in active:
        out.append(
            f"| `{v.tag}` | {v.last_verdict or '-'} | {v.why} | {v.failed_streak} / "
            f"{v.clean_streak} | {v.rung} |"
        )
    noisy = [v for v in active if evidence.get(v.tag)]
    if noisy:
        out += ["", "Active endpoints that failed this round (not suspended yet):", ""]
        for v in noisy:
            out.append(f"- `{v.tag}` ({v.failed_streak} failed round(s) in a row)")
            out += _evidence(v, evidence)
    return out
