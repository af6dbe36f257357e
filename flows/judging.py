"""Judging a round's endpoints, shared by the round (`flows/canary_round.py`) and a recorded
triage (`flows/triage.py`):

    pinned probes and language confirmations (one `pinned-probes` task run)
      ─► majority vote (2 of 3) ─► positive controls judge the refusal probe (C5)
      ─► peer comparison ─► round verdicts                          = `probe_and_judge`
    the verdicts in the run's graph (`verdict` task runs)            = `mark_verdicts`
    the facts the policy reads (a pure `RoundReport`)                = `round_report`

What the probes concluded is one value, `Judged`, before the policy looks at it; the audit
of an applied round reads it (`flows/applied.py`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from prefect.states import State

from flows import tasks
from flows.graph import clean_label, endpoint_count, has_story, verdict_label
from flows.peer_step import compare_with_peers, observe_only_reasons
from flows.render import evidence_lines
from flows.roundplan import RoundPlan
from flows.tasks import unwalked
from probes.contracts import ControlVerdict, judge_controls
from probes.peer_round import PeerRound
from probes.types import Contract, Outcome, Transcript
from quarantine.exclusions import IgnoreEntry, excluded_by_layers
from quarantine.models import Mode, ModelState, RoundReport
from quarantine.verdicts import ProviderRound, round_verdict


def stored_mode(state: ModelState, default: str) -> Mode:
    """The model's mode as stored; `default` (CANARY_MODE) for a model never judged."""
    return state.mode if state.revision > 0 else Mode(default)


@dataclass(frozen=True)
class Judged:
    """What the probes of a round concluded, before the policy looks at it."""

    voted: dict[str, list[Outcome]]  # per endpoint, language outcome after the 2-of-3 vote
    verdicts: dict[str, ProviderRound]  # production/suspended endpoints (controls excluded)
    control_refusals: list[Outcome]
    control_verdict: ControlVerdict
    weak: bool  # the refusal probe is weak this round (a control passed, C5)
    peers: PeerRound | None = None  # the peer comparison (verdicts, model-level findings)
    transcripts: Mapping[str, list[Transcript]] = field(default_factory=dict)  # per endpoint


async def probe_and_judge(plan: RoundPlan, concurrency_limit: int) -> Judged:
    """Pinned probes and each endpoint's language confirmations (one `pinned-probes` task
    run: `tasks.pinned_probes`) -> majority vote -> control judgement -> round verdicts.
    Shared by the round and a recorded triage."""
    chains = await tasks.pinned_probes(
        endpoint_count(len(plan.targets)),
        unwalked(plan.targets),
        unwalked(plan.locales),
        plan.start_locale,
        concurrency_limit,
    )
    by_tag = {c.tag: c for c in chains}
    results = {e.tag: by_tag[e.tag].result for e in plan.targets}  # plan order from here on
    outcomes = {t: r.all_outcomes for t, r in results.items()}
    confirmations = {
        e.tag: by_tag[e.tag].confirmations for e in plan.targets if by_tag[e.tag].confirmations
    }
    voted = await tasks.majority_vote(unwalked(outcomes), unwalked(confirmations))

    # positive controls judge the refusal probe (C5)
    control_refusals = [
        o for t in plan.controls for o in voted.get(t, []) if o.contract is Contract.REFUSAL
    ]
    control_verdict = judge_controls(control_refusals)
    weak = bool(plan.controls) and control_verdict.weak
    # every rate contract against the other endpoints of the round (issue 14)
    peers = compare_with_peers(voted, results, plan.controls)
    observe_only = observe_only_reasons()
    verdicts = {
        tag: round_verdict(tag, items, refusal_weak=weak, observe_only=observe_only)
        for tag, items in peers.outcomes.items()
        if tag not in plan.controls
    }
    transcripts = {t: r.transcripts for t, r in results.items()}
    return Judged(
        peers.outcomes, verdicts, control_refusals, control_verdict, weak, peers, transcripts
    )


async def mark_verdicts(judged: Judged, logger: Any) -> None:
    """A `verdict` task run for each endpoint with a story and one for the clean ones, all
    at once on the event loop: the run's graph tells the story (O3, `flows/graph.py`). A
    round runs them while it writes its audit material."""
    marks = [
        cast(  # an async task called with return_state gives an awaitable of its state
            Awaitable[State[Any]],
            tasks.endpoint_verdict(
                label=verdict_label(verdict),
                verdict=verdict,
                evidence=evidence_lines(judged.voted[tag]),
                return_state=True,  # a failed verdict is the endpoint's failure, not ours
            ),
        )
        for tag, verdict in sorted(judged.verdicts.items())
        if has_story(verdict)
    ]
    clean = sorted(t for t, v in judged.verdicts.items() if not has_story(v))
    if clean:
        marks.append(
            cast(
                Awaitable[State[Any]],
                tasks.clean_verdicts(label=clean_label(clean), tags=clean, return_state=True),
            )
        )
    for result in await asyncio.gather(*marks, return_exceptions=True):
        if isinstance(result, BaseException):
            logger.error("writing the verdict task runs failed (the round goes on): %s", result)
            break


def round_report(
    plan: RoundPlan,
    judged: Judged,
    mode: Mode,
    exclusions: Sequence[IgnoreEntry],
    *,
    round_id: str | None = None,
    only: Iterable[str] | None = None,
) -> RoundReport:
    """The pure round report the policy reads, for a round or (with `only`) for the
    endpoints a triage records. Excluded tags are counted for the capacity floor (Q4)."""
    keep = set(only) if only is not None else set(judged.verdicts)
    return RoundReport(
        round_id=round_id or plan.round_id,
        model=plan.model,
        at=plan.at,
        mode=mode,
        rounds={t: v for t, v in judged.verdicts.items() if t in keep},
        production_tags=plan.production_tags,
        excluded_tags=excluded_by_layers(
            exclusions, sorted(plan.production_tags | set(plan.locales))
        ),
        language_failed_locales={
            t: plan.locales[t] for t in tasks.language_failures(judged.voted) if t in keep
        },
    )
