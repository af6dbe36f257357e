"""The scale test: one scheduled slot of N models x M endpoints through Prefect workers, with
the Prefect server and the ledger on PostgreSQL (README, "Scale-out"; `make scale-test`).

What it starts (all on 127.0.0.1, all stopped at the end, whatever happened):
  1. a throwaway PostgreSQL cluster (`scale.postgres`) with two databases, `prefect` and
     `ledger`;
  2. `prefect server start` on it (PREFECT_API_DATABASE_CONNECTION_URL=postgresql+asyncpg://…),
     recording task runs and events in batches (`ground.prefect_server.SERVER_ENV`);
  3. the fleet (`canary fleet serve`) with N models of M healthy endpoints each, plus one
     endpoint per model that corrupts the start of every reply (it must fail, per model);
  4. the README's recipe: `python -m deployments.render` for the N models, `prefect
     work-pool create canary --type process --base-job-template …` (Prefect's default with
     each flow run started as `python -m prefect.engine`: `engine_pool_template`),
     `prefect deploy --all --prefect-file …` from this checkout (`--deployers` of them at
     once, each with a share of the deployments), and two `prefect worker start --pool
     canary` processes (CANARY_LEDGER_URL=postgresql+psycopg://…, PROVIDER_CANARY_DIR = this
     checkout). Every process gets PREFECT_API_SSL_CERT_FILE of one certificate
     (`api_ca_file`) and may cache bytecode (PYTHONDONTWRITEBYTECODE is not passed on).

The shape: `--endpoints N` healthy endpoints per model, or `--endpoints A-B` for A, A+1, ...,
B in turn (the catalogue in miniature: `--models 100 --endpoints 2-7` is 100 models of 3 to
8 endpoints, the bad one included). How many rounds run at once is the work pool's
concurrency limit (`--concurrency`, default 20; each worker's `--limit` is its share), so
memory is bounded by it, not by the number of models.

Then it fires one slot: each round deployment's next run that Prefect's scheduler created
(cron */30, UTC) is moved to now, so the N rounds start together as at :00/:30, and waits for
them (the pool's queue is paused until then, so a :00 or :30 that passes during the set-up
starts nothing by itself). Afterwards it runs one model's round alone through the same deployment and workers
(the next logical slot) as the yardstick. It checks:
  - every round of the slot ended Completed, once per model (no other run of it started);
  - no lost state write: each model's quarantine block is at revision 1 (2 for the model that
    also ran the yardstick round), and the ledger holds exactly one row per endpoint for each
    of its rounds, the start-corrupting endpoint `failed` in every model;
  - both workers ran rounds;
  - no "database is locked" (nor any ERROR) in the server's, the workers' or the runs' logs;
and prints the slot's wall time beside one model's round, then the slot's per-round costs
(`scale/costs.py`): CPU seconds per endpoint-round of the rounds' processes, the Prefect
server, PostgreSQL and the fleet; peak memory per concurrent round; the Prefect database's
transactions and row writes per round (PostgreSQL's own counters); the ledger's rows and
bytes per round (`pg_total_relation_size`). Costs are net of the background (workers
polling, the server's services), measured over an idle stretch just before the slot.
Exit 0 when every check passed.

    .venv/bin/python -m scale.slot_test [--models 20] [--endpoints 20|A-B] [--concurrency 20]
        [--deployers 2] [--default-command] [--keep] [--costs-json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import shlex
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
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import yaml

from ground.prefect_server import healthy, server_env
from scale.costs import (
    PG_STATS_SETTLE_S,
    Footprint,
    Writes,
    children_by_pid,
    database_writes,
    descendants,
    ledger_footprint,
    row_counts,
    tree_cpu_s,
)
from scale.postgres import Cluster, throwaway_cluster

ROOT = Path(__file__).resolve().parents[1]
FLEET_KEY = "fleet-local-key"
POOL = "canary"
FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}
IDLE_S = 20.0  # the idle stretch before the slot that measures the background
POLL_S = 3.0  # how often the test reads the runs it waits for
QUIET_S = 6.0  # no growth over this long: the set-up's writes have landed
BAD_LOG = re.compile(r"database is locked|deadlock detected|could not serialize", re.I)


def model_name(i: int) -> str:
    return f"scale/model-{i:02d}"


def healthy_counts(spec: str, models: int) -> list[int]:
    """Healthy endpoints of each model: `N` for every model, or `A-B` for A, A+1, ..., B,
    A, ... in turn (the spread of providers per model of a catalogue)."""
    low, dash, high = spec.partition("-")
    try:
        a, b = int(low), int(high if dash else low)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--endpoints takes N or A-B, got {spec!r}") from None
    if not 1 <= a <= b:
        raise argparse.ArgumentTypeError(f"--endpoints {spec}: need 1 <= A <= B")
    return [a + i % (b - a + 1) for i in range(models)]


def fleet_scenario(healthy: list[int]) -> dict[str, Any]:
    """Model i with healthy[i] healthy endpoints and one that corrupts every reply's start."""

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
                    *(endpoint(f"host{e:02d}/fp8", 0.2 + 0.01 * e, []) for e in range(n)),
                    endpoint("stray/fp8", 0.3, [{"kind": "stray_start", "rate": 1.0}]),
                ],
            }
            for m, n in enumerate(healthy)
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
            pids = descendants(proc.pid)
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


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class RssSampler:
    """Peak RSS, sampled every 0.5 s, of the workers with their flow-run processes (total), of
    the largest single flow-run process, and at the peak: the workers' own share and how many
    flow-run processes (a worker's children: one per round) shared the rest."""

    def __init__(self, workers: list[subprocess.Popen[bytes]]) -> None:
        self.workers = workers
        self.total_mb = 0.0
        self.run_mb = 0.0
        self.workers_mb = 0.0  # at the peak
        self.runs_at_peak = 0
        self.most_runs = 0
        self.max_load = 0.0  # the highest 1-minute load average seen (the machine is shared)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            self.max_load = max(self.max_load, float(Path("/proc/loadavg").read_text().split()[0]))
            tree = children_by_pid()  # one scan of /proc a sample: the machine is shared
            own = sum(_rss_mb(w.pid) for w in self.workers)
            runs: list[float] = []
            for w in self.workers:
                for child in descendants(w.pid, tree):
                    runs.append(_rss_mb(child))
            # a worker's direct children: one flow-run process per round
            children = sum(len(tree.get(w.pid, [])) for w in self.workers)
            self.run_mb = max([self.run_mb, *runs])
            self.most_runs = max(self.most_runs, children)
            if own + sum(runs) > self.total_mb:
                self.total_mb, self.workers_mb, self.runs_at_peak = own + sum(runs), own, children

    @property
    def per_round_mb(self) -> float:
        """Memory per concurrent round at the peak: the flow-run processes' share per run."""
        return (self.total_mb - self.workers_mb) / max(1, self.runs_at_peak)

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


