"""The canary's own bill per model and day, its forecast and its daily budget (SPEC C13).
Pure: the day's bill (kept in the quarantine state), the round's targets, the settings and
the round's logical time in; a plan for the round out. Nothing here reads the clock.

The day is the UTC day of a round's logical time. The forecast of a day is what was spent
so far plus the cost of a round times the rounds left in the day at the current schedule
(`CANARY_ROUND_CRON`, by default every 30 minutes: 48 rounds a day). A round's cost is
estimated before it runs from each endpoint's listed prices and the tokens per request of
the model's last round (before any round: the prompt's length and `max_tokens`).

When a budget is set (`CANARY_DAILY_BUDGET_USD`, or per model) and the forecast would exceed
it, the round degrades, in this order, to the first level whose forecast fits:

    full          the configured start samples (`CANARY_PROBE__START_SAMPLES`, 6)
    fewer_starts  fewer start samples, one at a time, down to the minimum
                  (`CANARY_BUDGET__MIN_START_SAMPLES`, 2: the smallest count at which the
                  seed's 19/20 host is still suspended at its second round with 95%,
                  `probes/power.py`); every contract is still judged every round
    rotated       the minimum start samples and one single-request contract per endpoint
                  and round, in turn (`probes/rotation.py`); the others are unjudged that
                  round (never skipped silently), so no host is clean while rotated
    frozen        not even the rotated round is affordable with what is left of the day's
                  budget: nothing is probed, every endpoint is frozen with the reason
                  `budget` (no streak moves) and admins are alerted

A rotated round that is affordable although the day's forecast still exceeds the budget
runs; once the budget is spent, the remaining rounds of the day freeze.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import UTC, date, datetime, time, timedelta
from enum import StrEnum

from cronsim import CronSim
from pydantic import BaseModel, ConfigDict, Field

from ground.clock import as_utc
from ground.settings import ProbeConfig
from probes.cost import EndpointBill, RoundBill, listing_usd, prompt_tokens_estimate
from probes.probeset import probe_requests
from probes.rotation import (
    rotated_contracts,
    rotated_requests,
    rotated_start_samples,
    tool_requests,
)
from probes.types import Contract, Endpoint


class BudgetLevel(StrEnum):
    FULL = "full"
    FEWER_STARTS = "fewer_starts"
    ROTATED = "rotated"
    FROZEN = "frozen"


class DayBill(BaseModel):
    """What one model's rounds cost on one UTC day (kept in its quarantine state)."""

    day: date
    rounds: int = 0
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    spent_usd: float = 0.0
    estimated_usd: float = 0.0  # the part of `spent_usd` priced by estimate (no usage)
    last_round_usd: float = 0.0
    last_round_requests: int = 0
    last_level: BudgetLevel = BudgetLevel.FULL
    frozen_rounds: int = 0  # rounds frozen for the budget
    prompt_per_request: float | None = None  # of the last round that sent requests
    completion_per_request: float | None = None


def utc_day(at: datetime) -> date:
    return as_utc(at).date()


def add_round(
    bill: DayBill | None, spent: RoundBill | None, at: datetime, level: BudgetLevel
) -> DayBill:
    """The day's bill after a round at `at` (a new day starts from zero; the tokens per
    request carry over)."""
    day = utc_day(at)
    if bill is None or bill.day != day:
        bill = DayBill(
            day=day,
            prompt_per_request=bill.prompt_per_request if bill else None,
            completion_per_request=bill.completion_per_request if bill else None,
        )
    total = spent.total if spent is not None else EndpointBill(tag="total")
    per = {}
    reported = total.requests - total.estimated_requests  # those that carried their tokens
    if reported > 0:
        per = {
            "prompt_per_request": total.prompt_tokens / reported,
            "completion_per_request": total.completion_tokens / reported,
        }
    return bill.model_copy(
        update={
            "rounds": bill.rounds + 1,
            "requests": bill.requests + total.requests,
            "prompt_tokens": bill.prompt_tokens + total.prompt_tokens,
            "completion_tokens": bill.completion_tokens + total.completion_tokens,
            "spent_usd": bill.spent_usd + total.usd,
            "estimated_usd": bill.estimated_usd + total.estimated_usd,
            "last_round_usd": total.usd,
            "last_round_requests": total.requests,
            "last_level": level,
            "frozen_rounds": bill.frozen_rounds + int(level is BudgetLevel.FROZEN),
            **per,
        }
    )


def _slots(cron: str, after: datetime, until: datetime) -> int:
    """Scheduled rounds strictly after `after` and before `until`."""
    count = 0
    for slot in CronSim(cron, as_utc(after).replace(second=0, microsecond=0)):
        if slot >= until:
            return count
        if slot > after:
            count += 1
    return count  # pragma: no cover - CronSim never ends


def _midnight_after(at: datetime) -> datetime:
    return datetime.combine(utc_day(at) + timedelta(days=1), time(0), UTC)


