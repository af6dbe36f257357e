"""Prefect tasks of the canary round. Each body is a few lines that call a
pure function or a client from probes/, quarantine/ or canary/; the DAG and
the Prefect-specific glue live in `flows/canary_round.py` and `flows/judging.py`.

Tasks read settings from the environment (`load_settings()`) instead of
taking them as parameters, so no secret ever becomes a recorded parameter.

Every task is async, pure steps too: the round is an async flow, and Prefect runs a sync
task called from it through its own event-loop thread (~50 ms a task run, against a few ms
for an async one). The round passes its large arguments `unwalked`. Reading the state block
and the exclusion layers, the peer comparison and the ledger write are plain calls, not task
runs: they are not steps of O1's DAG, their results are in the round's artifacts, and every
task run costs the round a few ms and the server several writes while the round waits to
write."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple, cast

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.states import State
from prefect.utilities.annotations import quote

from flows.graph import TASK_NAME, clean_state, install_log_filter, verdict_state
from flows.roundplan import launch_order
from ground.settings import ProbeConfig, load_settings
from probes.client import ProbeClient
from probes.probeset import (
    ProbeSetResult,
    confirmation_probes,
    judge_language,
    majority,
    run_probe_set,
)
from probes.rotation import run_rotated_probe_set
from probes.types import Contract, Endpoint, Outcome, OutcomeStatus, Transcript
from probes.unjudged import refused_everything, unjudged_outcomes, unjudged_set
from quarantine.adapters.ledger import Ledger
from quarantine.adapters.store import aupdate_state
from quarantine.budget import Probing
from quarantine.models import Decision, ModelState, RoundReport
from quarantine.policy import step
from quarantine.verdicts import ProviderRound
from wire.text import Scrubber, upstream_text


class Planned(NamedTuple):
    """A policy step computed on the state of revision `base_revision`."""

    base_revision: int
    state: ModelState
    decisions: list[Decision]


@task(name="discover", cache_policy=NO_CACHE, retries=0)
async def discover_endpoints(model: str) -> list[Endpoint]:
    """C1: the endpoints serving `model` (typed DiscoveryError on failure)."""
    async with ProbeClient.from_settings(load_settings()) as client:
        return await client.discover(model)


class Confirmations(NamedTuple):
    """An endpoint's language confirmations (C8): their outcomes, and their transcripts
    (what they cost, C13)."""

    outcomes: list[Outcome]
    transcripts: list[Transcript]


class Chain(NamedTuple):
    """One endpoint's probe chain: its probe set and its language confirmations (C8)."""

    tag: str
    result: ProbeSetResult
    confirmations: list[Outcome]
    confirmation_transcripts: tuple[Transcript, ...] = ()


@task(name="pinned-probes", task_run_name="probe {label}", cache_policy=NO_CACHE)
async def pinned_probes(
    label: str,
    targets: Sequence[Endpoint],
    locales: Mapping[str, str],
    start_locale: str | None,
    concurrency: int,
    config: ProbeConfig | None = None,
    rotation: Mapping[str, Probing] | None = None,
) -> list[Chain]:
    """C2-C9 for every endpoint of a round, in one task run: probe sets at most
    `concurrency` at a time, started slowest first (`launch_order`), and each endpoint's
    language confirmations (a `language-confirmation` task run) right after its own probes
    if its language probe failed, so no endpoint waits for the slowest one's probes. One
    line per endpoint in this task run's log; results in launch order.

    One task run for all, not one per endpoint: a task run costs the round's event loop a
    few ms and the Prefect server several writes, and at 100 endpoints those task runs
    took more of the round than the probes' critical path (issue 13). The per-endpoint
    story is in the `verdict` task runs (`flows/graph.py`) and the round's artifacts.

    `config` (default: the settings') is the probe configuration of the round, e.g. fewer
    start samples for the budget; `rotation` the probing of each endpoint of a round whose
    contracts rotate (C13, `probes/rotation.py`)."""
    logger = get_run_logger()
    gate = asyncio.Semaphore(concurrency)

    async def chain(endpoint: Endpoint) -> Chain:
        locale = locales[endpoint.tag]
        probing = rotation.get(endpoint.tag) if rotation else None
        async with gate:
            result = await probe_set(endpoint, locale, start_locale, config, probing)
        outcomes = result.all_outcomes
        logger.info("probed %s [%s]: %s", endpoint.tag, locale, brief(outcomes))
        if not language_failures({endpoint.tag: outcomes}):
            return Chain(endpoint.tag, result, [])
        async with gate:
            confirmed = await confirm_language_task(endpoint, locale)
        return Chain(endpoint.tag, result, confirmed.outcomes, tuple(confirmed.transcripts))

    return list(await asyncio.gather(*(chain(e) for e in launch_order(targets))))


