"""The round's peer comparison (a thin wrapper of probes/peer_round.py with the settings),
and what it adds to the audit material: alert lines and a markdown section (pure).

A plain call, not a task run: a pure step of a few ms whose findings are in the round's
artifacts and alerts; a task run would cost the round more than the step itself."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from ground.settings import load_settings
from probes.peer_round import PEER_OUTLIER, SLOW_OUTPUT, PeerRound, judge_with_peers
from probes.probeset import ProbeSetResult
from probes.types import Contract, Outcome


def compare_with_peers(
    outcomes: Mapping[str, Sequence[Outcome]],
    results: Mapping[str, ProbeSetResult],
    exclude: Collection[str],
) -> PeerRound:
    """Each rate contract of each endpoint against the other endpoints of the round."""
    return judge_with_peers(outcomes, results, load_settings().probe, exclude=exclude)


def observe_only_reasons() -> frozenset[str]:
    """Failure reasons the round records but does not count (settings decide): start
    fingerprints unlike the peers' and output far slower than the peers'."""
    probe = load_settings().probe
    observed = set()
    if not probe.start_peer_outlier_enforce:
        observed.add(f"{Contract.START.value}:{PEER_OUTLIER}")
    if not probe.slow_output_enforce:
        observed.add(f"{Contract.STREAM.value}:{SLOW_OUTPUT}")
    return frozenset(observed)


def finding_lines(peers: PeerRound | None) -> list[str]:
    """One alert line per model-level finding."""
    return [f.line() for f in peers.findings] if peers else []


def peers_markdown(peers: PeerRound | None) -> str:
    """The artifact section: model-level findings, hosts above a bar with their peer
    decision, and start fingerprints unlike the peers'."""
    if peers is None:
        return ""
    out = ["", "## Model-level findings", ""]
    out += [f"- {f.line()}: {', '.join(f'`{t}`' for t in f.hosts_above)}" for f in peers.findings]
    if not peers.findings:
        out.append("None.")
    above = [v for v in peers.verdicts if v.above_bar]
    out += ["", "## Compared with the peers", ""]
    if above:
        out += [
            "| endpoint | contract | host | peers | p (corrected) | decision |",
            "|---|---|---|---|---|---|",
        ]
        out += [
            f"| `{v.tag}` | {v.contract} | {v.host} | {v.peers} | {v.p_adjusted:.3g} | "
            f"{v.decision.value} |"
            for v in sorted(above, key=lambda v: (v.tag, v.contract))
        ]
    else:
        out.append("No endpoint above a contract's bar.")
    out += ["", "## Start fingerprints unlike the peers (observed)", ""]
    if peers.fingerprint_outliers:
        out += [
            f"- `{o.tag}` [{o.locale}]: {o.feature}={o.value!r} in {o.host} replies vs "
            f"{o.peers} of the peers (p corrected {o.p_adjusted:.3g})"
            for o in peers.fingerprint_outliers
        ]
    else:
        out.append("None.")
    return "\n".join(out) + "\n"