def rounds_after(cron: str, at: datetime) -> int:
    """The scheduled rounds of the UTC day of `at` that are still to come after it."""
    return _slots(cron, at, _midnight_after(at))


def rounds_per_day(cron: str, day: date) -> int:
    """The scheduled rounds of one UTC day (48 for every 30 minutes)."""
    start = datetime.combine(day, time(0), UTC)
    return _slots(cron, start - timedelta(minutes=1), start + timedelta(days=1))


def spent_on(bill: DayBill | None, at: datetime) -> float:
    return bill.spent_usd if bill is not None and bill.day == utc_day(at) else 0.0


class Probing(BaseModel):
    """How one endpoint is probed in a rotated round."""

    model_config = ConfigDict(frozen=True)

    start_samples: int
    contracts: frozenset[Contract]


def rotation_plan(
    targets: Sequence[Endpoint],
    controls: Collection[str],
    index: int,
    failing: Mapping[str, Collection[str]],
    minimum: int,
    config: ProbeConfig,
) -> dict[str, Probing]:
    """Each endpoint's rotated probing in round `index`: a control sends its refusal probe
    only (it judges that probe, C5); the others rotate (`probes/rotation.py`)."""
    plan: dict[str, Probing] = {}
    judged = sorted(e.tag for e in targets if e.tag not in controls)
    position = {tag: i for i, tag in enumerate(judged)}
    for e in targets:
        if e.tag in controls:
            plan[e.tag] = Probing(start_samples=0, contracts=frozenset({Contract.REFUSAL}))
            continue
        chosen = rotated_contracts(e, position[e.tag], index, failing.get(e.tag, ()))
        plan[e.tag] = Probing(
            start_samples=rotated_start_samples(chosen, minimum, config), contracts=chosen
        )
    return plan


def request_usd(endpoint: Endpoint, bill: DayBill | None, max_tokens: int) -> float:
    """The estimated price of one probe request to `endpoint`."""
    prompt = bill.prompt_per_request if bill is not None else None
    completion = bill.completion_per_request if bill is not None else None
    if prompt is None:
        prompt = prompt_tokens_estimate(Contract.LANGUAGE, "en")
    if completion is None:
        completion = max_tokens
    return listing_usd(endpoint.pricing, prompt, completion)


def round_usd(
    targets: Iterable[Endpoint],
    bill: DayBill | None,
    config: ProbeConfig,
    start_samples: int,
    rotation: Mapping[str, Probing] | None = None,
) -> float:
    """The estimated cost of a round with `start_samples` (or the `rotation`)."""
    total = 0.0
    for e in targets:
        if rotation is not None and e.tag in rotation:
            p = rotation[e.tag]
            requests = rotated_requests(p.contracts, p.start_samples, tool_requests(config))
        else:
            sized = config.model_copy(update={"start_samples": start_samples})
            requests = len(probe_requests(e, "en", "en", sized))
        total += requests * request_usd(e, bill, config.max_tokens)
    return total


class BudgetPlan(BaseModel):
    """How a round runs for the budget, and why."""

    model_config = ConfigDict(frozen=True)

    level: BudgetLevel
    start_samples: int
    rotation: dict[str, Probing] = Field(default_factory=dict)
    budget_usd: float | None = None
    spent_usd: float = 0.0  # today, before this round
    round_usd: float = 0.0  # this round's estimate at `level`
    forecast_usd: float = 0.0  # spent + round_usd x rounds_left
    full_forecast_usd: float = 0.0  # the forecast had the round not degraded
    rounds_left: int = 1  # this round included
    previous_level: BudgetLevel | None = None  # of the model's last round today
    reason: str = ""

    @property
    def degraded(self) -> bool:
        return self.level is not BudgetLevel.FULL

    @property
    def alert(self) -> bool:
        """A frozen round always alerts; a degraded one when its level changed."""
        return self.level is BudgetLevel.FROZEN or (
            self.degraded and self.level is not self.previous_level
        )


