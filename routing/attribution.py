"""Whose failure is it? A reply that fails acceptance may be the client's doing (pure).

A client may send generation parameters the workload's contract does not own: stop
sequences, logit bias, a token limit, an extreme temperature, a response format of its own,
anything else. Any of them can make a healthy route's reply fail the contract (`stop: ["\\""]`
cuts every JSON object short), so such a rejection says nothing reliable about the route:

    client_shaping(body)        the parameters of `body` that may shape the output
    attribute(c, shaping)       `c` with `client_params` set when `c` is an acceptance
                                rejection of a request that carried such parameters

An attributed failure still falls back to another route (it might accept the reply), but it
is not counted against the route's circuit or health (routing/outcomes.py). Failures that no
generation parameter causes (HTTP errors, transport, cuts, in-band errors) are never
attributed. Circuits are also scoped per (route, workload): one workload's rejections never
suppress a route for another (routing/breaker.py).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from routing.classify import Classification
from routing.errors import FailureClass

# keys that cannot change what the model writes (or that the gateway owns and drops)
NEUTRAL_KEYS = frozenset(
    {
        "messages", "user", "metadata", "seed", "store", "service_tier", "stream",
        "stream_options", "model", "models", "provider", "route", "transforms", "n",
        "tools", "tool_choice", "functions", "function_call", "parallel_tool_calls",
    }
)  # fmt: skip
# numeric parameters that are ordinary inside these bounds (extremes shape the output)
ORDINARY_RANGES: dict[str, tuple[float, float]] = {
    "temperature": (0.0, 1.0),
    "top_p": (0.5, 1.0),
}
MAX_NAMED = 8  # parameter names kept on a classification


def _ordinary(key: str, value: Any) -> bool:
    bounds = ORDINARY_RANGES.get(key)
    if bounds is None or isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return bounds[0] <= value <= bounds[1]


def client_shaping(body: dict[str, Any]) -> tuple[str, ...]:
    """The parameters the client set that may shape the output, sorted (null values and
    ordinary temperatures / top_p excepted)."""
    shaping = sorted(
        str(k)[:40]
        for k, v in body.items()
        if k not in NEUTRAL_KEYS and v is not None and not _ordinary(k, v)
    )
    return tuple(shaping[:MAX_NAMED])


def attribute(c: Classification, shaping: tuple[str, ...]) -> Classification:
    """An acceptance rejection (`invalid_response`) of a request whose client set the
    output-shaping parameters `shaping` (`client_shaping` of the CLIENT's body, not of the
    upstream body the gateway built), marked as possibly the client's; any other
    classification unchanged."""
    if c.failure_class is not FailureClass.INVALID_RESPONSE or c.client_params or not shaping:
        return c
    return dataclasses.replace(c, client_params=shaping)
