"""The scale test: one scheduled slot of N models x M endpoints through Prefect workers, with
the Prefect server and the ledger on PostgreSQL (README, "Scale-out"; `make scale-test`).

What it starts (all on 127.0.0.1, all stopped at the end, whatever happened):
  1. a throwaway PostgreSQL cluster (`scale.postgres`) with two databases, `prefect` and
     `ledger`;
  2. `prefect server start` on it (PREFECT_API_DATABASE_CONNECTION_URL=postgresql+asyncpg://…);
  3. the fleet (`canary fleet serve`) with N models of M healthy endpoints each, plus one
     endpoint per model that corrupts the start of every reply (it must fail, per model);
  4. the README's recipe: `python -m deployments.render` for the N models, `prefect
     work-pool create canary --type process`, `prefect deploy --all --prefect-file …` from
     this checkout, and two `prefect worker start --pool canary` processes (CANARY_LEDGER_URL=
     postgresql+psycopg://…, PROVIDER_CANARY_DIR = this checkout).

Then it fires one slot: each round deployment's next run that Prefect's scheduler created
(cron */30, UTC) is moved to now, so the N rounds start together as at :00/:30, and waits for
them. Afterwards it runs one model's round alone through the same deployment and workers
(the next logical slot) as the yardstick. It checks:
  - every round of the slot ended Completed, once per model (no other run of it started);
  - no lost state write: each model's quarantine block is at revision 1 (2 for the model that
    also ran the yardstick round), and the ledger holds exactly one row per endpoint for each
    of its rounds, the start-corrupting endpoint `failed` in every model;
  - both workers ran rounds;
  - no "database is locked" (nor any ERROR) in the server's, the workers' or the runs' logs;
and prints the slot's wall time beside one model's round. Exit 0 when every check passed.

    .venv/bin/python -m scale.slot_test [--models 20] [--endpoints 20] [--keep]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import yaml

from ground.prefect_server import healthy
from scale.postgres import Cluster, throwaway_cluster

ROOT = Path(__file__).resolve().parents[1]
FLEET_KEY = "fleet-local-key"
POOL = "canary"
FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}
BAD_LOG = re.compile(r"database is locked|deadlock detected|could not serialize", re.I)


def model_name(i: int) -> str:
    return f"scale/model-{i:02d}"


def fleet_scenario(models: int, endpoints: int) -> dict[str, Any]:
    """N models; per model M healthy endpoints and one that corrupts every reply's start."""

    def endpoint(tag: str, ttft_s: float, defects: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "tag": tag,
            "provider_name": tag.split("/")[0].title().replace("-", ""),
            "timing": {"ttft_s": ttft_s, "tokens_per_s": 100, "jitter": 0.1},
            "defects": defects,
        }

    return {
        "name": "scale",
        "seed": 0,
        "time_scale": 1.0,
        "models": [
            {
                "id": model_name(m),
                "context_length": 32768,
                "endpoints": [
                    *(endpoint(f"host{e:02d}/fp8", 0.2 + 0.01 * e, []) for e in range(endpoints)),
                    endpoint("stray/fp8", 0.3, [{"kind": "stray_start", "rate": 1.0}]),
                ],
            }
            for m in range(models)
        ],
    }