async def _deployments(client: Any) -> list[Any]:
    """Every deployment (the server answers 200 at most per request)."""
    out: list[Any] = []
    while True:
        page = await client.read_deployments(limit=200, offset=len(out))
        out += page
        if len(page) < 200:
            return out


async def _read_runs(client: Any, run_ids: list[UUID]) -> dict[UUID, Any]:
    """The runs by id, read 200 to a request (one poll of a 100-round slot is one request,
    so the test's own polling hardly shows in the server's costs)."""
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    found: dict[UUID, Any] = {}
    for i in range(0, len(run_ids), 200):
        page = await client.read_flow_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=run_ids[i : i + 200])),
            limit=200,
        )
        found.update({r.id: r for r in page})
    return found


async def _wait_final(client: Any, run_ids: list[UUID], timeout_s: float) -> dict[UUID, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        runs = await _read_runs(client, run_ids)
        if len(runs) == len(run_ids) and all(
            run.state and run.state.type.value in FINAL for run in runs.values()
        ):
            return runs
        if time.monotonic() > deadline:
            late = [str(r) for r, run in runs.items() if run.state.type.value not in FINAL]
            raise RuntimeError(f"runs not final after {timeout_s:.0f} s: {late}")
        # each poll reads every run with its state: a server cost in the slot's figures;
        # the slot's times come from the runs' end times, not from when a poll saw them
        await asyncio.sleep(POLL_S)


@dataclass(frozen=True)
class CostSample:
    at_s: float  # time.monotonic()
    cpu_s: dict[str, float]  # per process group
    writes: Writes  # the Prefect database's
    ledger: Footprint


class Costs:
    """CPU of each process group, the Prefect database's writes and the ledger's footprint,
    sampled around the slot (module docstring; `scale/costs.py`)."""

    def __init__(self, groups: dict[str, list[int]], prefect_db: str, ledger_url: str) -> None:
        self.groups, self.prefect_db, self.ledger_url = groups, prefect_db, ledger_url
        self.samples: list[CostSample] = []

    def sample(self) -> None:
        self.samples.append(
            CostSample(
                time.monotonic(),
                {name: tree_cpu_s(pids) for name, pids in self.groups.items()},
                database_writes(self.prefect_db),
                ledger_footprint(self.ledger_url),
            )
        )

    async def quiet(self, timeout_s: float = 180.0) -> None:
        """Until the set-up's own writes have landed: the deploy's events and the runs
        Prefect's scheduler makes for every deployment stop growing over one flush of the
        server's event persister (5 s). Else the idle stretch would count them as background
        and subtract them, scaled up to the slot's window, from the slot's writes."""
        tables = ("events", "event_resources", "flow_run")
        deadline = time.monotonic() + timeout_s
        before = await asyncio.to_thread(row_counts, self.prefect_db, tables)
        while time.monotonic() < deadline:
            await asyncio.sleep(QUIET_S)
            now = await asyncio.to_thread(row_counts, self.prefect_db, tables)
            if now == before:
                return
            before = now
        print(f"the Prefect database still grew {timeout_s:.0f} s after the set-up", flush=True)

    async def idle(self) -> None:
        """Two samples `IDLE_S` apart, once the set-up's writes have landed and PostgreSQL has
        published them: the background's rates (workers polling, the server's services)."""
        await self.quiet()
        await asyncio.sleep(PG_STATS_SETTLE_S)
        self.sample()
        await asyncio.sleep(IDLE_S)
        self.sample()

    async def after(self) -> None:
        await asyncio.sleep(PG_STATS_SETTLE_S)  # PostgreSQL publishes its counters late
        self.sample()


async def slot(models: list[str], timeout_s: float, costs: Costs) -> dict[str, Any]:
    """Fire one scheduled slot, then one model's round alone; return what the checks need."""
    from prefect import get_client
    from prefect.states import Scheduled

    from deployments.local import round_deployment_name

    async with get_client() as client:
        by_name = {d.name: d for d in await _deployments(client)}
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
        await costs.idle()
        queue = await client.read_work_queue_by_name("default", work_pool_name=POOL)
        await client.update_work_queue(queue.id, is_paused=False)
        fired = time.time()
        now = datetime.now(UTC)
        for r in firsts.values():  # the slot, now: each model's next scheduled run
            await client.set_flow_run_state(r.id, Scheduled(scheduled_time=now), force=True)
        slot_runs = await _wait_final(client, [r.id for r in firsts.values()], timeout_s)
        slot_wall = max(r.end_time.timestamp() for r in slot_runs.values() if r.end_time) - fired
        await costs.after()

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
          healthy: dict[str, int], workers: int) -> Checks:  # fmt: skip
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
            want = healthy[m] + 1
            if len(per_round) != rounds or any(n != want for n in per_round.values()):
                bad.append(f"{m}: {per_round}")
                continue
            stray = frame[frame.tag == "stray/fp8"].verdict.tolist()
            others = frame[frame.tag != "stray/fp8"].verdict.value_counts().to_dict()
            if set(stray) != {"failed"} or set(others) - {"clean"}:
                bad.append(f"{m}: stray {stray}, others {others}")
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