class BudgetInputs(BaseModel):
    """What `plan_budget` reads: the round, the day's bill and the settings."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    at: datetime
    index: int  # the round's half-hour slot number (rotation turn)
    targets: tuple[Endpoint, ...]
    controls: frozenset[str] = frozenset()
    failing: dict[str, tuple[str, ...]] = Field(default_factory=dict)  # streak contracts
    bill: DayBill | None = None
    budget_usd: float | None = None
    minimum: int  # the minimum start samples
    probe: ProbeConfig
    cron: str


def _usd(value: float) -> str:
    return f"${value:.4f}" if value < 1 else f"${value:.2f}"


def plan_budget(inputs: BudgetInputs) -> BudgetPlan:
    """The round's level (see the module docstring)."""
    i = inputs
    left = 1 + rounds_after(i.cron, i.at)
    spent = spent_on(i.bill, i.at)
    configured = i.probe.start_samples
    full = round_usd(i.targets, i.bill, i.probe, configured)
    base = BudgetPlan(
        level=BudgetLevel.FULL,
        start_samples=configured,
        budget_usd=i.budget_usd,
        spent_usd=spent,
        round_usd=full,
        forecast_usd=spent + full * left,
        full_forecast_usd=spent + full * left,
        rounds_left=left,
        previous_level=(
            i.bill.last_level if i.bill is not None and i.bill.day == utc_day(i.at) else None
        ),
        reason="no daily budget set",
    )
    if i.budget_usd is None:
        return base
    budget = i.budget_usd
    for samples in range(configured, min(configured, i.minimum) - 1, -1):
        cost = full if samples == configured else round_usd(i.targets, i.bill, i.probe, samples)
        forecast = spent + cost * left
        if forecast > budget:
            continue
        why = f"forecast {_usd(forecast)} within the budget {_usd(budget)}"
        if samples == configured:
            return base.model_copy(update={"reason": why})
        why = (
            f"forecast at {configured} start samples {_usd(base.full_forecast_usd)} exceeds the "
            f"budget {_usd(budget)}: {samples} start samples ({why})"
        )
        return base.model_copy(
            update={"level": BudgetLevel.FEWER_STARTS, "start_samples": samples,
                    "round_usd": cost, "forecast_usd": forecast, "reason": why}
        )  # fmt: skip
    return _rotated_or_frozen(i, base)


def _rotated_or_frozen(i: BudgetInputs, base: BudgetPlan) -> BudgetPlan:
    """Below the minimum start samples: rotate the contracts, or freeze when not even that
    round is affordable with what is left of the day's budget."""
    assert i.budget_usd is not None
    budget, minimum = i.budget_usd, min(i.probe.start_samples, i.minimum)
    spent, left = base.spent_usd, base.rounds_left
    rotation = rotation_plan(i.targets, i.controls, i.index, i.failing, minimum, i.probe)
    cost = round_usd(i.targets, i.bill, i.probe, minimum, rotation)
    forecast = spent + cost * left
    head = (
        f"forecast at the minimum of {minimum} start samples exceeds the budget "
        f"{_usd(budget)}: contracts rotated across rounds"
    )
    if spent + cost > budget:
        why = (
            f"spent {_usd(spent)} today; this round's minimum ({_usd(cost)}, rotated) exceeds "
            f"what is left of the budget {_usd(budget)}: frozen (budget)"
        )
        return base.model_copy(
            update={"level": BudgetLevel.FROZEN, "start_samples": 0, "round_usd": 0.0,
                    "forecast_usd": spent, "reason": why}
        )  # fmt: skip
    why = f"{head} (forecast {_usd(forecast)})"
    if forecast > budget:
        why = (
            f"{head}, and even so the forecast {_usd(forecast)} exceeds it: the rounds of "
            f"the day freeze once {_usd(budget)} is spent ({_usd(spent)} so far)"
        )
    return base.model_copy(
        update={"level": BudgetLevel.ROTATED, "start_samples": minimum, "rotation": rotation,
                "round_usd": cost, "forecast_usd": forecast, "reason": why}
    )  # fmt: skip


class BillView(BaseModel):
    """A model's bill of one day as `canary status`, the status artifact and the report show
    it: spent so far and the forecast for the day at the current schedule."""

    model_config = ConfigDict(frozen=True)

    day: date
    spent_usd: float = 0.0
    estimated_usd: float = 0.0
    rounds: int = 0
    requests: int = 0
    tokens: int = 0
    frozen_rounds: int = 0
    last_round_usd: float = 0.0
    rounds_left: int = 0
    rounds_per_day: int = 0
    forecast_usd: float = 0.0
    budget_usd: float | None = None
    level: BudgetLevel = BudgetLevel.FULL

    def line(self) -> str:
        budget = f" of the budget {_usd(self.budget_usd)}" if self.budget_usd else ""
        return (
            f"spent {_usd(self.spent_usd)}{budget} on {self.day} ({self.rounds} rounds, "
            f"{self.requests} requests, {self.tokens} tokens); forecast {_usd(self.forecast_usd)} "
            f"for the day at {self.rounds_per_day} rounds a day (last round "
            f"{_usd(self.last_round_usd)}, level {self.level.value})"
        )


def bill_view(
    bill: DayBill | None, at: datetime, *, cron: str, budget_usd: float | None
) -> BillView:
    """The bill of the UTC day of `at`, and its forecast: the last round's cost for each
    scheduled round still to come that day."""
    day = utc_day(at)
    today = bill if bill is not None and bill.day == day else DayBill(day=day)
    last = bill.last_round_usd if bill is not None else 0.0
    left = rounds_after(cron, at)
    return BillView(
        day=day,
        spent_usd=today.spent_usd,
        estimated_usd=today.estimated_usd,
        rounds=today.rounds,
        requests=today.requests,
        tokens=today.prompt_tokens + today.completion_tokens,
        frozen_rounds=today.frozen_rounds,
        last_round_usd=last,
        rounds_left=left,
        rounds_per_day=rounds_per_day(cron, day),
        forecast_usd=today.spent_usd + last * left,
        budget_usd=budget_usd,
        level=today.last_level,
    )