@task(name="probe", task_run_name="probe {endpoint.tag} [{locale}]", cache_policy=NO_CACHE)
async def probe_endpoint(
    endpoint: Endpoint, locale: str, start_locale: str | None = None
) -> ProbeSetResult:
    """One endpoint's probe set as a task run of its own (a triage's repeats)."""
    return await probe_set(endpoint, locale, start_locale)


async def probe_set(
    endpoint: Endpoint,
    locale: str,
    start_locale: str | None = None,
    config: ProbeConfig | None = None,
    probing: Probing | None = None,
) -> ProbeSetResult:
    """C2-C9: one pinned probe set against one endpoint in one locale (start samples in
    the round's shared `start_locale`), with `config` (default: the settings'), or rotated
    as `probing` says. Whatever the endpoint sent, this returns typed outcomes
    (probes/unjudged.py): an exception while probing or judging it freezes that endpoint,
    never fails the round."""
    settings = load_settings()
    config = config or settings.probe
    if probing is not None:
        config = config.model_copy(update={"start_samples": probing.start_samples})
    try:
        async with ProbeClient(settings.base_url, settings.api_key, config) as client:
            if probing is None:
                result = await run_probe_set(client, endpoint, locale, start_locale=start_locale)
            else:
                result = await run_rotated_probe_set(
                    client, endpoint, locale, start_locale=start_locale, contracts=probing.contracts
                )
    except Exception as exc:
        _log_unjudged(endpoint, exc)
        return unjudged_set(endpoint, locale, exc)
    return refused_everything(result)


def brief(outcomes: Iterable[Outcome]) -> str:
    """`language=pass, start=fail, ...`: one endpoint's outcomes in a log line."""
    return ", ".join(f"{o.contract.value}={o.status.value}" for o in outcomes)


def _log_unjudged(endpoint: Endpoint, exc: BaseException) -> None:
    """One line, the exception's type and scrubbed message (no traceback: it could quote
    provider bytes)."""
    key = load_settings().api_key
    scrub = Scrubber(key.get_secret_value() if key else None)
    get_run_logger().warning(
        "probing %s raised %s (%s); its outcomes are invalid_response (frozen)",
        endpoint.tag,
        type(exc).__name__,
        upstream_text(str(exc), scrub, 200),
    )


@task(
    name="language-confirmation",
    task_run_name="confirm {endpoint.tag} [{locale}]",
    cache_policy=NO_CACHE,
)
async def confirm_language_task(endpoint: Endpoint, locale: str) -> Confirmations:
    """C8: two immediate confirmation attempts in the same locale, each judged on its own;
    their transcripts are billed with the round (C13)."""
    settings = load_settings()
    try:
        async with ProbeClient.from_settings(settings) as client:
            transcripts = await confirmation_probes(client, endpoint, locale)
        return Confirmations([judge_language(t, locale) for t in transcripts], transcripts)
    except Exception as exc:
        _log_unjudged(endpoint, exc)
        attempts = settings.probe.confirmations
        return Confirmations(unjudged_outcomes(endpoint, locale, exc, attempts=attempts), [])


