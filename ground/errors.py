"""The root of provider-canary's own errors.

Every error the project raises on purpose derives from `CanaryError`, each layer's tree
from it (drawn in each tree's module):

    CanaryError
     ├── RenamedSettingError         ground/settings.py: a setting under a replaced name
     ├── PrefectUnavailable          ground/prefect_server.py: the Prefect API is out of reach
     ├── WireJSONError               wire/jsonio.py: bytes that are not acceptable JSON
     ├── ProbeClientError            probes/errors.py: the probe client and discovery
     ├── UnknownLocaleError          probes/prompts.py: no prompt pack for a locale
     ├── QuarantineError             quarantine/errors.py: state, exclusions, locks, clock
     ├── RoutingError                routing/errors.py: every failure the router returns
     ├── ContractError               routing/errors.py: a contract/route/schema file
     ├── UpstreamError               routing/errors.py: the gateway's upstream transport
     ├── PlanError                   flows/roundplan.py: a round that cannot be planned
     ├── PreflightError              canary/cli/preflight.py: the CLI's checks before a run
     └── ScenarioError, ...          fleet/: the fleet's own input errors

A foreign exception (a library's) is translated into one of these at the boundary where
it meets our code, or is a bug. The CLI maps these classes to exit codes in one table
(`canary/cli/errors.py`), and a test fails when a class of this tree has no row.
"""

from __future__ import annotations


class CanaryError(Exception):
    """Base of every error provider-canary raises on purpose."""
