"""The Prefect event of a suspect provider (SPEC O8): what the gateway tells when production
traffic makes a provider an outlier against its peers, and what the triage automation
declared with the deployments (`deployments/local.py`) reacts to.

    canary.gateway.provider.suspect
        resource  prefect.resource.id  canary.gateway.provider.<model>.<endpoint tag>
                  canary.model, canary.provider (as replies name it), canary.endpoint (its
                  tag; the first one when the provider serves several endpoints),
                  canary.reason
        payload   reason, reasons (every reason it is suspect for now), contracts (the
                  canary contracts that confirm the reason; [] = every one), evidence in
                  words, host and peers k/n, p_adjusted, action (ejected, or why held:
                  kept_for_capacity is the alert that the capacity floor kept it),
                  times, until, gateway

`suspect_event(record, reasons)` builds it (pure); `emit_suspect` sends it through Prefect's
events client (a queue and a worker thread: never a wait on the request path). The gateway
rate-limits it per provider (`settings.passive.event_every_s`).
"""

from __future__ import annotations

import logging
from typing import Any

from routing.passive import Reason
from routing.records import SuspectRecord

SUSPECT_EVENT = "canary.gateway.provider.suspect"
RESOURCE_PREFIX = "canary.gateway.provider."

log = logging.getLogger(__name__)


def suspect_event(record: SuspectRecord, reasons: list[str]) -> dict[str, Any]:
    """The keyword arguments of `prefect.events.emit_event` for `record`."""
    tags = (record.provider_tag or "").split(",")
    endpoint = tags[0] if tags[0] else record.provider
    return {
        "event": SUSPECT_EVENT,
        "resource": {
            "prefect.resource.id": f"{RESOURCE_PREFIX}{record.model}.{endpoint}",
            "prefect.resource.name": f"{endpoint} ({record.model})",
            "canary.model": record.model,
            "canary.provider": record.provider,
            "canary.endpoint": endpoint,
            "canary.reason": record.reason,
        },
        "payload": {
            "reason": record.reason,
            "reasons": reasons or [record.reason],
            "contracts": Reason(record.reason).contracts,
            "evidence": f"production: {record.evidence}",
            "host": {"k": record.host_k, "n": record.host_n},
            "peers": {"k": record.peers_k, "n": record.peers_n},
            "p_adjusted": record.p_adjusted,
            "action": record.action,
            "times": record.times,
            "until": record.until.isoformat() if record.until else None,
            "endpoints": [t for t in tags if t],
            "gateway": record.gateway,
        },
    }


def emit_suspect(record: SuspectRecord, reasons: list[str]) -> None:
    """Send the event (best-effort: a failure is logged, serving goes on)."""
    from prefect.events import emit_event

    try:
        emit_event(**suspect_event(record, reasons))
    except Exception as exc:  # the event is an announcement: never fatal to serving
        log.warning(
            "suspect event for %s not sent (%s: %s)", record.provider, type(exc).__name__, exc
        )
