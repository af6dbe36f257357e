"""What the run's task graph says about the endpoints (O3): a `verdict` task run for each
endpoint with a story (a failed contract, a transport freeze, failures not counted), named
after the verdict and ending in a state that carries it, and one for all the clean ones:

    startcorrupt/fp8: failed start        Failed  "Contract failed"  (red in the graph)
    flaky/fp8: frozen (transport)         Completed "Frozen"
    clean: 18 endpoints                   Completed "Clean"  (message: their tags)
    not judged: 3 endpoints               Completed "Not judged" (a contract they are held
                                          to was not judged: no evidence of health, C5)
    frozen (budget): 22 endpoints         Completed "Frozen" (the budget froze the round)

So an analyst sees from the graph which endpoints failed which contract without opening
a log. A failed verdict is the endpoint's failure, not ours: the round itself still
completes. A clean endpoint has no task run of its own: a task run costs the round a few ms
of its event loop and the Prefect server several writes, and a round of 100 clean endpoints
spent most of its time over its critical path on them (issue 13); the clean endpoints are
listed in the one `clean` task run and in the round table. Names and states are pure
functions of `ProviderRound`s.

Prefect logs a task that ends Failed as an error with an empty traceback ("Task run failed
with state ... NoneType: None"). For the `verdict` task that is not an error of ours, so
`VerdictLogFilter` (installed on Prefect's task-run logger by `install_log_filter`) drops
that line and keeps "Finished in state Contract failed(...)" at INFO, in the UI's logs.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from prefect.states import Completed, Failed, State

from probes.textutil import excerpt
from quarantine.verdicts import ProviderRound, RoundVerdict

TASK_NAME = "verdict"
FAILED_STATE_NAME = "Contract failed"
MESSAGE_CHARS = 400


def _contracts(reasons: Sequence[str]) -> list[str]:
    return sorted({r.split(":", 1)[0] for r in reasons})


def budget_frozen(verdict: ProviderRound) -> bool:
    """Frozen because the budget could not afford the round (nothing was probed)."""
    whys = set(verdict.unjudged.values())
    return (
        verdict.verdict is RoundVerdict.FROZEN
        and bool(whys)
        and all(w.startswith("budget") for w in whys)
    )


def verdict_label(verdict: ProviderRound) -> str:
    """The task run name: `<tag>: failed start, language` / `<tag>: clean` / `... frozen`."""
    if verdict.verdict is RoundVerdict.FAILED:
        text = f"{verdict.tag}: failed {', '.join(_contracts(verdict.reasons))}"
    elif verdict.verdict is RoundVerdict.FROZEN:
        text = f"{verdict.tag}: frozen ({'budget' if budget_frozen(verdict) else 'transport'})"
    elif verdict.verdict is RoundVerdict.UNJUDGED:
        text = f"{verdict.tag}: not judged ({', '.join(sorted(verdict.unjudged))})"
    else:
        text = f"{verdict.tag}: clean"
    if verdict.ignored_reasons:
        text += f" (not counted: {', '.join(_contracts(verdict.ignored_reasons))})"
    return text


def group_of(verdict: ProviderRound) -> str | None:
    """The shared `verdict` task run of an endpoint without a story of its own (`clean`,
    `not judged`, `frozen (budget)`), or None."""
    if verdict.ignored_reasons:
        return None
    if verdict.verdict is RoundVerdict.CLEAN:
        return "clean"
    if verdict.verdict is RoundVerdict.UNJUDGED:
        return "not judged"
    return "frozen (budget)" if budget_frozen(verdict) else None


def has_story(verdict: ProviderRound) -> bool:
    """Whether the endpoint gets a `verdict` task run of its own: a failed or
    transport-frozen round, or one with failures that were not counted."""
    return group_of(verdict) is None


def endpoint_count(count: int) -> str:
    """`1 endpoint`, `18 endpoints`: in task run names."""
    return f"{count} endpoint{'' if count == 1 else 's'}"


def clean_label(tags: Sequence[str], group: str = "clean") -> str:
    """The task run name for the endpoints without a story: `clean: 18 endpoints`."""
    return f"{group}: {endpoint_count(len(tags))}"


_GROUP_STATES = {"clean": "Clean", "not judged": "Not judged", "frozen (budget)": "Frozen"}


def clean_state(tags: Sequence[str], group: str = "clean") -> State:
    """Completed "Clean" (or "Not judged", "Frozen"), the message naming the endpoints
    (bounded like a verdict's)."""
    return Completed(
        name=_GROUP_STATES[group],
        message=excerpt(", ".join(sorted(tags)), MESSAGE_CHARS),
        data=sorted(tags),
    )


def verdict_state(verdict: ProviderRound, evidence: Sequence[str] = ()) -> State:
    """The task run's final state: Failed for a failed verdict, Completed otherwise; the
    message carries the reasons and the numbers (bounded)."""
    message = excerpt(
        "; ".join([*verdict.reasons, *evidence]) or verdict.verdict.value, MESSAGE_CHARS
    )
    if verdict.verdict is RoundVerdict.FAILED:
        return Failed(name=FAILED_STATE_NAME, message=message, data=verdict)
    name = {RoundVerdict.FROZEN: "Frozen", RoundVerdict.UNJUDGED: "Not judged"}.get(
        verdict.verdict, "Clean"
    )
    return Completed(name=name, message=message, data=verdict)


class VerdictLogFilter(logging.Filter):
    """Drop the empty "Task run failed with state" error of a `verdict` task run and log
    its final state at INFO: a provider's failed contract is not our error."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "task_name", None) != TASK_NAME or record.levelno < logging.ERROR:
            return True
        message = record.getMessage()
        if message.startswith("Task run failed with state"):
            return False
        if message.startswith("Finished in state") and FAILED_STATE_NAME in message:
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.exc_info = record.exc_text = None
        return True


def install_log_filter() -> None:
    """Add `VerdictLogFilter` to Prefect's task-run logger once (idempotent)."""
    logger = logging.getLogger("prefect.task_runs")
    if not any(isinstance(f, VerdictLogFilter) for f in logger.filters):
        logger.addFilter(VerdictLogFilter())
