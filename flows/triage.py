"""On-demand triage (O5): re-probe one endpoint now, in a chosen locale, for
chosen contracts, `repeats` times, with the full transcripts as an artifact.
It never touches the schedule and, unless `record=True`, never the quarantine
state: with `record` the result is fed to the policy as a round for that one
endpoint (and written to the ledger)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import acreate_markdown_artifact

from canary.roundplan import plan_round
from canary.settings import load_settings
from flows import tasks
from flows.render import transcripts_markdown
from probes.types import Contract, Outcome, Transcript
from quarantine.exclusions import excluded_by_layers
from quarantine.models import Mode, RoundReport, model_slug
from quarantine.verdicts import round_verdict


@flow(name="triage", flow_run_name="triage {provider} ({model})")
async def triage(
    model: str,
    provider: str,
    contracts: list[str] | None = None,
    locale: str | None = None,
    repeats: int = 1,
    record: bool = False,
) -> dict[str, Any]:
    """Re-probe endpoint `provider` of `model` now; transcripts go to an artifact."""
    logger = get_run_logger()
    settings = load_settings()
    wanted = {Contract(c) for c in contracts} if contracts else set(Contract)
    locale = locale or "en"
    if locale not in settings.locales:
        raise ValueError(f"unknown locale {locale!r}; configured: {settings.locales}")
    if not 1 <= repeats <= 50:
        raise ValueError(f"repeats must be between 1 and 50, got {repeats}")
    now = datetime.now(UTC)
    discovered = await tasks.discover_endpoints(model)
    controls = settings.control_providers
    plan = plan_round(model, now, discovered, locales=[locale], controls=controls)
    endpoint = plan_round(model, now, discovered, locales=[locale], subset=[provider]).targets[0]
    transcripts: list[Transcript] = []
    outcomes: list[Outcome] = []
    for _ in range(repeats):
        result = await tasks.probe_endpoint(endpoint, locale)
        transcripts += [t for t in result.transcripts if t.contract in wanted]
        outcomes += [o for o in result.outcomes.values() if o.contract in wanted]
    key = f"canary-triage-{model_slug(model)}"
    await acreate_markdown_artifact(
        key=key,
        markdown=transcripts_markdown(model, provider, locale, transcripts, outcomes),
        description=f"Triage of {provider}: full transcripts",
    )
    decisions: list[dict[str, Any]] = []
    if record:
        decisions = await _record(model, provider, plan.production_tags, outcomes, now)
    logger.info("triage %s: %s", provider, ", ".join(f"{o.contract}={o.status}" for o in outcomes))
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
    }


async def _record(
    model: str, tag: str, production: frozenset[str], outcomes: Sequence[Outcome], now: datetime
) -> list[dict[str, Any]]:
    settings = load_settings()
    exclusions = await tasks.read_exclusions(model, now)
    report = RoundReport(
        round_id=f"triage-{tag}@{now:%Y-%m-%dT%H:%M:%SZ}",
        model=model,
        at=now,
        mode=Mode(settings.mode),
        rounds={tag: round_verdict(tag, outcomes)},
        production_tags=production,
        excluded_tags=excluded_by_layers(exclusions, [tag]),
    )
    _state, decisions = await tasks.apply_report(report)
    tasks.record_ledger(report, {tag: list(outcomes)}, decisions)
    return [d.model_dump(mode="json") for d in decisions]
