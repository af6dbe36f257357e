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
from routing.exclusions import CachedIgnoreSource, IgnoreSource, quarantine_source, static_source
from routing.gateway import create_app
from routing.router import Router, RouterResult
from routing.routes import Catalog, load_catalog
from routing.tools import ToolStore, execution_key

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
    if name == "router_report":  # pandas is heavy: import on first use
        from routing.report import router_report

        return router_report
    raise AttributeError(f"module 'routing' has no attribute {name!r}")