def _shape(healthy: list[int]) -> str:
    low, high = min(healthy) + 1, max(healthy) + 1
    return f"{len(healthy)} models x {low if low == high else f'{low}-{high}'} endpoints"


def report(
    result: dict[str, Any], args: argparse.Namespace, timings: dict[str, float], procs: Processes
) -> None:
    runs = list(result["slot_runs"].values())
    durations = [r.total_run_time.total_seconds() for r in runs]
    slot_wall, one_wall = result["slot_wall"], result["one_wall"]
    one_run = result["one_run"].total_run_time.total_seconds()
    print(f"\nscale test: {_shape(args.healthy)} ({sum(args.healthy) + len(args.healthy)} "
          f"endpoint-rounds a slot), {args.workers} process workers (limit {args.limit} runs "
          f"each, work pool concurrency {args.concurrency}), {os.cpu_count()} CPUs, fleet "
          f"time_scale {args.time_scale}, load average {result['load']} at the start, "
          f"{result['rss'].max_load:.1f} at most during the slot")  # fmt: skip
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
    print(f"  {'memory per concurrent round (at the peak)':<44}{rss.per_round_mb:7.0f} MB"
          f" ({rss.runs_at_peak} rounds then, at most {rss.most_runs}; workers "
          f"{rss.workers_mb:.0f} MB)")  # fmt: skip