# ---------------------------------------------------------------- processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Processes:
    """Every long-running process this test starts, each in its own session, and its log."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.started: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(self, name: str, cmd: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        with (self.logs / f"{name}.log").open("ab") as log:
            proc = subprocess.Popen(
                cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        self.started.append((name, proc))
        return proc

    def log(self, name: str) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop_all(self) -> None:
        """SIGTERM each process group (and any descendant that left it), newest first."""
        for _name, proc in reversed(self.started):
            pids = _descendants(proc.pid)
            for sig in (15, 9):
                for target in (proc.pid, *pids):
                    try:
                        if target == proc.pid:
                            os.killpg(proc.pid, sig)
                        else:
                            os.kill(target, sig)
                    except ProcessLookupError:
                        pass
                try:
                    proc.wait(timeout=15)
                    break
                except subprocess.TimeoutExpired:
                    continue


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class RssSampler:
    """Peak RSS, sampled every 0.5 s, of the workers with their flow-run processes (total) and
    of the largest single flow-run process."""

    def __init__(self, workers: list[subprocess.Popen[bytes]]) -> None:
        self.workers = workers
        self.total_mb = 0.0
        self.run_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            total = 0.0
            for w in self.workers:
                total += _rss_mb(w.pid)
                for child in _descendants(w.pid):
                    mb = _rss_mb(child)
                    total += mb
                    self.run_mb = max(self.run_mb, mb)
            self.total_mb = max(self.total_mb, total)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def run(cmd: list[str], env: dict[str, str], what: str, timeout_s: float = 300) -> str:
    result = subprocess.run(
        cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"{what} failed ({result.returncode}):\n{result.stdout}{result.stderr}")
    return result.stdout


def wait_for(what: str, check: Any, timeout_s: float, proc: subprocess.Popen[bytes]) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what}: the process exited with {proc.returncode}")
        value = check()
        if value:
            return value
        time.sleep(0.3)
    raise RuntimeError(f"{what}: not ready within {timeout_s:.0f} s")


# ---------------------------------------------------------------- the slot


async def _runs(client: Any, deployment_ids: list[UUID]) -> list[Any]:
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId

    out: list[Any] = []
    offset = 0
    while True:
        page = await client.read_flow_runs(
            deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=deployment_ids)),
            limit=200,
            offset=offset,
        )
        out += page
        if len(page) < 200:
            return out
        offset += 200


async def _wait_final(client: Any, run_ids: list[UUID], timeout_s: float) -> dict[UUID, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        runs = {r: await client.read_flow_run(r) for r in run_ids}
        if all(run.state and run.state.type.value in FINAL for run in runs.values()):
            return runs
        if time.monotonic() > deadline:
            late = [str(r) for r, run in runs.items() if run.state.type.value not in FINAL]
            raise RuntimeError(f"runs not final after {timeout_s:.0f} s: {late}")
        await asyncio.sleep(0.5)


async def slot(models: list[str], timeout_s: float) -> dict[str, Any]:
    """Fire one scheduled slot, then one model's round alone; return what the checks need."""
    from prefect import get_client
    from prefect.states import Scheduled

    from deployments.local import round_deployment_name

    async with get_client() as client:
        by_name = {d.name: d for d in await client.read_deployments()}
        wanted = {m: by_name[round_deployment_name(m)] for m in models}
        ids = [d.id for d in wanted.values()]
        # Prefect's scheduler creates each deployment's upcoming runs from its cron schedule
        deadline = time.monotonic() + 120
        while True:
            scheduled = [r for r in await _runs(client, ids) if r.state_type.value == "SCHEDULED"]
            firsts: dict[UUID, Any] = {}
            for r in sorted(scheduled, key=lambda r: r.expected_start_time):
                firsts.setdefault(r.deployment_id, r)
            if len(firsts) == len(ids):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the scheduler made runs for {len(firsts)}/{len(ids)} models")
            await asyncio.sleep(1)
        slot_times = {r.expected_start_time for r in firsts.values()}
        fired = time.time()
        now = datetime.now(UTC)
        for r in firsts.values():  # the slot, now: each model's next scheduled run
            await client.set_flow_run_state(r.id, Scheduled(scheduled_time=now), force=True)
        slot_runs = await _wait_final(client, [r.id for r in firsts.values()], timeout_s)
        slot_wall = max(r.end_time.timestamp() for r in slot_runs.values() if r.end_time) - fired

        # the yardstick: one model's round alone, same deployment and workers, in the logical
        # slot after the one the slot's rounds applied (they took `at` = their start time)
        yard_model = models[0]
        done = datetime.now(UTC)
        at = done.replace(minute=(done.minute // 30) * 30, second=0, microsecond=0)
        fired_one = time.time()
        one = await client.create_flow_run_from_deployment(
            wanted[yard_model].id, parameters={"at": (at + timedelta(minutes=30)).isoformat()}
        )
        one_run = (await _wait_final(client, [one.id], timeout_s))[one.id]
        one_wall = one_run.end_time.timestamp() - fired_one

        all_runs = await _runs(client, ids)
        started = [r for r in all_runs if r.state_type.value != "SCHEDULED"]
        logs = await _flow_run_logs(client, [r.id for r in started])
    return {
        "slot_times": slot_times,
        "slot_runs": slot_runs,
        "slot_wall": slot_wall,
        "one_run": one_run,
        "one_wall": one_wall,
        "yard_model": yard_model,
        "started": started,
        "deployment_model": {d.id: m for m, d in wanted.items()},
        "logs": logs,
    }


async def _flow_run_logs(client: Any, run_ids: list[UUID]) -> list[Any]:
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    out: list[Any] = []
    for i in range(0, len(run_ids), 50):
        offset = 0
        while True:
            page = await client.read_logs(
                log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=run_ids[i : i + 50])),
                limit=200,
                offset=offset,
            )
            out += page
            if len(page) < 200:
                break
            offset += 200
    return out


