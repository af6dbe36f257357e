"""The request router and its OpenAI-compatible gateway (SPEC R1-R13).

A small front in the manner of stamina: import from here; the modules behind
it are one concern each (contracts, classify, moves, backoff, deadline, budget,
latency, providers, capability, acceptance, breaker, masking, records, tools,
events, metrics, report, served, upstream, listing, steer, planner, attempt,
router, compose, gateway; production traffic as evidence, O8: passive, ejection,
passive_watch, suspect_events, passive_ledger).

    from routing import Router, build_router, create_app, load_catalog

    router = build_router(load_settings())            # upstream, quarantine exclusions, ledger,
                                                      # the routes' endpoints listings
    result = await router.complete(body, workload="invoice_extraction", operation_id="op-1")
    result.accepted.parsed                            # schema- and semantically-valid object
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from routing.compose import build_router
    from routing.contracts import Contract
    from routing.errors import (
        AmbiguousCompletionError,
        CapacityError,
        CircuitOpenError,
        ContractError,
        DeadlineExhaustedError,
        FailureClass,
        InvalidResponseError,
        NoCompatibleRouteError,
        PermanentRequestError,
        RouteIncompatibleError,
        RoutingError,
        TransientTransportError,
    )
    from routing.exclusions import (
        CachedIgnoreSource,
        IgnoreSource,
        quarantine_source,
        static_source,
    )
    from routing.gateway import create_app
    from routing.report import router_report
    from routing.router import Router, RouterResult
    from routing.routes import Catalog, load_catalog
    from routing.tools import ToolStore, execution_key

# Each name is imported on first use, so a module that imports one part of routing (a round
# reads the gateway's production evidence through routing.passive_ledger) does not load the
# gateway's server and HTTP client (Starlette, aiohttp) or pandas with it.
_LAZY = {
    "AmbiguousCompletionError": "routing.errors",
    "CachedIgnoreSource": "routing.exclusions",
    "CapacityError": "routing.errors",
    "Catalog": "routing.routes",
    "CircuitOpenError": "routing.errors",
    "Contract": "routing.contracts",
    "ContractError": "routing.errors",
    "DeadlineExhaustedError": "routing.errors",
    "FailureClass": "routing.errors",
    "IgnoreSource": "routing.exclusions",
    "InvalidResponseError": "routing.errors",
    "NoCompatibleRouteError": "routing.errors",
    "PermanentRequestError": "routing.errors",
    "RouteIncompatibleError": "routing.errors",
    "Router": "routing.router",
    "RouterResult": "routing.router",
    "RoutingError": "routing.errors",
    "ToolStore": "routing.tools",
    "TransientTransportError": "routing.errors",
    "build_router": "routing.compose",
    "create_app": "routing.gateway",
    "execution_key": "routing.tools",
    "load_catalog": "routing.routes",
    "quarantine_source": "routing.exclusions",
    "router_report": "routing.report",
    "static_source": "routing.exclusions",
}

__all__ = [
    "AmbiguousCompletionError",
    "CachedIgnoreSource",
    "CapacityError",
    "Catalog",
    "CircuitOpenError",
    "Contract",
    "ContractError",
    "DeadlineExhaustedError",
    "FailureClass",
    "IgnoreSource",
    "InvalidResponseError",
    "NoCompatibleRouteError",
    "PermanentRequestError",
    "RouteIncompatibleError",
    "Router",
    "RouterResult",
    "RoutingError",
    "ToolStore",
    "TransientTransportError",
    "build_router",
    "create_app",
    "execution_key",
    "load_catalog",
    "quarantine_source",
    "router_report",
    "static_source",
]


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'routing' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value