def summarise_costs(costs: Costs, healthy: list[int]) -> dict[str, Any]:
    """The slot's costs summed, net of the background (the rate measured over the idle
    stretch before the slot, times the slot's window), and the background's rates."""
    s0, s1, s2 = costs.samples
    idle_s, window_s = s1.at_s - s0.at_s, s2.at_s - s1.at_s

    def net(before: float, after: float, idle_before: float) -> float:
        return (after - before) - (before - idle_before) / idle_s * window_s

    w_slot, w_idle = s2.writes - s1.writes, s1.writes - s0.writes
    scale_ = window_s / idle_s
    by_table = {
        t: max(0.0, n - w_idle.by_table.get(t, 0) * scale_) for t, n in w_slot.by_table.items()
    }
    background = {t: n / idle_s for t, n in w_idle.by_table.items() if n > 0}
    grown = s2.ledger - s1.ledger
    return {
        "rounds": len(healthy),
        "endpoint_rounds": sum(healthy) + len(healthy),
        "window_s": window_s,
        "idle_s": idle_s,
        "cpu_s": {g: net(s1.cpu_s[g], s2.cpu_s[g], s0.cpu_s[g]) for g in s0.cpu_s},
        "background_cpu_s_per_s": {g: (s1.cpu_s[g] - s0.cpu_s[g]) / idle_s for g in s0.cpu_s},
        "prefect_transactions": w_slot.transactions - w_idle.transactions / idle_s * window_s,
        "prefect_rows": sum(by_table.values()),
        "background_transactions_per_s": w_idle.transactions / idle_s,
        "background_rows_per_s": w_idle.rows / idle_s,
        "background_rows_by_table_per_s": dict(sorted(background.items(), key=lambda x: -x[1])[:4]),
        "prefect_rows_by_table": dict(sorted(by_table.items(), key=lambda x: -x[1])[:8]),
        "prefect_bytes": w_slot.size_bytes,
        "prefect_table_bytes": dict(sorted(w_slot.table_bytes.items(), key=lambda x: -x[1])[:6]),
        "ledger_rows": grown.rows,
        "ledger_bytes": grown.total_bytes,
        "ledger_table_bytes": grown.table_bytes,
    }


