"""Judging a round's endpoints, shared by the round (`flows/canary_round.py`) and a recorded
triage (`flows/triage.py`):

    pinned probes and language confirmations (one `pinned-probes` task run)
      ─► majority vote (2 of 3) ─► positive controls judge the refusal probe (C5)
      ─► peer comparison ─► round verdicts against the contracts each endpoint is held to
         (quarantine/judged.py) ─► the round's bill (probes/cost.py)  = `probe_and_judge`
    a round the budget cannot afford: nothing probed, every endpoint
      frozen with the reason `budget` (C13)                          = `frozen_for_budget`
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
from flows.graph import clean_label, endpoint_count, group_of, has_story, verdict_label
from flows.peer_step import compare_with_peers, observe_only_reasons
from flows.render import evidence_lines
from flows.roundplan import RoundPlan
from flows.tasks import unwalked
from ground.settings import load_settings
from probes.contracts import ControlVerdict, judge_controls
from probes.cost import RoundBill, round_bill
from probes.peer_round import PeerRound
from probes.types import Contract, Outcome, Transcript
from quarantine.budget import BudgetLevel, BudgetPlan
from quarantine.exclusions import IgnoreEntry, excluded_by_layers
from quarantine.judged import (
    RefusalProbe,
    advertised_contracts,
    held_contracts,
    refusal_probe,
)
from quarantine.models import Mode, ModelState, RoundReport
from quarantine.verdicts import ProviderRound, round_verdict

BUDGET_FROZEN = "budget: the round could not afford its minimum"


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
    refusal: RefusalProbe = RefusalProbe.UNVERIFIED  # the refusal probe's standing (C5)
    bill: RoundBill | None = None  # what the round's probes cost (C13)
    budget: BudgetPlan | None = None  # how the round ran for the budget (C13)


def held_by_tag(
    plan: RoundPlan,
    state: ModelState | None,
    outcomes: Mapping[str, Sequence[Outcome]] | None = None,
) -> dict[str, tuple[str, ...]]:
    """What each endpoint is held to: its stored contracts and what its listing advertises
    now (quarantine/judged.py)."""
    stored = state.providers if state is not None else {}
    seen = outcomes or {}
    return {
        e.tag: held_contracts(
            stored[e.tag].held_to if e.tag in stored else (),
            advertised_contracts(e, seen.get(e.tag, ())),
        )
        for e in plan.targets
    }


async def probe_and_judge(
    plan: RoundPlan,
    concurrency_limit: int,
    state: ModelState | None = None,
    budget: BudgetPlan | None = None,
) -> Judged:
    """Pinned probes and each endpoint's language confirmations (one `pinned-probes` task
    run: `tasks.pinned_probes`) -> majority vote -> control judgement -> round verdicts
    (against what each endpoint is held to in `state`) -> the round's bill. A `budget` that
    degraded the round sets its start samples or rotates its contracts. Shared by the round
    and a recorded triage."""
    config = load_settings().probe
    rotated = budget is not None and budget.level is BudgetLevel.ROTATED
    if budget is not None and budget.level is BudgetLevel.FEWER_STARTS:
        config = config.model_copy(update={"start_samples": budget.start_samples})
    chains = await tasks.pinned_probes(
        endpoint_count(len(plan.targets)),
        unwalked(plan.targets),
        unwalked(plan.locales),
        plan.start_locale,
        concurrency_limit,
        unwalked(config),
        unwalked(budget.rotation) if budget is not None and rotated else None,
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
    refusal = refusal_probe(plan.controls, control_verdict)
    # every rate contract against the other endpoints of the round (issue 14)
    peers = compare_with_peers(voted, results, plan.controls)
    held = held_by_tag(plan, state, peers.outcomes)
    verdicts = _verdicts(plan, peers.outcomes, held, refusal)
    transcripts = {t: r.transcripts for t, r in results.items()}
    billed = {t: [*transcripts[t], *by_tag[t].confirmation_transcripts] for t in transcripts}
    pricing = {e.tag: e.pricing for e in plan.targets}
    return Judged(
        peers.outcomes,
        verdicts,
        control_refusals,
        control_verdict,
        refusal is RefusalProbe.WEAK,
        peers,
        transcripts,
        refusal,
        round_bill(billed, pricing, config.max_tokens),
        budget,
    )


def _verdicts(
    plan: RoundPlan,
    outcomes: Mapping[str, list[Outcome]],
    held: Mapping[str, tuple[str, ...]],
    refusal: RefusalProbe,
) -> dict[str, ProviderRound]:
    """Each judged endpoint's verdict against what it is held to."""
    observe_only = observe_only_reasons()
    return {
        tag: round_verdict(
            tag,
            items,
            refusal=refusal,
            observe_only=observe_only,
            held_to=held.get(tag),
        )
        for tag, items in outcomes.items()
        if tag not in plan.controls
    }


def frozen_for_budget(plan: RoundPlan, state: ModelState, budget: BudgetPlan) -> Judged:
    """A round the budget cannot afford (C13): nothing is probed; every endpoint's verdict is
    frozen with the reason `budget` (no streak moves, nothing counts as clean)."""
    held = held_by_tag(plan, state)
    verdicts = {
        e.tag: round_verdict(e.tag, [], held_to=held[e.tag], missing_why=BUDGET_FROZEN)
        for e in plan.targets
        if e.tag not in plan.controls
    }
    no_controls = judge_controls([])
    return Judged(
        voted={t: [] for t in verdicts},
        verdicts=verdicts,
        control_refusals=[],
        control_verdict=no_controls,
        weak=False,
        refusal=refusal_probe(plan.controls, no_controls),
        bill=RoundBill(),
        budget=budget,
    )


async def mark_verdicts(judged: Judged, logger: Any) -> None:
    """A `verdict` task run for each endpoint with a story and one for each group of the
    others (clean, not judged, frozen for the budget), all at once on the event loop: the
    run's graph tells the story (O3, `flows/graph.py`). A round runs them while it writes
    its audit material."""
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
    groups: dict[str, list[str]] = {}
    for tag, verdict in sorted(judged.verdicts.items()):
        group = group_of(verdict)
        if group is not None:
            groups.setdefault(group, []).append(tag)
    marks += [
        cast(
            Awaitable[State[Any]],
            tasks.clean_verdicts(
                label=clean_label(tags, group), tags=tags, group=group, return_state=True
            ),
        )
        for group, tags in groups.items()
    ]
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
        refusal_probe=judged.refusal.value,
        controls_missing=not plan.controls if only is None else None,
        bill=judged.bill if only is None else None,
        budget=judged.budget if only is None else None,
    )
