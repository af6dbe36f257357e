"""Deployments (O2, O6): a scheduled round per configured model, every 30 minutes in UTC,
one run per model at a time; the same specs render `prefect.yaml` for work pools."""

from __future__ import annotations

import yaml

from deployments.local import build_deployments, deployment_specs, round_deployment_name
from deployments.render import render
from ground.settings import Settings


def _settings() -> Settings:
    return Settings(_env_file=None, models=["a/one", "b/two"], mode="enforce")


def test_o2_one_scheduled_round_deployment_per_model_with_cancel_new() -> None:
    """`canary serve` builds a 30-minute UTC schedule per model with a limit of one run."""
    deployments = {d.name: d for d in build_deployments(_settings())}
    for model in ("a/one", "b/two"):
        d = deployments[round_deployment_name(model)]
        assert d.parameters == {"model": model, "mode": "enforce"}
        [schedule] = d.schedules
        assert schedule.schedule.cron == "*/30 * * * *"
        assert schedule.schedule.timezone in (None, "UTC")
        assert d.concurrency_limit == 1
        assert d.concurrency_options is not None
        assert d.concurrency_options.collision_strategy.value == "CANCEL_NEW"
    assert {"triage", "lift-suspension", "add-exclusion", "remove-exclusion"} <= set(deployments)
    assert not deployments["triage"].schedules


def test_o6_rendered_prefect_yaml_matches_the_local_deployments() -> None:
    """The work-pool file carries the same deployments, schedules and limits."""
    settings = _settings()
    doc = yaml.safe_load(render(settings))
    by_name = {d["name"]: d for d in doc["deployments"]}
    assert set(by_name) == {s["name"] for s in deployment_specs(settings)}
    rnd = by_name[round_deployment_name("a/one")]
    assert rnd["entrypoint"] == "flows/canary_round.py:canary_round"
    assert rnd["schedules"] == [{"cron": "*/30 * * * *", "timezone": "UTC"}]
    assert rnd["concurrency_limit"] == {"limit": 1, "collision_strategy": "CANCEL_NEW"}
    assert rnd["work_pool"]["name"] == "canary"


def test_o6_shipped_prefect_yaml_is_current_for_the_default_model() -> None:
    """deployments/prefect.yaml is the rendering of the default settings (regenerate it)."""
    from pathlib import Path

    shipped = (Path(__file__).parents[2] / "deployments" / "prefect.yaml").read_text()
    assert shipped == render(Settings(_env_file=None, mode="observe"))


def test_o9_the_ledger_is_pruned_once_a_day_by_a_deployment_of_its_own() -> None:
    """One `ledger-prune` deployment for all models, daily at 05:30 UTC, without a window of
    its own (the run reads CANARY_LEDGER__RETENTION_DAYS), one run at a time."""
    deployments = {d.name: d for d in build_deployments(_settings())}
    prune = deployments["ledger-prune"]
    [schedule] = prune.schedules
    assert schedule.schedule.cron == "30 5 * * *"
    assert prune.parameters == {} and prune.concurrency_limit == 1
    assert prune.entrypoint.endswith("flows/retention.py:prune_ledger")