async def states(models: list[str]) -> dict[str, Any]:
    from quarantine.adapters.store import aload_state

    return {m: await aload_state(m) for m in models}


# ---------------------------------------------------------------- checks and report


class Checks:
    def __init__(self) -> None:
        self.passed: list[str] = []
        self.failed: list[str] = []

    def check(self, ok: bool, what: str) -> None:
        (self.passed if ok else self.failed).append(what)
        print(f"  {'ok  ' if ok else 'FAIL'} {what}", flush=True)


def judge(result: dict[str, Any], state: dict[str, Any], ledger_url: str, procs: Processes,
          endpoints: int, workers: int) -> Checks:  # fmt: skip
    from quarantine.adapters.ledger import Ledger

    c = Checks()
    models = list(state)
    yard = result["yard_model"]
    slot_runs = result["slot_runs"]
    dep_model = result["deployment_model"]
    completed = [r for r in slot_runs.values() if r.state_type.value == "COMPLETED"]
    c.check(
        len(completed) == len(models),
        f"slot: {len(completed)}/{len(models)} rounds Completed"
        + "".join(
            f"; {dep_model[r.deployment_id]} {r.state_type.value}: {r.state.message}"
            for r in slot_runs.values()
            if r.state_type.value != "COMPLETED"
        ),
    )
    c.check(
        len({dep_model[r.deployment_id] for r in slot_runs.values()}) == len(models),
        "slot: one run per model",
    )
    times = sorted(t.isoformat() for t in result["slot_times"])
    c.check(len(times) == 1, f"slot: every run was its deployment's next scheduled run {times}")
    c.check(
        result["one_run"].state_type.value == "COMPLETED",
        f"one model's round alone: {result['one_run'].state_type.value}",
    )
    extra = len(result["started"]) - len(models) - 1
    c.check(extra == 0, f"no other round started ({extra} extra)")

    revisions = {m: s.revision for m, s in state.items()}
    expected = {m: 2 if m == yard else 1 for m in models}
    wrong = {m: (revisions[m], expected[m]) for m in models if revisions[m] != expected[m]}
    c.check(not wrong, f"state revisions as expected (1 per applied round) {wrong or ''}")

    ledger = Ledger(ledger_url)
    try:
        bad: list[str] = []
        for m in models:
            frame = ledger.probes_frame(m)
            per_round = frame.groupby("round_id").size().to_dict() if len(frame) else {}
            rounds = expected[m]
            if len(per_round) != rounds or any(n != endpoints + 1 for n in per_round.values()):
                bad.append(f"{m}: {per_round}")
                continue
            stray = frame[frame.tag == "stray/fp8"].verdict.tolist()
            healthy = frame[frame.tag != "stray/fp8"].verdict.value_counts().to_dict()
            if set(stray) != {"failed"} or set(healthy) - {"clean"}:
                bad.append(f"{m}: stray {stray}, others {healthy}")
        c.check(not bad, f"ledger on PostgreSQL: one row per endpoint per round {bad or ''}")
    finally:
        ledger.close()

    used = {
        name
        for name, _ in procs.started
        if name.startswith("worker") and "Completed" in procs.log(name)
    }
    c.check(len(used) == workers, f"rounds ran on {len(used)}/{workers} workers")

    texts = {n: procs.log(n) for n, _ in procs.started}
    locked = {n: len(BAD_LOG.findall(t)) for n, t in texts.items() if BAD_LOG.search(t)}
    run_logs = result["logs"]
    locked_runs = [lg.message for lg in run_logs if BAD_LOG.search(lg.message)]
    c.check(
        not locked and not locked_runs,
        f'no "database is locked" in server, worker or run logs {locked or ""}{locked_runs[:3] or ""}',
    )
    errors = [lg.message[:200] for lg in run_logs if lg.level >= 40]
    c.check(not errors, f"no ERROR in the runs' logs {errors[:3] or ''}")
    return c


