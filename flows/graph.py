"""What the run's task graph says about each endpoint (O3): one `verdict` task run per
endpoint and round, named after the verdict and ending in a state that carries it:

    startcorrupt/fp8: failed start        Failed  "Contract failed"  (red in the graph)
    flaky/fp8: frozen (transport)         Completed "Frozen"
    healthy/fp8: clean                    Completed "Clean"

So an analyst sees from the graph which endpoints failed which contract without opening
a log. A failed verdict is the endpoint's failure, not ours: the round itself still
completes. Names and states are pure functions of a `ProviderRound`.

Prefect logs a task that ends Failed as an error with an empty traceback ("Task run failed
with state ... NoneType: None"). For the `verdict` task that is not an error of ours, so
`VerdictLogFilter` (installed on Prefect's task-run logger by `install_log_filter`) drops
that line and keeps "Finished in state Contract failed(...)" at INFO, in the UI's logs.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from prefect.states import Completed, Failed, State

from quarantine.verdicts import ProviderRound, RoundVerdict

TASK_NAME = "verdict"
FAILED_STATE_NAME = "Contract failed"
MESSAGE_CHARS = 400


def _contracts(reasons: Sequence[str]) -> list[str]:
    return sorted({r.split(":", 1)[0] for r in reasons})


def verdict_label(verdict: ProviderRound) -> str:
    """The task run name: `<tag>: failed start, language` / `<tag>: clean` / `... frozen`."""
    if verdict.verdict is RoundVerdict.FAILED:
        text = f"{verdict.tag}: failed {', '.join(_contracts(verdict.reasons))}"
    elif verdict.verdict is RoundVerdict.FROZEN:
        text = f"{verdict.tag}: frozen (transport)"
    else:
        text = f"{verdict.tag}: clean"
    if verdict.ignored_reasons:
        text += f" (not counted: {', '.join(_contracts(verdict.ignored_reasons))})"
    return text


def verdict_state(verdict: ProviderRound, evidence: Sequence[str] = ()) -> State:
    """The task run's final state: Failed for a failed verdict, Completed otherwise; the
    message carries the reasons and the numbers (bounded)."""
    message = "; ".join([*verdict.reasons, *evidence]) or verdict.verdict.value
    if len(message) > MESSAGE_CHARS:
        message = message[: MESSAGE_CHARS - 1] + "…"
    if verdict.verdict is RoundVerdict.FAILED:
        return Failed(name=FAILED_STATE_NAME, message=message, data=verdict)
    name = "Frozen" if verdict.verdict is RoundVerdict.FROZEN else "Clean"
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
