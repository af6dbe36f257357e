"""On-demand triage (O5): re-probe one endpoint now, in a chosen locale, for
chosen contracts, `repeats` times, with the full transcripts as an artifact.
It never touches the schedule and, unless `record=True`, never the quarantine
state.

With `record=True` the evidence must be as good as a round's: every contract,
the positive controls probed alongside (C5), language failures confirmed 2 of 3
(C8), in the model's stored mode. The result is then applied as a round for that
one endpoint at the current time (and written to the ledger); a scheduled round
in the same half-hour slot afterwards is skipped, like any second round of a slot.

`evidence`: why it was started, in words; the automation on a provider the gateway found
suspect from production traffic (O8, `deployments/local.py`) passes the gateway's numbers
(`production: 14 of 120 replies rejected for a stray start, peers 0 of 900`), shown at the
top of the transcripts artifact."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import acreate_markdown_artifact

from flows import tasks
from flows.judging import mark_verdicts, probe_and_judge, round_report, stored_mode
from flows.render import transcripts_markdown
from flows.roundplan import plan_round
from ground.heap import freeze_loaded
from ground.settings import load_settings
from ground.slugs import model_slug
from probes.types import Contract, Outcome, Transcript
from quarantine.adapters.ignore import aread_layers
from quarantine.adapters.store import aload_state

EVIDENCE_CHARS = 500  # a started-on line is a sentence, not a document


@flow(name="triage", flow_run_name="triage {provider} ({model})")
async def triage(
    model: str,
    provider: str,
    contracts: list[str] | None = None,
    locale: str | None = None,
    repeats: int = 1,
    record: bool = False,
    evidence: str | None = None,
) -> dict[str, Any]:
    """Re-probe endpoint `provider` of `model` now; transcripts go to an artifact."""
    freeze_loaded()  # as in the round: no full collection walks the loaded modules
    logger = get_run_logger()
    settings = load_settings()
    wanted = {Contract(c) for c in contracts} if contracts else set(Contract)
    if record and wanted != set(Contract):
        raise ValueError("--record needs every contract (partial evidence cannot clear a host)")
    locale = locale or "en"
    if locale not in settings.locales:
        raise ValueError(f"unknown locale {locale!r}; configured: {settings.locales}")
    if not 1 <= repeats <= 50:
        raise ValueError(f"repeats must be between 1 and 50, got {repeats}")
    evidence = evidence[:EVIDENCE_CHARS] if evidence else None
    if evidence:
        logger.info("triage of %s started on: %s", provider, evidence)
    now = datetime.now(UTC)
    discovered = await tasks.discover_endpoints(model)
    endpoint = plan_round(model, now, discovered, locales=[locale], subset=[provider]).targets[0]
    transcripts: list[Transcript] = []
    outcomes: list[Outcome] = []
    for _ in range(repeats):
        result = await tasks.probe_endpoint(endpoint, locale)
        transcripts += [t for t in result.transcripts if t.contract in wanted]
        outcomes += [o for o in result.all_outcomes if o.contract in wanted]
    key = f"canary-triage-{model_slug(model)}"
    await acreate_markdown_artifact(
        key=key,
        markdown=with_evidence(
            transcripts_markdown(model, provider, locale, transcripts, outcomes), evidence
        ),
        description=f"Triage of {provider}: full transcripts",
    )
    decisions: list[dict[str, Any]] = []
    if record:
        decisions = await _record(model, provider, locale, discovered, now, logger)
    logger.info("triage %s: %s", provider, tasks.brief(outcomes))
    return {
        "model": model,
        "provider": provider,
        "locale": locale,
        "repeats": repeats,
        "outcomes": [o.model_dump(mode="json") for o in outcomes],
        "transcripts": len(transcripts),
        "artifact": key,
        "recorded": record,
        "decisions": decisions,
        "evidence": evidence,
    }


def with_evidence(markdown: str, evidence: str | None) -> str:
    """The artifact with what started the triage under its title (pure)."""
    if not evidence:
        return markdown
    title, _, rest = markdown.partition("\n")
    return f"{title}\n\n> Started on {evidence}\n{rest}"


async def _record(
    model: str, tag: str, locale: str, discovered: Sequence[Any], now: datetime, logger: Any
) -> list[dict[str, Any]]:
    """Judge `tag` like a round does (controls, confirmations) and apply it."""
    settings = load_settings()
    state = await aload_state(model)
    if state.last_round_at is not None and now < state.last_round_at:
        raise ValueError(
            f"the last applied round ({state.last_round_id}) is later than now; not recording"
        )
    plan = plan_round(
        model, now, discovered, locales=[locale], controls=settings.control_providers, subset=[tag]
    )
    judged = await probe_and_judge(plan, settings.probe.concurrency)
    await mark_verdicts(judged, logger)
    layers = await aread_layers(model)
    report = round_report(
        plan,
        judged,
        stored_mode(state, settings.mode),
        layers.entries(state, now),
        round_id=f"triage-{tag}@{now:%Y-%m-%dT%H:%M:%SZ}",
        only=[tag],
    )
    _state, decisions = await tasks.apply_report(report)
    await tasks.record_ledger(report, {tag: judged.voted[tag]}, decisions)
    return [d.model_dump(mode="json") for d in decisions]