def report(
    result: dict[str, Any], args: argparse.Namespace, timings: dict[str, float], procs: Processes
) -> None:
    runs = list(result["slot_runs"].values())
    durations = [r.total_run_time.total_seconds() for r in runs]
    slot_wall, one_wall = result["slot_wall"], result["one_wall"]
    one_run = result["one_run"].total_run_time.total_seconds()
    print(f"\nscale test: {args.models} models x {args.endpoints + 1} endpoints, "
          f"{args.workers} process workers (limit {args.limit} runs each), {os.cpu_count()} CPUs, "
          f"fleet time_scale {args.time_scale}")  # fmt: skip
    for what, seconds in timings.items():
        print(f"  {what:<44}{seconds:7.1f} s")
    print(f"  {'slot: trigger -> last round Completed':<44}{slot_wall:7.1f} s")
    print(f"  {'slot: round run time p50 / max':<44}{statistics.median(durations):7.1f} s"
          f" / {max(durations):.1f} s")  # fmt: skip
    print(f"  {'one model alone: trigger -> Completed':<44}{one_wall:7.1f} s"
          f" (run time {one_run:.1f} s)")  # fmt: skip
    print(f"  {'slot wall / one model round':<44}{slot_wall / one_wall:7.2f}x"
          f"  ({args.models} rounds; {args.models / (slot_wall / one_wall):.1f}x the work per second"
          " of one round alone)")  # fmt: skip
    retried = sum(procs.log(n).count("retrying") for n, _ in procs.started if n.startswith("work"))
    print(f"  {'state saves retried (Prefect first-save race)':<44}{retried:7d}")
    rss = result["rss"]
    print(f"  {'peak RSS: workers + all flow-run processes':<44}{rss.total_mb:7.0f} MB"
          f" (largest flow-run process {rss.run_mb:.0f} MB)")  # fmt: skip