def report_costs(c: dict[str, Any]) -> None:
    rounds, eps = c["rounds"], c["endpoint_rounds"]
    print(f"per-round costs (slot window {c['window_s']:.0f} s, net of the background measured "
          f"over {c['idle_s']:.0f} s idle before it; {rounds} rounds, {eps} endpoint-rounds):")  # fmt: skip
    for group, cpu in c["cpu_s"].items():
        print(f"  CPU {group:<38}{cpu / eps:7.3f} CPU-s per endpoint-round ({cpu / rounds:.2f} "
              f"per round; background {c['background_cpu_s_per_s'][group]:.3f} CPU-s/s)")  # fmt: skip
    print(f"  {'Prefect database: transactions / round':<42}"
          f"{c['prefect_transactions'] / rounds:9.1f} "
          f"(background {c['background_transactions_per_s']:.1f}/s)")  # fmt: skip
    print(f"  {'Prefect database: rows written / round':<42}{c['prefect_rows'] / rounds:9.1f} "
          f"(inserted+updated+deleted, per table net of its background)")  # fmt: skip
    print("    most written: "
          + ", ".join(f"{t} {n / rounds:.1f}" for t, n in c["prefect_rows_by_table"].items()))  # fmt: skip
    print("    background: " + ", ".join(
        f"{t} {n:.1f}/s" for t, n in c["background_rows_by_table_per_s"].items()
    ) + f" ({c['background_rows_per_s']:.1f} rows/s in all)")  # fmt: skip
    print(f"  {'Prefect database: bytes / round':<42}{c['prefect_bytes'] / rounds:9.0f} "
          "(pg_database_size, the whole database; by table, pg_total_relation_size: "
          + ", ".join(f"{t} {n / rounds:.0f}" for t, n in c["prefect_table_bytes"].items())
          + ")")  # fmt: skip
    rows = c["ledger_rows"]
    print(f"  {'ledger: rows / round':<42}{sum(rows.values()) / rounds:9.1f} "
          f"({', '.join(f'{t} {n / rounds:.1f}' for t, n in rows.items() if n)})")  # fmt: skip
    print(f"  {'ledger: bytes / round (pg_total_relation_size)':<42}"
          f"{c['ledger_bytes'] / rounds:9.0f} ({c['ledger_bytes'] / eps:.0f} per endpoint-round; "
          + ", ".join(f"{t} {n / rounds:.0f}" for t, n in c["ledger_table_bytes"].items() if n)
          + ")")  # fmt: skip


def measured(
    result: dict[str, Any], args: argparse.Namespace, costs: dict[str, Any]
) -> dict[str, Any]:
    """What `--costs-json` writes: the shape, the timings, memory and the costs (the inputs of
    `python -m scale.model`)."""
    rss = result["rss"]
    durations = [r.total_run_time.total_seconds() for r in result["slot_runs"].values()]
    return {
        "shape": _shape(args.healthy),
        "workers": args.workers,
        "concurrency": args.concurrency,
        "time_scale": args.time_scale,
        "load_average": result["load"],
        "max_load_during_slot": result["rss"].max_load,
        "slot_wall_s": result["slot_wall"],
        "round_run_time_p50_s": statistics.median(durations),
        "one_round_wall_s": result["one_wall"],
        "one_round_run_time_s": result["one_run"].total_run_time.total_seconds(),
        "peak_rss_mb": rss.total_mb,
        "workers_rss_mb": rss.workers_mb,
        "memory_per_concurrent_round_mb": rss.per_round_mb,
        "largest_round_process_mb": rss.run_mb,
        **costs,
    }


