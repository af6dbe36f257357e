"""quarantine: what the canary decides (SPEC Q1-Q8, O4).

    verdicts    round verdict of one endpoint from its outcomes (pure)
    models      ProviderState, ModelState, RoundReport, PolicyConfig, Decision (data)
    policy      step / lift / switch_mode: the suspension state machine (pure)
    builtin     layer (a): vetted built-in exclusions file (builtin_exclusions.yaml)
    incidents   layer (b): runtime incident exclusions in a Prefect Variable per model
    exclusions  the merge of (a), (b) and (c) canary suspensions into provider.ignore
    store       ModelState in a Prefect block, serialised and revision-checked writes
    ledger      decisions and per-endpoint round rows in SQL (SQLModel), pandas frames
    admin       status, lift, exclusions, ignore list for the CLI and admin flows
    errors      the error tree

Only the pure parts are re-exported here, so importing them does not import Prefect.
"""

from ground.settings import PolicyConfig
from quarantine.models import Decision, DecisionKind, Mode, ModelState, RoundReport
from quarantine.policy import lift, step, switch_mode
from quarantine.verdicts import ProviderRound, RoundVerdict, round_verdict

__all__ = [
    "Decision",
    "DecisionKind",
    "Mode",
    "ModelState",
    "PolicyConfig",
    "ProviderRound",
    "RoundReport",
    "RoundVerdict",
    "lift",
    "round_verdict",
    "step",
    "switch_mode",
]
