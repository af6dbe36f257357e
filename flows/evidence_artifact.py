"""What each endpoint was judged on in a round (SPEC C5, Q5, O3), pure: a section of the
round's `canary-decisions-<slug>` artifact. For each endpoint, the contracts judged (passed
or failed), those it is held to that the round could not judge (and why), and those judged
by a probe no positive control verified; an analyst tells a clean round from one that
proved nothing."""

from __future__ import annotations

from collections.abc import Mapping

from quarantine.judged import RefusalProbe
from quarantine.verdicts import ProviderRound, RoundVerdict

_REFUSAL = {
    RefusalProbe.VERIFIED: "verified: a positive control filtered as expected",
    RefusalProbe.WEAK: "weak: a positive control passed, so refusal is unjudged for every host",
    RefusalProbe.UNVERIFIED: "unverified: no positive control judged the probe this round "
    "(configure CANARY_CONTROL_PROVIDERS); its results count and are marked",
}


def _judged(v: ProviderRound) -> str:
    failed = sorted({r.split(":", 1)[0] for r in v.reasons})
    parts = [*(f"{c} passed" for c in v.clean_contracts), *(f"**{c} failed**" for c in failed)]
    return ", ".join(parts) or "-"


def _shown(verdict: RoundVerdict) -> str:
    return "not judged" if verdict is RoundVerdict.UNJUDGED else verdict.value


def contracts_markdown(verdicts: Mapping[str, ProviderRound], refusal: RefusalProbe) -> str:
    """The section: the refusal probe's standing, then one row per endpoint."""
    out = [
        "",
        "## What each endpoint was judged on",
        "",
        f"Refusal probe: **{refusal.value}** ({_REFUSAL[refusal]}).",
        "",
        "A round is clean only when every contract the endpoint is held to was judged and "
        "passed; a contract not judged neither fails it nor counts toward the clean rounds "
        "that reinstate it early.",
        "",
    ]
    if not verdicts:
        return "\n".join([*out, "No endpoint judged."]) + "\n"
    out += [
        "| endpoint | verdict | judged | not judged (why) | unverified | held to |",
        "|---|---|---|---|---|---|",
    ]
    for tag, v in sorted(verdicts.items()):
        why = "; ".join(v.unjudged_lines()) or "-"
        out.append(
            f"| `{tag}` | {_shown(v.verdict)} | {_judged(v)} | {why} | "
            f"{', '.join(v.unverified) or '-'} | {', '.join(v.held_to) or '-'} |"
        )
    return "\n".join(out) + "\n"