@contextmanager
def _timed(timings: dict[str, float], what: str) -> Iterator[None]:
    t0 = time.monotonic()
    yield
    timings[what] = time.monotonic() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--endpoints", default="20", help="healthy endpoints per model: N or A-B")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=20,
                        help="the work pool's concurrency limit: rounds at once")  # fmt: skip
    parser.add_argument("--limit", type=int, default=0, help="runs per worker (0: its share)")
    parser.add_argument("--time-scale", type=float, default=0.1, help="fleet timing scale")
    parser.add_argument("--timeout", type=float, default=900, help="seconds for the slot")
    parser.add_argument("--keep", action="store_true", help="keep the logs folder")
    parser.add_argument("--deployers", type=int, default=2,
                        help="`prefect deploy --all` processes at once, each with a share of "
                             "the deployments")  # fmt: skip
    parser.add_argument("--default-command", action="store_true",
                        help="leave the pool's flow-run command blank (Prefect's workspace "
                             "supervisor, then the engine: a second process start per round)")  # fmt: skip
    parser.add_argument("--costs-json", type=Path, default=None,
                        help="write the measured figures here (python -m scale.model reads it)")  # fmt: skip
    args = parser.parse_args()
    try:
        args.healthy = healthy_counts(args.endpoints, args.models)
    except argparse.ArgumentTypeError as exc:
        parser.error(str(exc))
    args.concurrency = min(args.concurrency, args.models)
    args.limit = args.limit or -(-args.concurrency // args.workers)
    models = [model_name(i) for i in range(args.models)]
    tmp = Path(tempfile.mkdtemp(prefix="canary-scale-"))
    procs = Processes(tmp)
    timings: dict[str, float] = {}
    checks: Checks | None = None
    started = time.monotonic()
    try:
        with _timed(timings, "PostgreSQL cluster up, 2 databases"), throwaway_cluster() as pg:
            pg.create_database("prefect")
            pg.create_database("ledger")
            checks = _with_cluster(pg, args, models, tmp, procs, timings)
    finally:
        procs.stop_all()
        print(f"logs: {tmp}" if args.keep else "", end="\n" if args.keep else "")
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    if checks is None:
        return 1
    print(f"scale-test: {len(checks.passed)} passed, {len(checks.failed)} failed "
          f"in {time.monotonic() - started:.0f} s (load average {_load()})")  # fmt: skip
    return 1 if checks.failed else 0


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def api_ca_file(tmp: Path) -> Path:
    """A CA file of one root certificate (the first of certifi's bundle), for
    PREFECT_API_SSL_CERT_FILE: the CAs trusted for the Prefect API's TLS.

    Prefect's client builds a verified TLS context from that file for every client it makes,
    whatever the API's scheme: about 15 in a round's process and 7 per deployment at
    `prefect deploy`, 18 ms each from certifi's 117 roots, about a tenth of a round's CPU and
    half the deploy CLI's. The API here is plain http on loopback (as in the README's
    recipe), so no certificate is ever checked against the file; an API behind TLS would
    name the CA that signs its certificate."""
    import certifi

    bundle = Path(certifi.where()).read_text()
    end = "-----END CERTIFICATE-----"
    first = bundle[bundle.index("-----BEGIN CERTIFICATE-----") : bundle.index(end) + len(end)]
    path = tmp / "prefect-api-ca.pem"
    path.write_text(first + "\n")
    return path


def _env(pg: Cluster, tmp: Path, api: str) -> dict[str, str]:
    # A worker machine caches the checkout's bytecode like any Python install; a shell that
    # forbids it (PYTHONDONTWRITEBYTECODE) would have every flow-run process compile the
    # project's modules again (about 0.4 CPU-s a round), a cost no deployment pays.
    inherited = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {
        **inherited,
        "PYTHONUNBUFFERED": "1",
        "PREFECT_HOME": str(tmp / "prefect"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_API_DATABASE_CONNECTION_URL": pg.url("prefect", driver="asyncpg"),
        "PREFECT_API_URL": api,
        "PREFECT_API_SSL_CERT_FILE": str(api_ca_file(tmp)),
    }


def _start_server_and_fleet(pg: Cluster, args: argparse.Namespace, tmp: Path, procs: Processes,
                            timings: dict[str, float]) -> tuple[dict[str, str], str]:  # fmt: skip
    """The Prefect server on PostgreSQL and the fleet; returns the environment and the
    fleet's base URL."""
    py, port = sys.executable, free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = _env(pg, tmp, api)
    with _timed(timings, "Prefect server on PostgreSQL up"):
        server = procs.start(
            "server",
            [py, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
            # task runs and events recorded in batches; the scheduler keeps 3 runs of each
            # deployment ahead, not 100 (20,700 flow runs made right after deploying 207)
            {**env, **server_env(env), "PREFECT_SERVER_SERVICES_SCHEDULER_MAX_RUNS": "3"},
        )
        wait_for("prefect server", lambda: healthy(api), 180, server)
    os.environ.update(PREFECT_API_URL=api)
    (tmp / "scenario.yaml").write_text(yaml.safe_dump(fleet_scenario(args.healthy)))
    fleet = procs.start(
        "fleet",
        [py, "-m", "canary.cli", "fleet", "serve", "--scenario", str(tmp / "scenario.yaml"),
         "--port", "0", "--time-scale", str(args.time_scale)],
        env,
    )  # fmt: skip
    match = wait_for(
        "fleet", lambda: re.search(r"at (http://[\d.:]+/api/v1)", procs.log("fleet")), 120, fleet
    )
    return env, match.group(1)


def engine_pool_template(env: dict[str, str]) -> dict[str, Any]:
    """Prefect's default process job template, with each flow run started as the engine
    itself (`python -m prefect.engine`, this interpreter).

    Left blank, Prefect 3.9's process worker starts a workspace supervisor
    (`prefect.runner._workspace_supervisor`) that imports Prefect, runs the deployment's pull
    steps and then replaces itself with a fresh `python -m prefect.engine`, which imports
    Prefect again: about 1.6 CPU-s a round for a second interpreter start. With a command
    set, the worker starts the engine directly and the engine runs the same pull steps
    (`set_working_directory`) before it loads the flow (Prefect's `load_flow_from_flow_run`).
    """
    default = run([sys.executable, "-m", "prefect", "work-pool", "get-default-base-job-template",
                   "--type", "process"], env, "get-default-base-job-template")  # fmt: skip
    template: dict[str, Any] = json.loads(default)
    command = f"{shlex.quote(sys.executable)} -m prefect.engine"
    template["variables"]["properties"]["command"]["default"] = command
    return template


def split_prefect_file(path: Path, parts: int) -> list[Path]:
    """The rendered prefect.yaml as `parts` files of every `parts`-th deployment each (the
    same pull step and definitions), for as many `prefect deploy --all` at once."""
    if parts <= 1:
        return [path]
    rendered = yaml.safe_load(path.read_text())
    deployments = rendered.pop("deployments")
    files = []
    for i in range(parts):
        part = path.with_name(f"{path.stem}-{i + 1}{path.suffix}")
        part.write_text(yaml.safe_dump({**rendered, "deployments": deployments[i::parts]}))
        files.append(part)
    return files


def deploy_all(files: list[Path], env: dict[str, str]) -> None:
    """`prefect deploy --all` of each file, all at once (each its log beside the file): the
    CLI spends much of a deployment waiting on the server, and one at a time leaves a core
    idle."""
    deploy = [sys.executable, "-m", "prefect", "--no-prompt", "deploy", "--all", "--prefect-file"]
    procs = []
    for f in files:
        with f.with_suffix(".log").open("w") as log:
            procs.append(
                subprocess.Popen(
                    [*deploy, str(f)], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
                )
            )
    for f, proc in zip(files, procs, strict=True):
        if proc.wait(timeout=900) != 0:
            out = f.with_suffix(".log").read_text(errors="replace")
            raise RuntimeError(f"prefect deploy {f.name} failed ({proc.returncode}):\n{out}")


def _deploy_and_start_workers(canary_env: dict[str, str], args: argparse.Namespace, tmp: Path,
                              procs: Processes, timings: dict[str, float]) -> None:  # fmt: skip
    """The README's recipe: render, the work pool (its concurrency limit bounds the rounds at
    once), `prefect deploy --all`, and the workers."""
    py = sys.executable
    rendered = run([py, "-m", "deployments.render"], canary_env, "deployments.render")
    (tmp / "prefect.yaml").write_text(rendered)
    count = len(yaml.safe_load(rendered)["deployments"])
    with _timed(timings, f"work pool + {count} deployments (prefect deploy)"):
        pool = [py, "-m", "prefect", "work-pool", "create", POOL, "--type", "process"]
        if not args.default_command:
            (tmp / "pool.json").write_text(json.dumps(engine_pool_template(canary_env)))
            pool += ["--base-job-template", str(tmp / "pool.json")]
        run(pool, canary_env, "work-pool create")
        run([py, "-m", "prefect", "work-pool", "set-concurrency-limit", POOL,
             str(args.concurrency)], canary_env, "work-pool set-concurrency-limit")  # fmt: skip
        # held until the slot is fired, so a :00/:30 passing during the set-up starts nothing
        run([py, "-m", "prefect", "work-queue", "pause", "default", "--pool", POOL],
            canary_env, "work-queue pause")  # fmt: skip
        server = [proc.pid for name, proc in procs.started if name == "server"]
        cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN), tree_cpu_s(server)
        deploy_all(split_prefect_file(tmp / "prefect.yaml", args.deployers), canary_env)
        cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN), tree_cpu_s(server)
    cli_s = sum(getattr(cpu1[0], f) - getattr(cpu0[0], f) for f in ("ru_utime", "ru_stime"))
    print(f"prefect deploy: {count} deployments by {args.deployers} processes, CPU-s: the CLI "
          f"{cli_s:.1f}, the server {cpu1[1] - cpu0[1]:.1f}", flush=True)  # fmt: skip
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


def _with_cluster(pg: Cluster, args: argparse.Namespace, models: list[str], tmp: Path,
                  procs: Processes, timings: dict[str, float]) -> Checks:  # fmt: skip
    from quarantine.adapters.ledger import Ledger

    ledger_url = pg.url("ledger", driver="psycopg")
    env, base_url = _start_server_and_fleet(pg, args, tmp, procs, timings)
    canary_env = {
        **env,
        "CANARY_BASE_URL": base_url,
        "CANARY_API_KEY": FLEET_KEY,
        "CANARY_HOME": str(tmp / "home"),
        "CANARY_LEDGER_URL": ledger_url,
        "CANARY_MODELS": ",".join(models),
        "CANARY_MODE": "observe",
        "CANARY_CONTROL_PROVIDERS": "",
        "CANARY_NOTIFICATION_BLOCK": "",
        "PROVIDER_CANARY_DIR": str(ROOT),
    }
    _deploy_and_start_workers(canary_env, args, tmp, procs, timings)
    Ledger(ledger_url).close()  # its tables exist before the slot: what grows is the rows
    by_name = dict(procs.started)
    workers = [proc for name, proc in procs.started if name.startswith("worker")]
    costs = Costs(
        {
            "rounds (workers + flow-run processes)": [w.pid for w in workers],
            "Prefect server": [by_name["server"].pid],
            "PostgreSQL (both databases)": [pg.pid],
            "fleet (the providers' side)": [by_name["fleet"].pid],
        },
        pg.url("prefect", driver="psycopg"),
        ledger_url,
    )
    load = _load()
    with RssSampler(workers) as rss:
        result = asyncio.run(slot(models, args.timeout, costs))
    result.update(rss=rss, load=load)
    state = asyncio.run(states(models))
    print("checks:")
    healthy = dict(zip(models, args.healthy, strict=True))
    checks = judge(result, state, ledger_url, procs, healthy, args.workers)
    report(result, args, timings, procs)
    summary = summarise_costs(costs, args.healthy)
    report_costs(summary)
    if args.costs_json is not None:
        figures = {**measured(result, args, summary), "timings_s": timings}
        args.costs_json.write_text(json.dumps(figures, indent=2, default=str))
        print(f"measured figures: {args.costs_json}")
    return checks


if __name__ == "__main__":
    sys.exit(main())
