"""quarantine: what the canary decides (SPEC Q1-Q8, O4).

The pure core (no I/O, no clock: time is a parameter):

    verdicts    round verdict of one endpoint from its outcomes
    judged      what a host is held to, and which of those contracts a round judged (C5)
    budget      the canary's own bill per model and day, its forecast and budget (C13)
    models      ProviderState, ModelState, RoundReport, Decision (data)
    policy      step / lift / switch_mode: the suspension state machine (`PolicyConfig`
                lives in ground/settings.py)
    builtin     layer (a): vetted built-in exclusions file (builtin_exclusions.yaml)
    exclusions  the merge of (a), (b) and (c) canary suspensions into provider.ignore
    blind       whether a round is blind (our key or credits refused, too many frozen)
    clock       the logical clock: future slots, a stored last round ahead of now
    overview    each endpoint's standing (status, until, why) for status and artifacts
    errors      the quarantine's error tree (under ground.errors.CanaryError)

Where the core meets Prefect and SQL (quarantine/adapters/):

    store       ModelState in a Prefect block, serialised and revision-checked writes
    incidents   layer (b): runtime incident exclusions in a Prefect Variable per model
    lease       the model's round lock, a renewed lease in a Prefect Variable
    locking     the state-write locks (Prefect global concurrency limits)
    ignore      reading the three layers into provider.ignore
    ledger      decisions and per-endpoint round rows in SQL (SQLModel), pandas frames
    admin       status, lift, exclusions, ignore list for the CLI and admin flows

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
