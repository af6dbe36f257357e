"""Admin actions as flow runs (Q8, O4), so every manual change is itself an
entry in the audit history: lift a suspension, add or remove a runtime
incident exclusion. Each run leaves a markdown artifact and a Prefect event
and notifies admins like the round does."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import acreate_markdown_artifact
from prefect.events import emit_event

from flows.notify import alert_lines, emit_decision_events, notify_admins
from ground.settings import load_settings
from ground.slugs import model_slug
from quarantine.adapters.admin import alift
from quarantine.adapters.incidents import aadd_runtime_exclusion, aremove_runtime_exclusion
from quarantine.adapters.store import aload_state
from quarantine.errors import UnknownTagError


async def _audit(model: str, title: str, lines: list[str]) -> None:
    await acreate_markdown_artifact(
        key=f"canary-admin-{model_slug(model)}",
        markdown=f"# {title}\n\n" + "\n".join(f"- {line}" for line in lines) + "\n",
        description=title,
    )


@flow(name="lift-suspension", flow_run_name="lift {tag} ({model})")
async def lift_suspension(
    model: str, tag: str, reason: str, author: str, at: datetime | None = None
) -> dict[str, Any]:
    """End a canary suspension of `tag` by hand; its ladder rung is kept (Q6, Q8).
    `at` is the logical time of the action (default now)."""
    decision = await alift(model, tag, reason, author, at or datetime.now(UTC))  # state + ledger
    decisions = [decision]
    emit_decision_events(decisions, round_id=None)
    lines = alert_lines(decisions)
    await notify_admins(load_settings().notification_block, f"provider-canary: {model}", lines)
    await _audit(model, f"Lifted {tag} ({model})", [*lines, f"by {author}: {reason}"])
    get_run_logger().info("lifted %s for %s by %s: %s", tag, model, author, reason)
    return decision.model_dump(mode="json")


@flow(name="add-exclusion", flow_run_name="exclude {tag} ({model})")
async def add_exclusion(
    model: str,
    tag: str,
    reason: str,
    author: str,
    until: datetime | None = None,
    at: datetime | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """Add a runtime incident exclusion (layer b of provider.ignore), effective at once.
    The tag (or base slug) must be one the canary knows for the model, unless `force`."""
    if not force:
        await _check_known_tag(model, tag)
    entry = await aadd_runtime_exclusion(
        model, tag, reason=reason, author=author, until=until, now=at or datetime.now(UTC)
    )
    data = entry.model_dump(mode="json")
    emit_event(
        event="canary.exclusion.added",
        resource={"prefect.resource.id": f"canary.endpoint.{model}.{tag}", "canary.model": model},
        payload=data,
    )
    await _audit(model, f"Excluded {tag} ({model})", [f"{k}: {v}" for k, v in data.items()])
    await notify_admins(
        load_settings().notification_block,
        f"provider-canary: {model}",
        [f"runtime exclusion added: {tag} by {author}: {reason}"],
    )
    return data


@flow(name="remove-exclusion", flow_run_name="unexclude {tag} ({model})")
async def remove_exclusion(
    model: str, tag: str, author: str, at: datetime | None = None
) -> dict[str, Any]:
    """Remove a runtime incident exclusion."""
    entry = await aremove_runtime_exclusion(model, tag, actor=author, now=at or datetime.now(UTC))
    data = entry.model_dump(mode="json")
    emit_event(
        event="canary.exclusion.removed",
        resource={"prefect.resource.id": f"canary.endpoint.{model}.{tag}", "canary.model": model},
        payload={**data, "removed_by": author},
    )
    await _audit(model, f"Removed exclusion of {tag} ({model})", [f"by {author}"])
    await notify_admins(
        load_settings().notification_block,
        f"provider-canary: {model}",
        [f"runtime exclusion removed: {tag} by {author}"],
    )
    return data


async def _check_known_tag(model: str, tag: str) -> None:
    """A typo (`deepinfra/fp88`) would silently exclude nothing: refuse tags that match
    no endpoint the canary has judged for this model (when it has judged any)."""
    state = await aload_state(model)
    known = sorted(state.providers)
    if not known:
        return
    if tag in known or any(k.split("/", 1)[0] == tag for k in known):
        return
    raise UnknownTagError(
        f"{tag!r} matches no endpoint of {model} the canary knows ({', '.join(known)}); "
        "use --force to exclude it anyway"
    )
