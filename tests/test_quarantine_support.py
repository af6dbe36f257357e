"""Builders shared by the quarantine tests (plain data, no I/O; holds no tests itself)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta

from ground.settings import PolicyConfig
from quarantine.models import Decision, Mode, ModelState, RoundReport
from quarantine.policy import step
from quarantine.verdicts import ProviderRound, RoundVerdict

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
HALF_HOUR = timedelta(minutes=30)
DAY = timedelta(days=1)
MODEL = "acme/model-1"
F, C, Z = RoundVerdict.FAILED, RoundVerdict.CLEAN, RoundVerdict.FROZEN


def prov(
    tag: str, verdict: RoundVerdict, *reasons: str, contracts: int | None = None
) -> ProviderRound:
    if verdict is F and not reasons:
        reasons = ("start:stray_prefix",)
    return ProviderRound(
        tag=tag,
        verdict=verdict,
        reasons=tuple(sorted(reasons)) if verdict is F else (),
        failing_contracts=(contracts if contracts is not None else len(reasons))
        if verdict is F
        else 0,
        clean_contracts=("language",) if verdict is C else (),
    )


def report(
    round_id: str,
    at: datetime,
    rounds: Mapping[str, RoundVerdict | ProviderRound],
    *,
    mode: Mode = Mode.ENFORCE,
    production: Iterable[str] | None = None,
    excluded: Iterable[str] = (),
    language_failed: Mapping[str, str] | None = None,
    model: str = MODEL,
) -> RoundReport:
    built = {t: (v if isinstance(v, ProviderRound) else prov(t, v)) for t, v in rounds.items()}
    return RoundReport(
        round_id=round_id,
        model=model,
        at=at,
        mode=mode,
        rounds=built,
        production_tags=frozenset(
            production if production is not None else [*built, "p1", "p2", "p3"]
        ),
        excluded_tags=frozenset(excluded),
        language_failed_locales=dict(language_failed or {}),
    )


def run(
    verdicts: Iterable[Mapping[str, RoundVerdict | ProviderRound]],
    *,
    state: ModelState | None = None,
    start: datetime = T0,
    every: timedelta = HALF_HOUR,
    config: PolicyConfig | None = None,
    mode: Mode = Mode.ENFORCE,
    production: Iterable[str] | None = None,
    excluded: Iterable[str] = (),
    prefix: str = "r",
) -> tuple[ModelState, list[Decision]]:
    """Apply one report per item, `every` apart; return the final state and all decisions."""
    state = state or ModelState(model=MODEL)
    config = config or PolicyConfig()
    out: list[Decision] = []
    for i, rounds in enumerate(verdicts):
        rep = report(
            f"{prefix}{i}",
            start + i * every,
            rounds,
            mode=mode,
            production=production,
            excluded=excluded,
            model=state.model,
        )
        state, decisions = step(state, rep, config)
        out += decisions
    return state, out


def kinds(decisions: Iterable[Decision]) -> list[tuple[str, str]]:
    return [(d.kind.value, d.tag) for d in decisions]
