"""The canary round (O1): one flow run per model per round.

    discover ─► pinned probes (one task run for every endpoint, suspended ones and
                 controls too), each endpoint's language confirmations (2 more attempts per
                 language failure) right after its own probes
             ─► majority vote (2 of 3) ─► peer comparison (each rate contract against the
                 other endpoints; model-level findings) ─► round verdicts (controls judge
                 the refusal probe)
             ─► policy step with the capacity floor ─► apply (enforce) / record (observe)
             ─► a `verdict` task run per endpoint with a story (red when a contract
                 failed) and one for the clean ones (flows/graph.py), with the ledger rows
                 and artifacts
                 (flows/round_artifacts.py) ─► events, admin notifications

`at` is the round's logical time (default now), so rounds can be replayed and
the 1/3/7-day ladder exercised without waiting; an `at` more than one slot in the
future is refused unless `allow_future` (a typo would block the model's later rounds).
Only one round per model runs at a time (O2): rounds of one model hold its round
lock, a renewed lease that a killed or cut-off round cannot keep (`flows/roundlock.py`),
and a round whose logical time was already applied ends `Cancelled` without touching
state, so two rounds started at once for the same slot count once (the deployment's own
`CANCEL_NEW` limit does the same for schedules).

The canary distrusts itself: a *blind* round (our key or credits refused, or too many
endpoints unreachable; `quarantine/blind.py`) applies nothing, ends Failed with its
one-line reason and alerts admins; its slot stays open. A stored last round in the
future fails the round with the repair (`canary clock reset`). A discovery failure fails
the run and changes no state; one misbehaving provider never crashes the round (its
probes end in typed outcomes). A ledger that cannot be written leaves the round
`Completed` under the name "Completed with warnings", with an alert.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, cast
from uuid import UUID

from prefect import flow, get_run_logger
from prefect.events import emit_event
from prefect.runtime import flow_run
from prefect.states import Cancelled, Completed, Failed, State
from pydantic import BaseModel

from flows import tasks
from flows.blind import end_blind
from flows.graph import clean_label, endpoint_count, has_story, verdict_label
from flows.notify import alert_lines, emit_decision_events, emit_weak_probe_event, notify_admins
from flows.peer_step import compare_with_peers, finding_lines, observe_only_reasons
from flows.render import endpoint_lines, evidence_lines
from flows.round_artifacts import best_effort, publish_round_artifacts
from flows.roundlock import round_lock
from flows.roundplan import RoundPlan, plan_round, round_id, round_index
from flows.tasks import unwalked
from ground.clock import as_utc
from ground.heap import freeze_loaded
from ground.prefect_api import busy_retry_client, shared_busy_retry_client
from ground.settings import DEFAULT_MODEL, load_settings
from probes.contracts import ControlVerdict, judge_controls
from probes.errors import DiscoveryError
from probes.peer_round import PeerRound
from probes.types import Contract, Outcome, Transcript
from quarantine.adapters.ignore import aread_layers
from quarantine.adapters.lease import Lease
from quarantine.adapters.locking import serialised
from quarantine.adapters.store import aload_state, state_lock_name
from quarantine.blind import blind_discovery, blind_round
from quarantine.clock import clock_ahead, future_at
from quarantine.errors import LeaseLostError, LeaseTimeoutError
from quarantine.exclusions import IgnoreEntry, excluded_by_layers
from quarantine.models import Decision, Mode, ModelState, RoundReport
from quarantine.verdicts import ProviderRound, round_verdict


class RoundSummary(BaseModel):
    """What a round returns (and the CLI prints)."""

    round_id: str
    model: str
    mode: str
    at: datetime
    endpoints: list[tuple[str, str, str, str]]  # tag, locale, verdict, reasons
    controls: dict[str, str]  # control tag -> refusal outcome
    weak_refusal_probe: bool
    decisions: list[dict[str, Any]]
    ignore: list[dict[str, Any]]
    notified: str
    findings: list[str] = []  # model-level findings of the peer comparison
    ignored: dict[str, list[str]] = {}  # per endpoint, failures recorded but not counted
    warnings: list[str] = []  # audit material that could not be written (e.g. the ledger)


def _run_name() -> str:
    params = flow_run.parameters
    at = params.get("at") or datetime.now(UTC)
    if isinstance(at, str):
        at = datetime.fromisoformat(at)
    return f"{params.get('model', DEFAULT_MODEL)} @ {as_utc(at):%Y-%m-%d %H:%MZ}"


async def _tag_run(*tags: str) -> None:
    """Tags say model and mode (O3), however the run was started (CLI, schedule, UI)."""
    run_id = flow_run.id
    if run_id is None:
        return
    async with busy_retry_client() as client:
        await client.update_flow_run(UUID(run_id), tags=sorted({*flow_run.tags, *tags}))


@flow(name="canary-round", flow_run_name=_run_name, log_prints=False)
async def canary_round(
    model: str = DEFAULT_MODEL,
    mode: Literal["observe", "enforce"] | None = None,
    at: datetime | None = None,
    endpoints: list[str] | None = None,
    allow_future: bool = False,
) -> RoundSummary | State[Any]:
    """Probe every endpoint of `model` pinned, and apply (enforce) or record (observe).
    `mode` None keeps the model's stored mode (CANARY_MODE for a new model): a round
    switches modes only when asked to. `at` more than one slot ahead of now is refused
    unless `allow_future`."""
    freeze_loaded()  # no full collection walks the loaded modules mid-probe (ground/heap.py)
    logger = get_run_logger()
    settings = load_settings()
    wall = datetime.now(UTC)
    at = as_utc(at or wall)
    if future_at(at, wall) and not allow_future:
        message = (
            f"at={at:%Y-%m-%d %H:%MZ} is more than one half-hour slot after now "
            f"({wall:%Y-%m-%d %H:%MZ}); nothing done (allow_future replays a future slot)"
        )
        logger.error(message)
        return Failed(message=message)
    try:
        async with shared_busy_retry_client(), round_lock(model, settings) as lease:
            return await _locked_round(model, mode, at, wall, endpoints, lease, logger)
    except LeaseTimeoutError as exc:
        message = (
            f"the round lock of {model} stayed held by {exc.view.describe()} for "
            f"{settings.round_lock_wait_s:.0f} s; this run changed nothing"
        )
        logger.warning(message)
        return Cancelled(message=message)
    except LeaseLostError as exc:
        message = f"{exc}; nothing applied"
        logger.error(message)
        return Failed(message=message)


async def _locked_round(
    model: str,
    mode: str | None,
    at: datetime,
    wall: datetime,
    endpoints: list[str] | None,
    lease: Lease,
    logger: Any,
) -> RoundSummary | State[Any]:
    settings = load_settings()
    state = await aload_state(model)
    run_mode = Mode(mode) if mode else stored_mode(state, settings.mode)
    tagging = asyncio.create_task(_tag_run(f"model:{model}", f"mode:{run_mode.value}"))
    try:
        refused = slot_refusal(model, state, at, wall)
        if refused is not None:
            (logger.error if refused.is_failed() else logger.warning)(refused.message)
            return refused
        return await _round(model, run_mode, at, endpoints, state, lease, logger)
    finally:
        await tagging


def slot_refusal(model: str, state: ModelState, at: datetime, wall: datetime) -> State[Any] | None:
    """None when the half-hour slot of `at` is after the last applied round; otherwise the
    run's end: `Cancelled` (the slot was applied), `Failed` naming the repair when the
    stored last round lies in the future of `wall`."""
    if state.last_round_at is None or round_index(at) > round_index(state.last_round_at):
        return None
    if clock_ahead(state, wall) and not future_at(at, wall):
        return Failed(
            message=(
                f"the last applied round of {model} ({state.last_round_id}) is in the future, "
                f"so every round until then changes nothing; `canary clock reset --model {model} "
                "--reason ...` repairs it"
            )
        )
    return Cancelled(
        message=(
            f"the half-hour slot of {at:%Y-%m-%d %H:%MZ} is not after the last applied round "
            f"({state.last_round_id}); this run changed nothing"
        )
    )


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
    outcomes = {t: list(r.outcomes.values()) for t, r in results.items()}
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


async def _round(
    model: str,
    mode: Mode,
    at: datetime,
    subset: list[str] | None,
    state: ModelState,
    lease: Lease,
    logger: Any,
) -> RoundSummary | State[Any]:
    settings = load_settings()
    try:
        discovered = await tasks.discover_endpoints(model)
    except DiscoveryError as exc:
        blind = blind_discovery(exc, settings.base_url)
        if blind is None:
            raise
        rid = round_id(model, at)
        return await end_blind(model, rid, at, blind, settings.notification_block, logger)
    plan = plan_round(
        model,
        at,
        discovered,
        locales=settings.locales,
        controls=settings.control_providers,
        subset=subset,
        sticky={tag: ps.sticky_locale for tag, ps in state.providers.items()},
    )
    logger.info(
        "round %s: %d endpoints (%d controls), mode %s",
        plan.round_id, len(plan.targets), len(plan.controls), mode.value,
    )  # fmt: skip
    judged = await probe_and_judge(plan, settings.probe.concurrency)
    marking: asyncio.Task[None] | None = None
    try:
        blind = blind_round(
            judged.verdicts, judged.voted, transport_share=settings.blind_transport_share
        )
        if blind is not None:
            return await end_blind(
                model, plan.round_id, at, blind, settings.notification_block, logger
            )
        async with AsyncExitStack() as writing:
            # Never apply under a round lock this run no longer holds (checked while the
            # layers are read); the state-write lock is taken meanwhile, not after, so the
            # apply is one read and one write. The lock request ends before anything is
            # raised, so a lock taken is always given back (by `writing`).
            taking = asyncio.create_task(
                writing.enter_async_context(serialised(state_lock_name(model)))
            )
            try:
                layers, _ = await asyncio.gather(aread_layers(model), lease.check())
            finally:
                await asyncio.wait([taking])
            await taking  # a lock that could not be taken fails the round, as in `apply`
            report = round_report(plan, judged, mode, layers.entries(state, at))
            planned = await tasks.policy_step(unwalked(state), unwalked(report))
            new_state, decisions = await tasks.apply_report(
                unwalked(report), unwalked(planned), lock_held=True, known=unwalked(state)
            )
            # Both locks protect the state, now applied and marked with this slot (a round
            # of the same slot ends Cancelled): give them back before the audit writes,
            # one after the other (two writes at once meet in SQLite, and one is sent again).
            await writing.aclose()
            await lease.release()
        # From here on the state is applied: audit material and alerts are best-effort, so a
        # broken webhook or artifact write cannot fail the run (and hide its decisions). The
        # artifact and ledger writes start first, the verdict task runs next to them: creating
        # a task run holds the event loop a few ms, and the writes are on their way meanwhile.
        # (Started before the state write, the server's recording of the verdict task runs
        # held that write up.)
        publishing = asyncio.create_task(
            publish(
                plan,
                mode,
                report,
                judged,
                decisions,
                layers.entries(new_state, at),
                settings.notification_block,
                logger,
                new_state,
            )
        )
        marking = asyncio.create_task(mark_verdicts(judged, logger))
        summary = await publishing
    finally:  # a blind round and a failed apply show their verdicts too
        await (marking if marking is not None else mark_verdicts(judged, logger))
    if summary.warnings:
        return Completed(
            data=summary, name="Completed with warnings", message="; ".join(summary.warnings)
        )
    return summary


async def publish(
    plan: RoundPlan,
    mode: Mode,
    report: RoundReport,
    judged: Judged,
    decisions: list[Decision],
    entries: list[IgnoreEntry],
    notification_block: str | None,
    logger: Any,
    state: ModelState | None = None,
) -> RoundSummary:
    """Ledger rows, artifacts (O3), events and admin alerts (Q8) for an applied round, the
    ledger and the artifacts written at once; `entries` is provider.ignore after the round,
    `state` the state just applied (for the living status artifact)."""
    model = plan.model
    warnings: list[str] = []

    async def ledger() -> None:
        try:
            await tasks.record_ledger(report, judged.voted, decisions)
        except Exception as exc:  # the state is applied: say so loudly, do not fail the run
            warnings.append(ledger_warning(exc))
            logger.error("round applied, but %s", warnings[-1])
            with best_effort(logger, "ledger alert event"):
                emit_event(
                    event="canary.ledger.write_failed",
                    resource={
                        "prefect.resource.id": f"canary.ledger.{model}",
                        "canary.model": model,
                    },
                    payload={"round_id": plan.round_id, "error": warnings[-1]},
                )

    await asyncio.gather(
        ledger(), publish_round_artifacts(plan, mode, judged, decisions, entries, state, logger)
    )
    with best_effort(logger, "decision events"):
        emit_decision_events(decisions, round_id=plan.round_id)
    lines = alert_lines(decisions) + finding_lines(judged.peers) + warnings
    if judged.weak:
        passed = list(judged.control_verdict.passed_controls)
        with best_effort(logger, "weak-probe event"):
            emit_weak_probe_event(model, plan.round_id, passed, judged.control_verdict.reason)
        lines.insert(0, f"weak refusal probe: control(s) {', '.join(passed)} passed")
    subject = f"provider-canary: {model} ({plan.round_id})"
    try:
        notified = await notify_admins(notification_block, subject, lines)
    except Exception as exc:
        logger.error(
            "notification through %s failed (%s); alerts follow in the log", notification_block, exc
        )
        notified = await notify_admins(None, subject, lines)
    return RoundSummary(
        round_id=plan.round_id,
        model=model,
        mode=mode.value,
        at=plan.at,
        endpoints=endpoint_lines(judged.verdicts, plan.locales),
        controls={o.tag or "?": o.status.value for o in judged.control_refusals},
        weak_refusal_probe=judged.weak,
        decisions=[d.model_dump(mode="json") for d in decisions],
        ignore=[e.model_dump(mode="json") for e in entries],
        notified=notified,
        findings=finding_lines(judged.peers),
        ignored={
            t: list(v.ignored_reasons) for t, v in judged.verdicts.items() if v.ignored_reasons
        },
        warnings=warnings,
    )


def ledger_warning(exc: BaseException) -> str:
    """One line for a ledger write that failed (first line of the driver's message)."""
    detail = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    first = detail[0][:200] if detail else ""
    return (
        f"ledger write failed ({type(exc).__name__}: {first}); the round's rows are missing "
        "from the ledger (README: repairing the ledger)"
    )
