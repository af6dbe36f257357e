"""The router's composition root: a `Router` wired from the settings, its parts each taking
its own config whole.

    router = build_router(load_settings())

    catalog        the contracts and routes (`settings.routing.contracts_dir`, else the
                   shipped examples)
    upstream       `settings.base_url` with `settings.api_key` (`Upstream`, settings.routing)
    ignore source  the quarantine's merged `provider.ignore`, cached (settings.routing); its
                   last lists kept in `settings.resolved_ignore_file` (only for the
                   quarantine's own source: a stand-in never overwrites them)
    breakers       settings.breaker
    events         the ledger (`settings.resolved_ledger_url`), unless `events=False`
    listings       the routes' endpoints listings through the same upstream, read by the
                   gateway at start and every `listing_refresh_s` (`ListingBook`), unless
                   `listings=False`
    retries        settings.routing and settings.allowances (`Router`); the capacity floor
                   of provider exclusions is settings.policy.floor
    evidence       production traffic as evidence (O8): settings.passive, the peer test of
                   settings.probe, and the Prefect event of a suspect provider
                   (`routing/suspect_events.py`), unless `suspect_events=False`

Kept apart from the HTTP shell (`routing/gateway.py`), which only serves a router it is
given.
"""

from __future__ import annotations

from pathlib import Path

from ground.settings import Settings
from routing.breaker import BreakerBoard
from routing.events import EventLog
from routing.exclusions import CachedIgnoreSource, IgnoreFile, IgnoreSource, quarantine_source
from routing.listing import ListingBook
from routing.router import Router
from routing.routes import load_catalog
from routing.suspect_events import emit_suspect
from routing.upstream import Upstream


def build_router(
    settings: Settings,
    *,
    contracts_dir: Path | None = None,
    ignore_source: IgnoreSource | None = None,
    events: bool = True,
    listings: bool = True,
    suspect_events: bool = True,
) -> Router:
    """A Router wired from `settings` (see the module docstring); `contracts_dir` and
    `ignore_source` replace the settings' contracts and the quarantine's exclusions."""
    s = settings
    upstream = Upstream(s.base_url, s.api_key, s.routing)
    kept = IgnoreFile(s.resolved_ignore_file) if ignore_source is None else None
    return Router(
        load_catalog(contracts_dir or s.routing.contracts_dir),
        upstream,
        ignore_source=CachedIgnoreSource(
            ignore_source or quarantine_source(), s.routing, store=kept
        ),
        breakers=BreakerBoard(s.breaker),
        events=EventLog(s.resolved_ledger_url) if events else None,
        config=s.routing,
        allowances=s.allowances,
        listings=ListingBook(upstream, s.routing) if listings else None,
        floor=s.policy.floor,
        passive=s.passive,
        probe=s.probe,
        announce=emit_suspect if suspect_events else None,
    )
