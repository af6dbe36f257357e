"""Production traffic as evidence, end to end (SPEC O8, issue 25's "done when"): real
processes on Prefect's test harness and the session's fleet: `canary serve` (the deployments
and their automation) and `canary gateway serve` as subprocesses, a load generator through
the gateway, one provider switched at runtime to corrupt 30% of its starts. The gateway
ejects it, the automation's triage run (created by the automation) is served and completes,
and the next round's decisions artifact shows the production evidence. Over a minute on two
cores: marked slow; `python -m scale.passive_demo` runs the same against a local server and
prints the times."""

from __future__ import annotations

from pathlib import Path

import pytest

from deployments.local import TRIAGE_AUTOMATION
from scale.passive_demo import BAD, run_scenario
from tests.fixtures.fleet import FleetHandle

MODEL = "test/passive-e2e"


@pytest.mark.slow
async def test_o8_defect_to_ejection_to_triage_run_to_the_next_rounds_evidence(
    prefect_api: None, fleet: FleetHandle, tmp_path: Path
) -> None:
    """Ejected within the stated requests, a triage run created by the automation for the
    ejected endpoint and the start contract completes, and the next round shows
    `production: k of n replies rejected for a stray start, peers 0 of m` for it."""
    from prefect.settings import PREFECT_API_URL

    api_url = PREFECT_API_URL.value()
    t = await run_scenario(str(api_url), fleet, tmp_path, model=MODEL, timeout_s=180)
    print("\n" + "\n".join(t.lines()))
    assert t.ejected_s is not None and t.eject_requests is not None
    assert t.eject_requests <= 400
    assert t.triage_state == "Completed", t.lines()
    assert t.triage["created_by"] == TRIAGE_AUTOMATION
    params = t.triage["parameters"]
    assert (params["model"], params["provider"], params["contracts"]) == (MODEL, BAD, ["start"])
    assert params["evidence"].startswith("production: ")
    assert t.round_state == "Completed"
    assert any(
        line.startswith(f"- `{BAD}`: production: ") and "rejected for a stray start" in line
        for line in t.round_production
    ), t.round_production
