"""Verdicts by comparison with the peers through real canary rounds (issue 14): a start style
every host shares is one model-level finding and suspends nobody; a start defect no rule
names is flagged `start:peer_outlier` on its host alone (observe only unless enforced).
Real fleet over loopback, Prefect's test harness, real SQLite."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Literal

import pytest
from prefect.artifacts import Artifact

from flows.canary_round import RoundSummary, canary_round
from flows.roundplan import round_index, start_locale
from ground.settings import DEFAULT_LOCALES
from ground.slugs import model_slug
from tests.fixtures.canary_env import endpoint, load_model
from tests.fixtures.fleet import FleetHandle

HALF_HOUR = timedelta(minutes=30)
QUOTED = [{"kind": "start_prefix", "rate": 1.0, "prefix": '"'}]
DROP = [{"kind": "first_token_drop", "rate": 1.0}]
HEALTHY = [f"{name}/fp8" for name in ("alpha", "bravo", "charlie", "delta", "echo")]


def _slot(locale: str) -> datetime:
    """The first half-hour slot from 2026-11-03 whose shared start locale is `locale`."""
    at = datetime(2026, 11, 3, tzinfo=UTC)
    while start_locale(DEFAULT_LOCALES, round_index(at)) != locale:
        at += HALF_HOUR
    return at


async def _round(
    model: str, at: datetime, mode: Literal["observe", "enforce"] = "enforce"
) -> RoundSummary:
    summary = await canary_round(model=model, mode=mode, at=at)
    assert isinstance(summary, RoundSummary)
    return summary


def test_fleet_start_prefix_and_first_token_drop(fleet: FleetHandle) -> None:
    """defect-zoo: `quoted` glues a quote before every reply, `dropfirst` loses the first
    token (the healthy host's reply ends with the same text)."""
    fleet.load("defect-zoo", time_scale=0.01)
    body = {
        "model": "meta-llama/llama-3.3-70b-instruct",
        "messages": [{"role": "user", "content": "Tell me about your day."}],
        "provider": {"only": ["quoted/fp8"], "allow_fallbacks": False},
    }
    quoted = fleet.chat(body).json()["choices"][0]["message"]["content"]
    assert quoted.startswith('"*')
    body["provider"] = {"only": ["dropfirst/fp8"], "allow_fallbacks": False}
    dropped = fleet.chat(body).json()["choices"][0]["message"]["content"]
    assert not dropped.startswith("*") and dropped.count("*") % 2 == 1
    assert {e["defect"] for e in fleet.requests()} == {"start_prefix", "first_token_drop"}


@pytest.mark.slow
async def test_model_style_every_host_shares_is_one_finding_no_suspension(
    canary_env: FleetHandle,
) -> None:
    """Every host opens with a quote before the Markdown (which C9 alone calls a stray start):
    two enforce rounds suspend nobody and each reports exactly one model-level finding,
    in its summary and in the decisions artifact. The start contract is unjudged for every
    host (C5, Q5: a model-level finding is no evidence of health; clean before issue 23)."""
    model = "test/peer-style"
    load_model(canary_env, model, [endpoint(t, defects=QUOTED) for t in [*HEALTHY, "foxtrot/fp8"]])
    at = _slot("en")
    for n in range(2):
        summary = await _round(model, at + n * HALF_HOUR)
        assert [d["kind"] for d in summary.decisions] == []
        assert {verdict for _t, _l, verdict, _why in summary.endpoints} == {"unjudged"}
        assert all(
            "start: model-level finding (most hosts share it)" in lines
            for lines in summary.unjudged.values()
        ), summary.unjudged
        assert len(summary.findings) == 1, summary.findings
        assert summary.findings[0].startswith("model-level: start:stray_start on 6 of 6")
        assert not any("peer_outlier" in r for rs in summary.ignored.values() for r in rs)
    artifact = await Artifact.aget(f"canary-decisions-{model_slug(model)}")
    assert artifact is not None and isinstance(artifact.data, str)
    assert "## Model-level findings" in artifact.data and "on 6 of 6 endpoints" in artifact.data


@pytest.mark.slow
async def test_unnamed_start_defect_on_one_host_is_a_peer_outlier(
    canary_env: FleetHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host that loses the first token of every reply passes every rule, but its starts
    differ from its five peers': `start:peer_outlier` is recorded for it alone, observe only
    (no failure, no suspension); with CANARY_PROBE__START_PEER_OUTLIER_ENFORCE it fails the round."""
    model = "test/peer-unnamed"
    load_model(
        canary_env, model, [*(endpoint(t) for t in HEALTHY), endpoint("drop/fp8", defects=DROP)]
    )
    at = _slot("en")
    for n in range(2):
        summary = await _round(model, at + n * HALF_HOUR)
        assert summary.ignored == {"drop/fp8": ["start:peer_outlier"]}
        assert {verdict for _t, _l, verdict, _why in summary.endpoints} == {"clean"}
        assert summary.decisions == [] and summary.findings == []

    monkeypatch.setenv("CANARY_PROBE__START_PEER_OUTLIER_ENFORCE", "true")
    third = await _round(model, at + 2 * HALF_HOUR)
    rows = {tag: (verdict, why) for tag, _l, verdict, why in third.endpoints}
    assert rows["drop/fp8"] == ("failed", "start:peer_outlier")
    assert {rows[t][0] for t in HEALTHY} == {"clean"}
