"""A round's process loads only what a round runs (issue 26): on a process work pool every
round is a new Python process, so each module its flow imports and never uses costs CPU in
every round (pandas alone was 0.6 s of a 3 s import). The round's flow module must not bring
in pandas or numpy (the ledger's frames, the reports), the gateway's server and HTTP client
(Starlette app, aiohttp) or the plots. A set of modules, not a timing: it holds on a busy
machine."""

from __future__ import annotations

import json
import subprocess
import sys

# Imported where they are used: the ledger's frames, the router's report, the reports, the
# gateway (routing/__init__.py names its parts lazily).
NOT_IN_A_ROUND = (
    "pandas",
    "numpy",
    "matplotlib",
    "aiohttp",
    "routing.gateway",
    "routing.compose",
    "routing.upstream",
    "routing.report",
    "reports",
)


def test_importing_the_round_flow_loads_no_module_a_round_does_not_run() -> None:
    """`import flows.canary_round` in a fresh interpreter leaves pandas, numpy, matplotlib,
    aiohttp, the gateway and the reports unloaded."""
    code = (
        "import json, sys\n"
        "import flows.canary_round\n"
        f"print(json.dumps([m for m in {list(NOT_IN_A_ROUND)!r} if m in sys.modules]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
