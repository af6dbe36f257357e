"""`canary serve`: the same deployments as `prefect.yaml`, served from this
process without a work pool (O2, O6). One scheduled round deployment per
configured model (cron every 30 min, UTC, one run per model at a time:
`concurrency_limit=1` with `CANCEL_NEW`), plus unscheduled triage and admin
deployments so analysts can start them from the Prefect UI, a daily health report per
model (`flows/report.py`: the HTML page with plots and a summary artifact linking it), and
one daily prune of the ledger (`flows/retention.py`: rows older than
CANARY_LEDGER__RETENTION_DAYS).

Automations are declared here too, as deployment triggers (`triggers` of a spec): Prefect
creates each as an automation owned by its deployment whenever the deployment is applied
(`canary serve`, `prefect deploy` of the rendered `prefect.yaml`), after deleting the ones
the deployment owned before, so there is always exactly one of each (idempotent). The one
there is: a provider the gateway found suspect from production traffic (the Prefect event
`canary.gateway.provider.suspect`, SPEC O8) starts the triage deployment for that endpoint
and the contract of its reason, with the evidence (full transcripts, no state change)."""

from __future__ import annotations

from typing import Any

from prefect.client.schemas.objects import ConcurrencyLimitConfig, ConcurrencyLimitStrategy

from ground.settings import Settings
from ground.slugs import model_slug
from routing.suspect_events import RESOURCE_PREFIX, SUSPECT_EVENT

ONE_AT_A_TIME = ConcurrencyLimitConfig(
    limit=1, collision_strategy=ConcurrencyLimitStrategy.CANCEL_NEW
)


REPORT_CRON = "0 6 * * *"  # daily, 06:00 UTC
REPORT_DAYS = 7
PRUNE_CRON = "30 5 * * *"  # daily, 05:30 UTC, before the reports
TRIAGE_AUTOMATION = "canary-triage-suspect-provider"


def triage_triggers() -> list[dict[str, Any]]:
    """The triage deployment's trigger (O5, O8): every suspect event starts one triage run of
    the endpoint it names, for the contract of its reason, carrying its evidence in words.
    The parameters are Jinja templates Prefect renders from the event."""
    return [
        {
            "type": "event",
            "name": TRIAGE_AUTOMATION,
            "description": "A provider the gateway found suspect from production traffic "
            "(canary.gateway.provider.suspect): re-probe that endpoint now (O8).",
            "enabled": True,
            "match": {"prefect.resource.id": f"{RESOURCE_PREFIX}*"},
            "expect": [SUSPECT_EVENT],
            "posture": "Reactive",
            "threshold": 1,
            "within": 0,
            "parameters": {
                "model": "{{ event.resource['canary.model'] }}",
                "provider": "{{ event.resource['canary.endpoint'] }}",
                "contracts": "{{ event.payload['contracts'] }}",
                "evidence": "{{ event.payload['evidence'] }}",
            },
        }
    ]


def round_deployment_name(model: str) -> str:
    return f"round-{model_slug(model)}"


def report_deployment_name(model: str) -> str:
    return f"report-{model_slug(model)}"


def deployment_specs(settings: Settings) -> list[dict[str, Any]]:
    """Plain descriptions of every deployment (also what `render.py` writes)."""
    specs: list[dict[str, Any]] = [
        {
            "name": round_deployment_name(model),
            "flow": "canary_round",
            "entrypoint": "flows/canary_round.py:canary_round",
            "cron": settings.round_cron,
            "parameters": {"model": model, "mode": settings.mode},
            "tags": ["provider-canary", f"model:{model}", f"mode:{settings.mode}"],
            "concurrency_limit": 1,
            "description": f"Canary round for {model} every 30 minutes (UTC).",
        }
        for model in settings.models
    ]
    specs += [
        {
            "name": report_deployment_name(model),
            "flow": "daily_report",
            "entrypoint": "flows/report.py:daily_report",
            "cron": REPORT_CRON,
            "parameters": {"model": model, "since_days": REPORT_DAYS},
            "tags": ["provider-canary", "report", f"model:{model}"],
            "concurrency_limit": 1,
            "description": f"Daily health report of {model} over {REPORT_DAYS} days (HTML + plots).",
        }
        for model in settings.models
    ]
    specs += [
        {
            "name": "triage",
            "flow": "triage",
            "entrypoint": "flows/triage.py:triage",
            "cron": None,
            "parameters": {},
            "tags": ["provider-canary", "triage"],
            "concurrency_limit": None,
            "description": "Re-probe one endpoint now with full transcripts (O5); started by "
            "hand, or by the automation on a provider the gateway found suspect (O8).",
            "triggers": triage_triggers(),
        },
    ]
    specs.append(
        {
            "name": "ledger-prune",
            "flow": "prune_ledger",
            "entrypoint": "flows/retention.py:prune_ledger",
            "cron": PRUNE_CRON,
            "parameters": {},
            "tags": ["provider-canary", "admin", "retention"],
            "concurrency_limit": 1,
            "description": "Daily: delete the ledger's rows older than the retention (O9).",
        }
    )
    admin = [(f, "admin") for f in ("lift_suspension", "add_exclusion", "remove_exclusion")]
    admin += [(f, "maintenance") for f in ("reset_clock", "release_lock")]
    for flow_name, module in admin:
        specs.append(
            {
                "name": flow_name.replace("_", "-"),
                "flow": flow_name,
                "entrypoint": f"flows/{module}.py:{flow_name}",
                "cron": None,
                "parameters": {},
                "tags": ["provider-canary", "admin"],
                "concurrency_limit": None,
                "description": f"Admin action: {flow_name.replace('_', ' ')} (Q8, O4).",
            }
        )
    return specs


def build_deployments(settings: Settings) -> list[Any]:
    """RunnerDeployments for `prefect.serve` (with their triggers: see the module docstring)."""
    from prefect.events.schemas.deployment_triggers import DeploymentEventTrigger

    from flows.admin import add_exclusion, lift_suspension, remove_exclusion
    from flows.canary_round import canary_round
    from flows.maintenance import release_lock, reset_clock
    from flows.report import daily_report
    from flows.retention import prune_ledger
    from flows.triage import triage

    flows: dict[str, Any] = {
        "canary_round": canary_round,
        "daily_report": daily_report,
        "triage": triage,
        "lift_suspension": lift_suspension,
        "add_exclusion": add_exclusion,
        "remove_exclusion": remove_exclusion,
        "reset_clock": reset_clock,
        "release_lock": release_lock,
        "prune_ledger": prune_ledger,
    }
    deployments = []
    for spec in deployment_specs(settings):
        deployments.append(
            flows[spec["flow"]].to_deployment(
                name=spec["name"],
                cron=spec["cron"],
                parameters=spec["parameters"],
                tags=spec["tags"],
                description=spec["description"],
                concurrency_limit=ONE_AT_A_TIME if spec["concurrency_limit"] else None,
                triggers=[DeploymentEventTrigger(**t) for t in spec.get("triggers", [])],
            )
        )
    return deployments


def serve_all(settings: Settings) -> None:
    from prefect import serve

    serve(*build_deployments(settings))
