"""A command that talks to Prefect gives up when the Prefect API disappears under it.

Prefect's client retries a vanished server with backoff, and the flow engine keeps
reporting states to it, so without a bound a round whose server died hangs for minutes.
`api_watchdog(url, lost_after_s)` polls `<url>/health` from a daemon thread; once the API
has not answered for `lost_after_s` it prints one line and ends the process with exit 1
(`os._exit`: the event loop may be stuck inside a retrying client call, and nothing of ours
is left to flush; the round's lock expires by itself and the next round marks the run
Crashed). Polling starts after the first answer, so a slow start is not a loss.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ground.prefect_server import healthy

POLL_S = 2.0


def _give_up(message: str) -> None:  # pragma: no cover - ends the process
    sys.stdout.flush()
    # on a line of its own: Prefect's API log handler may have left a partial line
    sys.stderr.write(f"\nerror: {message}\n")
    sys.stderr.flush()
    os._exit(1)


@contextmanager
def api_watchdog(
    api_url: str,
    lost_after_s: float,
    *,
    poll_s: float = POLL_S,
    on_lost: Callable[[str], None] = _give_up,
) -> Iterator[None]:
    """Watch `api_url` while the block runs (see module docstring)."""
    stop = threading.Event()

    def watch() -> None:
        last_ok = time.monotonic()
        while not stop.wait(poll_s):
            if healthy(api_url, timeout_s=min(poll_s, 2.0)):
                last_ok = time.monotonic()
            elif time.monotonic() - last_ok >= lost_after_s and not stop.is_set():
                on_lost(
                    f"the Prefect API at {api_url} stopped answering for {lost_after_s:.0f} s; "
                    "giving up (a round's lock expires by itself)"
                )
                return

    thread = threading.Thread(target=watch, name="prefect-api-watchdog", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
