"""A blind round (`quarantine/blind.py`) as the flow ends it: nothing applied, a Failed
run whose message is the one-line reason (red in the UI), a `canary.round.blind` event,
a markdown artifact and an admin alert. The model's state is not written, so its
half-hour slot stays open and the next trigger probes again."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from prefect.artifacts import acreate_markdown_artifact
from prefect.events import emit_event
from prefect.states import Failed, State

from flows.notify import notify_admins
from ground.slugs import model_slug
from quarantine.blind import BlindRound


def blind_message(round_id: str, blind: BlindRound) -> str:
    return (
        f"blind round {round_id}: {blind.reason}; nothing applied, "
        "the slot stays open for the next trigger"
    )


async def end_blind(
    model: str,
    round_id: str,
    at: datetime,
    blind: BlindRound,
    notification_block: str | None,
    logger: Any,
) -> State[Any]:
    """Event, artifact and alert for a blind round; returns its Failed state."""
    message = blind_message(round_id, blind)
    logger.error(message)
    try:
        emit_event(
            event="canary.round.blind",
            resource={"prefect.resource.id": f"canary.round.{model}", "canary.model": model},
            payload={
                "round_id": round_id,
                "at": at.isoformat(),
                "kind": blind.kind.value,
                "reason": blind.reason,
                "affected": list(blind.affected),
                "endpoints": blind.endpoints,
            },
        )
        affected = ", ".join(f"`{t}`" for t in blind.affected) or "-"
        await acreate_markdown_artifact(
            key=f"canary-blind-{model_slug(model)}",
            markdown=(
                f"# Blind round {round_id}\n\n{blind.reason}.\n\n"
                f"- nothing was applied; the next trigger retries this slot\n"
                f"- endpoints showing it: {affected}\n"
            ),
            description=f"Round {round_id} was blind: {blind.kind.value}",
        )
    except Exception as exc:  # the run must still end red with its reason
        logger.error("could not record the blind round: %s", exc)
    subject = f"provider-canary: {model} ({round_id}) is blind"
    try:
        await notify_admins(notification_block, subject, [message])
    except Exception as exc:
        logger.error("notification through %s failed (%s)", notification_block, exc)
        await notify_admins(None, subject, [message])
    return Failed(message=message)
