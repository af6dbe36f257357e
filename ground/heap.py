"""The garbage collector in a process that measures time.

A round's process holds a few hundred thousand long-lived objects (Prefect, pydantic,
SQLAlchemy, our modules), and CPython's full collection walks every one of them: about
0.1-0.3 s on a 2-core machine, a few times per 100-endpoint round. A pause like that lands
inside some streaming probe and is measured as that provider's first-token latency.

`freeze_loaded()` moves everything alive at that moment into the collector's permanent
generation (`gc.freeze()`), once per process: later full collections walk only what the
rounds themselves allocate. The cost is that whatever was loaded before the first round
and becomes cyclic garbage later is never freed; that is bounded by what was loaded, once.
"""

from __future__ import annotations

import gc

_frozen = False


def freeze_loaded() -> bool:
    """Freeze the objects alive now, the first time it is called in this process; returns
    whether this call froze them."""
    global _frozen
    if _frozen:
        return False
    gc.freeze()
    _frozen = True
    return True