@contextmanager
def _timed(timings: dict[str, float], what: str) -> Iterator[None]:
    t0 = time.monotonic()
    yield
    timings[what] = time.monotonic() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--endpoints", type=int, default=20, help="healthy endpoints per model")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--limit", type=int, default=0, help="runs per worker (0: models/workers)")
    parser.add_argument("--time-scale", type=float, default=0.1, help="fleet timing scale")
    parser.add_argument("--timeout", type=float, default=900, help="seconds for the slot")
    parser.add_argument("--keep", action="store_true", help="keep the logs folder")
    args = parser.parse_args()
    args.limit = args.limit or -(-args.models // args.workers)
    models = [model_name(i) for i in range(args.models)]
    tmp = Path(tempfile.mkdtemp(prefix="canary-scale-"))
    procs = Processes(tmp)
    timings: dict[str, float] = {}
    py = sys.executable
    checks: Checks | None = None
    try:
        with _timed(timings, "PostgreSQL cluster up, 2 databases"), throwaway_cluster() as pg:
            pg.create_database("prefect")
            pg.create_database("ledger")
            checks = _with_cluster(pg, args, models, tmp, procs, timings, py)
    finally:
        procs.stop_all()
        print(f"logs: {tmp}" if args.keep else "", end="\n" if args.keep else "")
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    if checks is None:
        return 1
    print(f"scale-test: {len(checks.passed)} passed, {len(checks.failed)} failed")
    return 1 if checks.failed else 0


def _with_cluster(pg: Cluster, args: argparse.Namespace, models: list[str], tmp: Path,
                  procs: Processes, timings: dict[str, float], py: str) -> Checks:  # fmt: skip
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    ledger_url = pg.url("ledger", driver="psycopg")
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "PREFECT_HOME": str(tmp / "prefect"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_API_DATABASE_CONNECTION_URL": pg.url("prefect", driver="asyncpg"),
        "PREFECT_API_URL": api,
    }
    with _timed(timings, "Prefect server on PostgreSQL up"):
        server = procs.start(
            "server",
            [py, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
            env,
        )
        wait_for("prefect server", lambda: healthy(api), 180, server)
    os.environ.update(PREFECT_API_URL=api)

    (tmp / "scenario.yaml").write_text(yaml.safe_dump(fleet_scenario(args.models, args.endpoints)))
    fleet = procs.start(
        "fleet",
        [py, "-m", "canary.cli", "fleet", "serve", "--scenario", str(tmp / "scenario.yaml"),
         "--port", "0", "--time-scale", str(args.time_scale)],
        env,
    )  # fmt: skip
    match = wait_for(
        "fleet", lambda: re.search(r"at (http://[\d.:]+/api/v1)", procs.log("fleet")), 120, fleet
    )
    canary_env = {
        **env,
        "CANARY_BASE_URL": match.group(1),
        "CANARY_API_KEY": FLEET_KEY,
        "CANARY_HOME": str(tmp / "home"),
        "CANARY_LEDGER_URL": ledger_url,
        "CANARY_MODELS": ",".join(models),
        "CANARY_MODE": "observe",
        "CANARY_CONTROL_PROVIDERS": "",
        "CANARY_NOTIFICATION_BLOCK": "",
        "PROVIDER_CANARY_DIR": str(ROOT),
    }
    with _timed(timings, f"work pool + {len(models) + 4} deployments (prefect deploy)"):
        (tmp / "prefect.yaml").write_text(
            run([py, "-m", "deployments.render"], canary_env, "deployments.render")
        )
        run([py, "-m", "prefect", "work-pool", "create", POOL, "--type", "process"],
            canary_env, "work-pool create")  # fmt: skip
        run([py, "-m", "prefect", "--no-prompt", "deploy", "--all", "--prefect-file",
             str(tmp / "prefect.yaml")], canary_env, "prefect deploy")  # fmt: skip
    worker_env = {**canary_env, "PREFECT_WORKER_QUERY_SECONDS": "2"}
    for i in range(args.workers):
        procs.start(
            f"worker{i + 1}",
            [py, "-m", "prefect", "worker", "start", "--pool", POOL, "--type", "process",
             "--name", f"scale-worker-{i + 1}", "--limit", str(args.limit)],
            worker_env,
        )  # fmt: skip
    for name, proc in procs.started:
        if name.startswith("worker"):
            wait_for(name, lambda n=name: "started!" in procs.log(n), 120, proc)

    workers = [proc for name, proc in procs.started if name.startswith("worker")]
    with RssSampler(workers) as rss:
        result = asyncio.run(slot(models, args.timeout))
    result["rss"] = rss
    state = asyncio.run(states(models))
    print("checks:")
    checks = judge(result, state, ledger_url, procs, args.endpoints, args.workers)
    report(result, args, timings, procs)
    return checks


if __name__ == "__main__":
    sys.exit(main())
