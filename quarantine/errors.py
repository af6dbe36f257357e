"""The quarantine's error tree. Every error says what was wrong and that nothing changed.

QuarantineError                 base of everything raised by quarantine/
├── UnknownModelError           no quarantine state stored for the model
├── UnknownTagError             the model's state has no such endpoint tag
├── NotSuspendedError           lift of an endpoint that is not (shadow-)suspended
├── ExclusionError              runtime incident exclusions (Prefect Variable)
│   ├── ExpiryInPastError       an exclusion expiry at or before `now`
│   ├── ExclusionNotFoundError  removing a tag that has no runtime exclusion
│   ├── ExclusionsFullError     the Variable's JSON would exceed 5,000 characters
│   └── ExclusionsCorruptError  the Variable holds something that is not our document
├── BuiltinExclusionsError      the versioned built-in exclusions file is invalid
├── StateCorruptError           the state block document cannot be read back
├── StaleRevisionError          a write raced another writer and could not be re-applied
├── ClockNotAheadError          `clock reset` of a model not ahead (quarantine/clock.py)
├── RetentionError              the ledger could not be pruned (quarantine/adapters/retention.py)
└── LeaseError                  the model's round lock (quarantine/adapters/lease.py)
    ├── LeaseTimeoutError       the lock stayed held by a live holder for the whole wait
    └── LeaseLostError          this process no longer holds the lease it acquired
"""

from __future__ import annotations

from typing import Any

from ground.errors import CanaryError


class QuarantineError(CanaryError):
    """Base class of every quarantine error."""


class UnknownModelError(QuarantineError, LookupError):
    pass


class UnknownTagError(QuarantineError, LookupError):
    pass


class NotSuspendedError(QuarantineError, ValueError):
    pass


class ExclusionError(QuarantineError):
    pass


class ExpiryInPastError(ExclusionError, ValueError):
    pass


class ExclusionNotFoundError(ExclusionError, LookupError):
    pass


class ExclusionsFullError(ExclusionError):
    pass


class ExclusionsCorruptError(ExclusionError, ValueError):
    pass


class BuiltinExclusionsError(QuarantineError, ValueError):
    pass


class StateCorruptError(QuarantineError, ValueError):
    pass


class StaleRevisionError(QuarantineError, RuntimeError):
    pass


class RetentionError(QuarantineError, RuntimeError):
    """The ledger could not be pruned (out of reach, locked for too long)."""


class LeaseError(QuarantineError, RuntimeError):
    """Base of the round lock's errors."""


class LeaseTimeoutError(LeaseError, TimeoutError):
    """The lock stayed held by a live holder for the whole wait; `view` says who."""

    def __init__(self, message: str, view: Any) -> None:
        super().__init__(message)
        self.view = view  # quarantine.adapters.lease.LeaseView


class LeaseLostError(LeaseError):
    """This process no longer holds the lease it acquired."""
