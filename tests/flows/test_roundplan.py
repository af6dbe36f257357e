"""Pure round planning: locale rotation, sticky locales (C7, C8), targets (C1, Q5)."""

from datetime import UTC, datetime, timedelta

import pytest

from flows.roundplan import (
    PlanError,
    assign_locales,
    launch_order,
    next_slot_with_locale,
    plan_round,
    round_id,
    round_index,
)
from ground.settings import DEFAULT_LOCALES
from probes.types import Endpoint

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def _ep(tag: str, status: int = 0) -> Endpoint:
    return Endpoint(model_id="m/x", tag=tag, provider_name=tag.split("/")[0].title(), status=status)


def test_c7_rotation_covers_every_locale_for_each_endpoint() -> None:
    """Over 17 consecutive rounds every endpoint is probed once in each of the 17 locales."""
    tags = [f"p{i}/fp8" for i in range(5)]
    seen: dict[str, set[str]] = {t: set() for t in tags}
    for r in range(len(DEFAULT_LOCALES)):
        plan = assign_locales(tags, DEFAULT_LOCALES, round_index(T0 + timedelta(minutes=30 * r)))
        for tag, locale in plan.items():
            seen[tag].add(locale)
    assert all(s == set(DEFAULT_LOCALES) for s in seen.values())


def test_c7_one_round_spreads_locales_across_endpoints() -> None:
    """Within one round, endpoints get different locales (up to 17)."""
    tags = [f"p{i:02d}/fp8" for i in range(17)]
    plan = assign_locales(tags, DEFAULT_LOCALES, 5)
    assert len(set(plan.values())) == 17


def test_c8_sticky_locale_is_repeated_next_round() -> None:
    """An endpoint whose language probe failed keeps its locale in the next round."""
    tags = ["a/fp8", "b/fp8"]
    now = assign_locales(tags, DEFAULT_LOCALES, 7)
    nxt = assign_locales(tags, DEFAULT_LOCALES, 8, sticky={"a/fp8": now["a/fp8"]})
    assert nxt["a/fp8"] == now["a/fp8"]
    assert nxt["b/fp8"] != now["b/fp8"]


def test_c8_sticky_locale_outside_configured_locales_is_ignored() -> None:
    """A sticky locale that is no longer configured falls back to the rotation."""
    plan = assign_locales(["a/fp8"], ["en", "es"], 0, sticky={"a/fp8": "th"})
    assert plan["a/fp8"] == "en"


def test_q5_plan_probes_every_endpoint_and_marks_controls() -> None:
    """Every discovered endpoint is a target (suspended ones too); controls are not production."""
    eps = [_ep("b/fp8"), _ep("a/fp8"), _ep("ctl/fp8"), _ep("deg/fp8", status=-2)]
    plan = plan_round("m/x", T0, eps, locales=DEFAULT_LOCALES, controls=["ctl/fp8", "gone/x"])
    assert [e.tag for e in plan.targets] == ["a/fp8", "b/fp8", "ctl/fp8", "deg/fp8"]
    assert plan.controls == {"ctl/fp8"}
    assert plan.production_tags == {"a/fp8", "b/fp8"}
    assert plan.round_id == round_id("m/x", T0) == "m-x@2026-11-01T12:00:00Z"


def test_plan_subset_rejects_unknown_tags() -> None:
    """An unknown endpoint in the subset is a clear error naming it."""
    with pytest.raises(PlanError, match=r"nope/fp8"):
        plan_round("m/x", T0, [_ep("a/fp8")], locales=["en"], subset=["nope/fp8"])


def test_plan_subset_keeps_the_full_rotation() -> None:
    """Narrowing to a subset does not change which locale an endpoint gets."""
    eps = [_ep(f"p{i}/fp8") for i in range(4)]
    full = plan_round("m/x", T0, eps, locales=DEFAULT_LOCALES)
    sub = plan_round("m/x", T0, eps, locales=DEFAULT_LOCALES, subset=["p3/fp8"])
    assert sub.locales["p3/fp8"] == full.locales["p3/fp8"]
    assert [e.tag for e in sub.targets] == ["p3/fp8"]


def test_c5_q4_subset_adds_controls_and_floor_counts_every_production_endpoint() -> None:
    """A subset round still probes the controls, and production counts all discovered ones."""
    eps = [_ep("a/fp8"), _ep("b/fp8"), _ep("ctl/fp8"), _ep("deg/fp8", status=-1)]
    sub = plan_round("m/x", T0, eps, locales=["en"], controls=["ctl/fp8"], subset=["b/fp8"])
    assert [e.tag for e in sub.targets] == ["b/fp8", "ctl/fp8"]
    assert sub.production_tags == {"a/fp8", "b/fp8"}


def test_c8_next_slot_with_locale_finds_the_rotation_slot() -> None:
    """The helper finds the first slot at which an endpoint is probed in a given locale."""
    tags = ["a/fp8", "b/fp8", "c/fp8"]
    at = next_slot_with_locale(tags, DEFAULT_LOCALES, "b/fp8", "pt-BR", T0)
    assert at is not None and at > T0
    assert assign_locales(tags, DEFAULT_LOCALES, round_index(at))["b/fp8"] == "pt-BR"
    assert next_slot_with_locale(tags, ["en"], "b/fp8", "pt-BR", T0) is None


def test_probes_start_slowest_first_unknown_latency_first_ties_in_plan_order() -> None:
    """The round starts the endpoints the aggregator reports slowest first (longest first
    keeps the round near its slowest chain), one without a reported latency before all,
    and equal latencies in plan order; the plan itself keeps its tag order."""

    def ep(tag: str, latency: float | None) -> Endpoint:
        return _ep(tag).model_copy(update={"latency_p50_ms": latency})

    targets = [ep("a/fp8", 200), ep("b/fp8", 1500), ep("c/fp8", None), ep("d/fp8", 200),
               ep("e/fp8", 900)]  # fmt: skip
    assert [e.tag for e in launch_order(targets)] == ["c/fp8", "b/fp8", "e/fp8", "a/fp8", "d/fp8"]
    plan = plan_round("m/x", T0, targets[::-1], locales=DEFAULT_LOCALES)
    assert [e.tag for e in plan.targets] == ["a/fp8", "b/fp8", "c/fp8", "d/fp8", "e/fp8"]
    assert launch_order([]) == []