@task(name="majority-vote", cache_policy=NO_CACHE)
async def majority_vote(
    outcomes: Mapping[str, Sequence[Outcome]],
    confirmations: Mapping[str, Sequence[Outcome]],
) -> dict[str, list[Outcome]]:
    """C8: replace each confirmed endpoint's language outcome by the 2-of-3 vote."""
    voted: dict[str, list[Outcome]] = {}
    for tag, items in outcomes.items():
        extra = confirmations.get(tag)
        if not extra:
            voted[tag] = list(items)
            continue
        voted[tag] = [
            majority([o, *extra]) if o.contract is Contract.LANGUAGE else o for o in items
        ]
    return voted


def language_failures(outcomes: Mapping[str, Sequence[Outcome]]) -> list[str]:
    return sorted(
        tag
        for tag, items in outcomes.items()
        if any(o.contract is Contract.LANGUAGE and o.status is OutcomeStatus.FAIL for o in items)
    )


install_log_filter()


@task(name=TASK_NAME, task_run_name="{label}", cache_policy=NO_CACHE)
async def endpoint_verdict(label: str, verdict: ProviderRound, evidence: list[str]) -> State:
    """The endpoint's round verdict as this task run's state (`flows.graph`): red in the
    run's graph when a contract failed, named after the contracts that failed. Async, so a
    round runs its verdict task runs together on its event loop (no thread each)."""
    return verdict_state(verdict, evidence)


@task(name=TASK_NAME, task_run_name="{label}", cache_policy=NO_CACHE)
async def clean_verdicts(label: str, tags: list[str], group: str = "clean") -> State:
    """The round's clean endpoints in one task run, Completed "Clean"; or those of another
    group without a story of their own ("Not judged", "Frozen" for the budget; `flows.graph`)."""
    return clean_state(tags, group)


@task(name="policy-step (capacity floor)", cache_policy=NO_CACHE)
async def policy_step(state: ModelState, report: RoundReport) -> Planned:
    """Q1-Q6: what the policy decides on the state the round read (capacity floor
    included); `apply_report` stores it unless the state changed meanwhile."""
    return Planned(state.revision, *step(state, report, load_settings().policy))


@task(name="apply", task_run_name="{report.mode.value}: apply decisions", cache_policy=NO_CACHE)
async def apply_report(
    report: RoundReport,
    planned: Planned | None = None,
    lock_held: bool = False,
    known: ModelState | None = None,
) -> tuple[ModelState, list[Decision]]:
    """Enforce or observe (Q3): store the planned step under the model's state lock,
    revision-checked; the policy runs again only if the stored state is not the one it was
    planned on (an admin write slipped in). `known` is the state the step was planned on,
    so the write needs no read of its own before the revision check."""
    config = load_settings().policy

    def update(current: ModelState) -> tuple[ModelState, list[Decision]]:
        if planned is not None and current.revision == planned.base_revision:
            return planned.state, planned.decisions
        return step(current, report, config)

    return await aupdate_state(report.model, update, lock_held=lock_held, known=known)


async def record_ledger(
    report: RoundReport,
    outcomes: Mapping[str, Sequence[Outcome]],
    decisions: Sequence[Decision],
) -> None:
    """One ledger row per endpoint of the round and one per decision, in one transaction
    (in a worker thread, so the round's other audit writes go on meanwhile). A plain call,
    not a task run: a failed write is the round's warning, alert and event (`round_audit.publish`)."""
    await asyncio.to_thread(
        _record, load_settings().resolved_ledger_url, report, outcomes, decisions
    )


def _record(
    url: str,
    report: RoundReport,
    outcomes: Mapping[str, Sequence[Outcome]],
    decisions: Sequence[Decision],
) -> None:
    ledger = Ledger(url)
    try:
        ledger.record(report, outcomes, decisions)
    finally:
        ledger.close()


def unwalked[T](value: T) -> T:
    """`value` as a task argument that Prefect hands over without walking it (`quote`). The
    round's large arguments (every outcome and transcript of every endpoint) would otherwise
    be visited object by object for upstream futures they cannot hold: ~2 s of a 100-endpoint
    round. No upstream edge is lost: these values are plain data, never futures."""
    return cast(T, quote(value))
