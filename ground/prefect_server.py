"""The embedded default Prefect API: a *local server* on SQLite that our own
commands start and stop (not Prefect's ephemeral mode, which loses task-run
records when the process exits; see shared/PREFECT.md).

Resolution order for every command that needs Prefect:
1. `PREFECT_API_URL` is set (a Prefect server on PostgreSQL, Prefect Cloud, a
   test harness): use it, start nothing.
2. A server answers on `127.0.0.1:<CANARY_PREFECT_PORT>`: use it.
3. Otherwise start `prefect server start` in the background with
   `PREFECT_HOME=<CANARY_HOME>/prefect`, wait for `/api/health`, and leave it
   running for the next command; `canary server stop` stops it.

The server we start keeps concurrency-limit leases on disk (Prefect's filesystem lease
storage) instead of in memory, so a slot held across a server restart is still revoked
when its lease expires (with the in-memory default it would stay held for ever).

It also records task runs and events in batches (`SERVER_ENV`): by default Prefect's
server writes every task-run state change in a SQLite transaction of its own, and a
round's writes that read first (the state lock, the block update, releasing the round
lock) then meet one of them and are answered 503 `database is locked`, to be sent again.
Batched, the server writes a round's task runs about once every two seconds: they reach
the UI up to two seconds later. Our test harness and the round bench use the same settings.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

from ground.errors import CanaryError
from ground.settings import Settings


class PrefectUnavailable(CanaryError, RuntimeError):
    """The Prefect API could not be reached or started."""


@dataclass(frozen=True)
class LocalServer:
    api_url: str
    ui_url: str
    started_here: bool
    pid: int | None
    log_path: Path | None


SERVER_ENV = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",  # no telemetry writes, no internet calls
    # task-run state changes written at most every 2 s, in one transaction per batch
    "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_BATCH_SIZE": "500",
    "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_FLUSH_INTERVAL": "2",
    # events: Prefect's own 5 s flush, not a transaction per 20 events
    "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_BATCH_SIZE": "500",
}


def server_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """`SERVER_ENV` under what the operator set: a variable already in `environ` (default
    `os.environ`) wins."""
    current = os.environ if environ is None else environ
    return {k: current.get(k, v) for k, v in SERVER_ENV.items()}


def _pid_file(settings: Settings) -> Path:
    return settings.home / "prefect" / "server.pid"


def healthy(api_url: str, timeout_s: float = 2.0) -> bool:
    try:
        response = httpx.get(f"{api_url.rstrip('/')}/health", timeout=timeout_s)
    except httpx.HTTPError:
        return False
    return response.status_code == 200


def configured_api_url() -> str | None:
    """PREFECT_API_URL from the environment or Prefect's own profile, if any."""
    env = os.environ.get("PREFECT_API_URL")
    if env:
        return env
    from prefect.settings import get_current_settings

    url = get_current_settings().api.url
    return str(url) if url else None


def start_local_server(settings: Settings, *, startup_timeout_s: float = 120.0) -> LocalServer:
    """Start (or reuse) the local Prefect server on SQLite under CANARY_HOME."""
    port = settings.prefect_port
    api_url = f"http://127.0.0.1:{port}/api"
    ui_url = f"http://127.0.0.1:{port}"
    pid_file = _pid_file(settings)
    if healthy(api_url):
        pid = int(pid_file.read_text()) if pid_file.exists() else None
        return LocalServer(api_url, ui_url, False, pid, None)
    home = settings.home / "prefect"
    home.mkdir(parents=True, exist_ok=True)
    log_path = home / "server.log"
    env = {
        **os.environ,
        **server_env(),
        "PREFECT_HOME": str(home),
        "PREFECT_API_URL": api_url,
        "PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE": os.environ.get(
            "PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE",
            "prefect.server.concurrency.lease_storage.filesystem",
        ),
    }
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "prefect", "server", "start",
             "--host", "127.0.0.1", "--port", str(port)],
            env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
    pid_file.write_text(str(proc.pid))
    deadline = time.monotonic() + startup_timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise PrefectUnavailable(
                f"prefect server exited with code {proc.returncode}; see {log_path}"
            )
        if healthy(api_url, timeout_s=1.0):
            return LocalServer(api_url, ui_url, True, proc.pid, log_path)
        time.sleep(0.5)
    stop_pid(proc.pid)
    raise PrefectUnavailable(
        f"prefect server did not answer on {api_url} within {startup_timeout_s:.0f} s; see {log_path}"
    )


def stop_pid(pid: int, timeout_s: float = 15.0) -> None:
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        with contextlib.suppress(ChildProcessError):  # reap it if it is our child
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def _is_prefect_server(pid: int) -> bool:
    """Whether `pid` is still a `prefect server start` (a stale pid file after a reboot
    may name an unrelated process, which must never be killed)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"prefect" in b" ".join(cmdline) and b"server" in cmdline and b"start" in cmdline


def stop_local_server(settings: Settings) -> bool:
    """Stop the server `start_local_server` started; True if one was stopped."""
    pid_file = _pid_file(settings)
    if not pid_file.exists():
        return False
    try:
        pid = int(pid_file.read_text().strip())
    except ValueError:
        pid_file.unlink(missing_ok=True)
        return False
    stopped = _is_prefect_server(pid)
    if stopped:
        stop_pid(pid)
    pid_file.unlink(missing_ok=True)
    return stopped


def ensure_api(settings: Settings) -> str:
    """Return a reachable Prefect API URL, starting the local server if needed,
    and point this process's Prefect client at it."""
    url = configured_api_url()
    if url:
        if not healthy(url):
            raise PrefectUnavailable(f"the Prefect API at {url} does not answer /health")
        return url
    server = start_local_server(settings)
    os.environ["PREFECT_API_URL"] = server.api_url
    return server.api_url


@contextlib.contextmanager
def use_api(settings: Settings) -> Iterator[str]:
    """`with use_api(settings) as url:` runs the block against a reachable Prefect API."""
    url = ensure_api(settings)
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: url}):
        yield url
