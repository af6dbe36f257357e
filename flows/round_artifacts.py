"""The artifacts an analyst reads after each round (O3), written best-effort once the state
is applied (a failed write is logged and never fails the run):

    canary-round-<slug>        table: endpoint x contract, failing endpoints first
    canary-decisions-<slug>    markdown: decisions, the numbers behind every failing verdict,
                               the positive controls, provider.ignore, what each endpoint was
                               judged on (and what not, and why), the round's bill, the
                               gateway's production evidence of the model (flows/production.py)
    canary-transcripts-<slug>  markdown: bounded, scrubbed transcripts of the failing probes
                               (only in rounds where something failed)
    canary-status-<slug>       markdown: the living status, a new version each round, with
                               the refusal contract's standing and the day's spend and forecast

The content is built by pure functions (`flows.render`, `flows.transcripts`,
`flows.status_artifact`); this module only writes it, the artifacts at once, through the
client that asks a busy Prefect server again at once (`ground.prefect_api`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from prefect.artifacts import Artifact, MarkdownArtifact, TableArtifact

from flows.applied import AppliedRound
from flows.bill_artifact import bill_markdown, status_bill_markdown
from flows.decisions_artifact import decisions_markdown
from flows.evidence_artifact import contracts_markdown
from flows.judging import Judged
from flows.peer_step import peers_markdown
from flows.production import production_section
from flows.render import evidence_lines, outcome_rows
from flows.roundplan import RoundPlan
from flows.status_artifact import status_key, status_markdown
from flows.transcripts import failing_transcripts_markdown
from ground.prefect_api import busy_retry_client
from ground.settings import load_settings
from ground.slugs import model_slug
from probes.types import OutcomeStatus
from quarantine.budget import bill_view
from quarantine.judged import refusal_line
from quarantine.overview import endpoint_views
from wire.text import Scrubber


@contextmanager
def best_effort(logger: Any, what: str) -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        logger.error("writing the %s failed (the round goes on): %s", what, exc)


def _scrubber() -> Scrubber:
    key = load_settings().api_key
    return Scrubber(key.get_secret_value() if key else None)


async def publish_round_artifacts(applied: AppliedRound, logger: Any) -> None:
    """Write the round's artifacts (see module docstring) together, each best-effort."""
    plan, judged, slug = applied.plan, applied.judged, model_slug(applied.plan.model)
    production = await production_section(plan.model, plan.at, logger)  # O8: evidence only
    artifacts: list[tuple[str, Callable[[], Artifact | None]]] = [
        (
            "round table artifact",
            lambda: TableArtifact(
                key=f"canary-round-{slug}",
                table=outcome_rows(judged.voted, plan.locales, judged.verdicts, plan.controls),
                description=f"Round {plan.round_id}: every endpoint x contract, failures first",
            ),
        ),
        (
            "decisions artifact",
            lambda: MarkdownArtifact(
                key=f"canary-decisions-{slug}",
                markdown=decisions_markdown(applied)
                + contracts_markdown(judged.verdicts, judged.refusal)
                + production
                + bill_markdown(judged.bill, judged.budget)
                + peers_markdown(judged.peers),
                description=f"Round {plan.round_id}: decisions and the evidence behind them",
            ),
        ),
        ("transcripts artifact", lambda: _transcripts(plan, judged, slug)),
        ("status artifact", lambda: _status(applied)),
    ]
    async with busy_retry_client() as client:

        async def write(what: str, build: Callable[[], Artifact | None]) -> None:
            with best_effort(logger, what):
                artifact = build()
                if artifact is not None:
                    await artifact.acreate(client=client)

        await asyncio.gather(*(write(what, build) for what, build in artifacts))


def _transcripts(plan: RoundPlan, judged: Judged, slug: str) -> MarkdownArtifact | None:
    """Only in rounds where something failed."""
    markdown = failing_transcripts_markdown(
        plan.round_id, judged.verdicts, judged.voted, judged.transcripts, _scrubber()
    )
    if markdown is None:
        return None
    return MarkdownArtifact(
        key=f"canary-transcripts-{slug}",
        markdown=markdown,
        description=f"Round {plan.round_id}: transcripts of the failing probes",
    )


def _status(applied: AppliedRound) -> MarkdownArtifact:
    plan, state, ignore = applied.plan, applied.state, applied.ignore
    evidence = {
        tag: evidence_lines(items)
        for tag, items in applied.judged.voted.items()
        if any(o.status is OutcomeStatus.FAIL for o in items)
    }
    return MarkdownArtifact(
        key=status_key(plan.model),
        markdown=status_markdown(
            model=plan.model,
            mode=state.mode.value,
            round_id=plan.round_id,
            at=plan.at,
            views=endpoint_views(state, ignore, plan.at),
            ignore=ignore,
            evidence=evidence,
        )
        + _status_extras(applied),
        description=f"Quarantine of {plan.model} after round {plan.round_id}",
    )


def _status_extras(applied: AppliedRound) -> str:
    """The refusal contract's standing and the day's bill after this round."""
    state, settings = applied.state, load_settings()
    view = bill_view(
        state.bill,
        applied.plan.at,
        cron=settings.round_cron,
        budget_usd=settings.budget.for_model(state.model),
    )
    return status_bill_markdown(
        view, refusal_line(state.refusal_probe, state.controls_missing_since)
    )
