"""Admin alerts for significant state changes (Q8): a Prefect event per
decision (automations can react to them) and, when `CANARY_NOTIFICATION_BLOCK`
names a notification block (`<block-type-slug>/<name>`, e.g.
`custom-webhook/canary-admins`), a direct notification through it. With no
block configured the alert is logged. Bodies never contain secrets: they are
built from decisions (tags, reasons, round ids), not from requests."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from prefect.blocks.core import Block
from prefect.events import emit_event

from quarantine.models import Decision

log = logging.getLogger("canary.notify")


def emit_decision_events(decisions: Iterable[Decision], *, round_id: str | None) -> None:
    """One Prefect event per decision (`canary.endpoint.<kind>` on resource
    `canary.endpoint.<model>.<tag>`, see `Decision.event`)."""
    for d in decisions:
        spec = d.event()
        spec["payload"]["round_id"] = round_id
        emit_event(**spec)


def emit_weak_probe_event(model: str, round_id: str, controls: list[str], reason: str) -> None:
    emit_event(
        event="canary.probe.weak",
        resource={"prefect.resource.id": f"canary.probe.refusal.{model}", "canary.model": model},
        payload={"round_id": round_id, "controls_passed": controls, "reason": reason},
    )


def alert_lines(decisions: Iterable[Decision]) -> list[str]:
    """Human lines for the decisions worth an admin's attention."""
    lines = []
    for d in decisions:
        if not d.significant:
            continue
        until = f" until {d.until:%Y-%m-%d %H:%M}Z" if d.until else ""
        rung = f" (rung {d.rung})" if d.rung else ""
        why = "; ".join(d.evidence) or d.reason
        lines.append(f"[{d.mode.value}] {d.kind.value}: {d.tag}{until}{rung} - {why}")
    return lines


async def notify_admins(block_ref: str | None, subject: str, lines: list[str]) -> str:
    """Send `lines` through the configured notification block, or log them.
    Returns where the alert went (`block:<ref>`, `log`, or `nothing`)."""
    if not lines:
        return "nothing"
    body = "\n".join(lines)
    if not block_ref:
        for line in lines:
            log.warning("ALERT %s: %s", subject, line)
        return "log"
    block = await Block.aload(block_ref)
    anotify = getattr(block, "anotify", None)
    if anotify is not None:
        await anotify(body=body, subject=subject)
    else:  # pragma: no cover - older block classes
        await block.notify(body=body, subject=subject)  # type: ignore[attr-defined]
    return f"block:{block_ref}"
