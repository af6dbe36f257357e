"""Round figures (issue 5 section 7, issue 13 part 3), side by side in one run, for each
endpoint count asked (default 20 and 100):

    round      wall time of one `canary_round` flow run over N endpoints
               (Prefect's real API via its test harness; every endpoint probed at once)
    critical   the slowest endpoint's probe chain (its probe set, plus confirmations),
               measured in the bare run below
    bare       a plain asyncio script doing the same probes with the round's clients (one
               per endpoint, as the round's probe task opens them: one pool of hundreds of
               connections costs httpcore time quadratic in its size): the plan of the same
               slot (`plan_round`: each endpoint's locale, the shared start-sample locale),
               `run_probe_set` for every endpoint concurrently with the round's settings,
               each endpoint's confirmations right after its probes
    overhead   round - bare: what the flow adds to the same probes
    floor      a flow run with the task runs of a round whose endpoints are all clean, doing
               nothing (discover, pinned probes, majority vote, policy step, apply, the
               `clean` verdict, one after the other): what Prefect alone costs a round's
               DAG (O1, O3), on the same server

and prints round/critical and round/bare (aims: round <= 1.2x the critical path at 20
endpoints, <= 1.1x at 100) as ratios of the medians, and `paired`: the median over the
repeats of round / critical of the bare run right after it (noise that hits a pair alike
cancels). Then where a round's time goes: before its probes (call to the start of its
`pinned-probes` task run), the probes, and after them (their end to the flow's return),
beside the allowance the aim leaves over the critical path. With two or more sizes it also
fits overhead = fixed + per_endpoint * N: `fixed` is the per-round cost that does not grow
with the endpoints (aim <= 0.5 s). A small --time-scale makes the probes nearly free, so
the round wall itself shows the fixed cost.

Every size has its own model on one fleet; rounds and bare runs alternate (size by size,
repeat by repeat) so machine noise hits both alike, and each run waits for a quiet machine
first (the server records a 100-endpoint round's task runs for seconds after it ends).
Endpoint i of every size has the timing of endpoint i % 20 of the 20-endpoint model (first
token 0.2-0.77 s).

    .venv/bin/python bench/bench_round.py [--endpoints 20 100] [--repeats 3]
        [--time-scale 1.0] [--profile DIR] [--server harness|postgres]

--server picks the Prefect API the rounds write to: `harness` (default) is Prefect's test
harness, a server on SQLite in a subprocess, like the embedded default; `postgres` starts a
throwaway PostgreSQL cluster (Debian's server binaries: `make postgresql`) and
`prefect server start` on it, the scale-out setup (README "Scale-out"; the ledger stays
on SQLite under the bench's CANARY_HOME).

--profile DIR runs one more round per size under cProfile after the measured ones and
writes DIR/round-<N>.prof (read it with `python -m pstats`).

Last, the per-round costs (docs/SCALE.md; `scale/costs.py`): --cost-rounds rounds per size
back to back (default 3), then the server's batched writers are let finish, and per size:
CPU seconds per endpoint-round of the round's own process, of the Prefect server and of the
fleet (from /proc), the Prefect database's writes per round (on SQLite the rows added to its
tables; on PostgreSQL its own counters: transactions and rows inserted, updated, deleted),
and the ledger's rows and bytes per round (SQLite under the bench's CANARY_HOME: the file's
growth, the tables' pages where SQLite has `dbstat`).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ground.prefect_server import server_env  # noqa: E402
from tests.fixtures.canary_env import endpoint  # noqa: E402
from tests.fixtures.fleet import FleetHandle, start_fleet, stop_fleet  # noqa: E402

AIMS = {20: 1.2, 100: 1.1}  # round / critical path (issue 13)


def model_id(n: int) -> str:
    return f"bench/round-{n}"


def _endpoints(n: int) -> list[dict[str, object]]:
    eps = []
    for i in range(n):
        spec = endpoint(f"host{i:03d}/fp8" if n > 100 else f"host{i:02d}/fp8")
        j = i % 20
        spec["timing"] = {"ttft_s": 0.2 + 0.03 * j, "tokens_per_s": 80 + 2 * j, "jitter": 0.05}
        eps.append(spec)
    return eps


def _scenario(sizes: list[int]) -> dict[str, object]:
    models = [{"id": model_id(n), "endpoints": _endpoints(n)} for n in sizes]
    return {"name": "bench-round", "models": models}


async def bare(n: int, at: datetime) -> tuple[float, float]:
    """The probes of the round of slot `at` without Prefect: the same plan (each endpoint's
    locale, the shared start-sample locale), the same probe settings, each endpoint's
    confirmations right after its probes if its language failed. Returns (wall, slowest
    endpoint chain)."""
    from flows.roundplan import plan_round
    from ground.settings import load_settings
    from probes.client import ProbeClient
    from probes.probeset import confirm_language, run_probe_set
    from probes.types import Contract, Endpoint, OutcomeStatus

    settings = load_settings()
    chains: list[float] = []

    async def chain(ep: Endpoint, locale: str, start_locale: str | None) -> None:
        t0 = time.perf_counter()
        async with ProbeClient.from_settings(settings) as client:
            result = await run_probe_set(client, ep, locale, start_locale=start_locale)
            if result.outcomes[Contract.LANGUAGE].status is OutcomeStatus.FAIL:
                await confirm_language(client, ep, locale)
        chains.append(time.perf_counter() - t0)

    start = time.perf_counter()
    async with ProbeClient.from_settings(settings) as client:
        endpoints = await client.discover(model_id(n))
    plan = plan_round(model_id(n), at, endpoints, locales=settings.locales)
    await asyncio.gather(
        *(chain(ep, plan.locales[ep.tag], plan.start_locale) for ep in plan.targets)
    )
    return time.perf_counter() - start, max(chains)


@dataclass(frozen=True)
class RoundRun:
    wall: float
    end: str  # the name of the run's final state
    flow_run_id: UUID | None
    called: datetime  # wall clock when the flow was called and when it returned
    returned: datetime


async def one_round(n: int, at: datetime) -> RoundRun:
    """Wall time of one round, the name of its final state and its flow run."""
    from flows.canary_round import canary_round

    called = datetime.now(UTC)
    start = time.perf_counter()
    state = await canary_round(model=model_id(n), mode="observe", at=at, return_state=True)
    wall = time.perf_counter() - start
    end = state.name or state.type.value
    return RoundRun(wall, end, state.state_details.flow_run_id, called, datetime.now(UTC))


async def phases(runs: list[RoundRun]) -> list[tuple[float, float, float]]:
    """(before, probes, after) of each round: from the call to the start of its
    `pinned-probes` task run, that task run, and from its end to the flow's return, by
    the task run's times as the Prefect server recorded them (it records task runs in
    batches: this waits up to a minute for them)."""
    from tests.fixtures.prefect import task_runs_of

    ids = [r.flow_run_id for r in runs if r.flow_run_id is not None]
    probes: dict[UUID | None, Any] = {}
    for _ in range(120):
        probes = {
            t.flow_run_id: t
            for t in await task_runs_of(ids)
            if t.task_key.startswith("pinned_probes") and t.start_time and t.end_time
        }
        if len(probes) >= len(ids):
            break
        await asyncio.sleep(0.5)
    return [
        (
            (t.start_time - r.called).total_seconds(),
            (t.end_time - t.start_time).total_seconds(),
            (r.returned - t.end_time).total_seconds(),
        )
        for r in runs
        if (t := probes.get(r.flow_run_id)) is not None
    ]


async def prefect_floor() -> float:
    """Wall time of what Prefect alone costs a round's DAG: one flow run with the task runs
    of a round of clean endpoints, in the same order, none doing any work, against the same
    server. No round can be cheaper while it keeps its DAG as task runs (O1, O3)."""
    from prefect import flow, task
    from prefect.cache_policies import NO_CACHE

    @task(name="floor-task", cache_policy=NO_CACHE)
    async def nothing(i: int) -> int:
        return i

    @flow(name="bench-prefect-floor")
    async def floor_flow() -> None:
        for step in range(5):  # discover, probes, vote, policy, apply
            await nothing(step)
        await nothing(5)  # the clean verdict

    start = time.perf_counter()
    await floor_flow()
    return time.perf_counter() - start


def _profiled_round(n: int, at: datetime, out: Path) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        asyncio.run(one_round(n, at))
    finally:
        profiler.disable()
        out.parent.mkdir(parents=True, exist_ok=True)
        profiler.dump_stats(str(out))


@dataclass(frozen=True)
class ServerInfo:
    """Where the Prefect server keeps its data and which processes are it (for the costs)."""

    db_url: str
    pids: list[int]


@contextmanager
def _postgres_server(home: Path) -> Iterator[ServerInfo]:
    """`prefect server start` on a throwaway PostgreSQL cluster, started and stopped as
    `make scale-test` does; PREFECT_API_URL points at it for the block."""
    from ground.prefect_server import healthy
    from scale.postgres import throwaway_cluster
    from scale.slot_test import Processes, free_port, wait_for

    home.mkdir(parents=True, exist_ok=True)
    procs = Processes(home)
    with throwaway_cluster() as pg:
        pg.create_database("prefect")
        port = free_port()
        api = f"http://127.0.0.1:{port}/api"
        env = {
            **os.environ,
            "PREFECT_HOME": str(home / "prefect"),
            "PREFECT_API_DATABASE_CONNECTION_URL": pg.url("prefect", driver="asyncpg"),
        }
        try:
            server = procs.start(
                "prefect-server",
                [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
                 "--port", str(port)],
                env,
            )  # fmt: skip
            wait_for(f"prefect server on PostgreSQL ({home}/prefect-server.log)",
                     lambda: healthy(api), 180, server)  # fmt: skip
            os.environ["PREFECT_API_URL"] = api
            yield ServerInfo(pg.url("prefect", driver="psycopg"), [server.pid, pg.pid])
        finally:
            os.environ.pop("PREFECT_API_URL", None)
            procs.stop_all()


@contextmanager
def _harness(fleet: FleetHandle) -> Iterator[ServerInfo]:
    """Prefect's test harness: a server on SQLite in a subprocess (this process's child that
    is not the fleet)."""
    from prefect.settings import get_current_settings
    from prefect.testing.utilities import prefect_test_harness

    from scale.costs import descendants

    fleet_pids = {fleet.process.pid, *descendants(fleet.process.pid)} if fleet.process else set()
    with prefect_test_harness(server_startup_timeout=120):
        url = get_current_settings().server.database.connection_url
        text = url.get_secret_value() if hasattr(url, "get_secret_value") else str(url)
        mine = [p for p in descendants(os.getpid()) if p not in fleet_pids]
        yield ServerInfo(text.replace("+aiosqlite", ""), mine)


def _server(kind: str, home: Path, fleet: FleetHandle) -> AbstractContextManager[ServerInfo]:
    return _postgres_server(home) if kind == "postgres" else _harness(fleet)


@dataclass(frozen=True)
class RoundCosts:
    """What `rounds` rounds of `endpoints` cost, summed (`round_costs`)."""

    rounds: int
    endpoints: int
    round_cpu_s: float
    server_cpu_s: float
    fleet_cpu_s: float
    writes: Any  # scale.costs.Writes
    ledger: Any  # scale.costs.Footprint


def round_costs(n: int, ats: list[datetime], server: ServerInfo, fleet: FleetHandle) -> RoundCosts:
    """One round of `n` endpoints per slot in `ats`, back to back, between two samples of
    CPU, Prefect writes and the ledger; the second after the server's batched writers have
    written (PostgreSQL publishes its counters late: `PG_STATS_SETTLE_S`)."""
    import resource

    from ground.settings import load_settings
    from quarantine.adapters.ledger import Ledger
    from scale.costs import PG_STATS_SETTLE_S, database_writes, ledger_footprint, tree_cpu_s

    ledger_url = load_settings().resolved_ledger_url
    Ledger(ledger_url).close()
    fleet_pids = [fleet.process.pid] if fleet.process else []

    def sample() -> tuple[float, float, float, Any, Any]:
        own = resource.getrusage(resource.RUSAGE_SELF)
        return (own.ru_utime + own.ru_stime, tree_cpu_s(server.pids), tree_cpu_s(fleet_pids),
                database_writes(server.db_url), ledger_footprint(ledger_url))  # fmt: skip

    settle()
    before = sample()
    for at in ats:
        asyncio.run(one_round(n, at))
    time.sleep(PG_STATS_SETTLE_S if "postgresql" in server.db_url else 7.0)
    after = sample()
    cpu = [b - a for a, b in zip(before[:3], after[:3], strict=True)]
    return RoundCosts(len(ats), n, *cpu, after[3] - before[3], after[4] - before[4])


def print_costs(costs: list[RoundCosts], server: str) -> None:
    pg = server == "postgres"
    what = (
        "writes = PostgreSQL's counters, inserted+updated+deleted"
        if pg
        else "writes = rows added to its SQLite tables, updates not seen"
    )
    print(
        f"per-round costs ({costs[0].rounds} rounds back to back per size, then the server's "
        f"batched writers let finish; Prefect server: {server}; {what})"
    )
    print(f"{'endpoints':>9} {'round CPU-s':>11} {'/endpoint':>9} {'server /ep':>10} "
          f"{'fleet /ep':>9} {'Prefect tx':>10} {'writes':>7} {'ledger rows':>11} "
          f"{'ledger KB':>9} {'KB/ep':>6}  (per round)")  # fmt: skip
    for c in costs:
        k, ep = c.rounds, c.rounds * c.endpoints
        tx = f"{c.writes.transactions / k:>10.0f}" if pg else f"{'-':>10}"
        rows = sum(c.ledger.rows.values())
        print(f"{c.endpoints:>9} {c.round_cpu_s / k:>11.2f} {c.round_cpu_s / ep:>9.3f} "
              f"{c.server_cpu_s / ep:>10.3f} {c.fleet_cpu_s / ep:>9.3f} {tx} "
              f"{c.writes.rows / k:>7.0f} {rows / k:>11.1f} {c.ledger.total_bytes / k / 1024:>9.1f} "
              f"{c.ledger.total_bytes / ep / 1024:>6.2f}")  # fmt: skip
    for c in costs:
        top = ", ".join(f"{t} {v / c.rounds:.0f}" for t, v in c.writes.top(6))
        print(f"{c.endpoints} endpoints, Prefect writes per round by table: {top}; the "
              f"Prefect database grew {c.writes.size_bytes / c.rounds / 1024:.0f} KB per round")  # fmt: skip


def _busy_share(span_s: float) -> float:
    """The machine's CPU busy share over the next `span_s` (from /proc/stat)."""

    def sample() -> tuple[int, int]:
        with open("/proc/stat") as stat:
            fields = [int(x) for x in stat.readline().split()[1:]]
        idle = fields[3] + fields[4]  # idle + iowait
        return sum(fields) - idle, sum(fields)

    busy0, total0 = sample()
    time.sleep(span_s)
    busy1, total1 = sample()
    return (busy1 - busy0) / max(1, total1 - total0)


def settle(limit_s: float = 20.0) -> None:
    """Wait until the machine is quiet (the Prefect server has recorded the previous run's
    task runs: after a 100-endpoint round that takes it seconds), so each run starts alike."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and _busy_share(0.25) > 0.10:
        pass


def _fit(sizes: list[int], overheads: list[float]) -> tuple[float, float] | None:
    """Least squares overhead = fixed + per_endpoint * n; None with fewer than 2 sizes."""
    if len(set(sizes)) < 2:
        return None
    mean_n, mean_o = statistics.fmean(sizes), statistics.fmean(overheads)
    slope = sum((n - mean_n) * (o - mean_o) for n, o in zip(sizes, overheads, strict=True)) / sum(
        (n - mean_n) ** 2 for n in sizes
    )
    return mean_o - slope * mean_n, slope


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--endpoints", type=int, nargs="+", default=[20, 100])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--time-scale", type=float, default=1.0)
    parser.add_argument("--profile", type=Path, default=None)
    parser.add_argument("--server", choices=["harness", "postgres"], default="harness")
    parser.add_argument("--cost-rounds", type=int, default=3, help="rounds per size for the costs")
    args = parser.parse_args()
    sizes: list[int] = sorted(set(args.endpoints))

    fleet: FleetHandle = start_fleet("seed-incidents", time_scale=args.time_scale)
    home = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-round-{os.getpid()}"
    os.environ.update(
        CANARY_BASE_URL=fleet.base_url,
        CANARY_API_KEY=fleet.key,
        CANARY_HOME=str(home),
        CANARY_PROBE__CONCURRENCY=str(max(sizes)),  # every endpoint probed at once
        CANARY_CONTROL_PROVIDERS="",
        CANARY_NOTIFICATION_BLOCK="",
        PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL="WARNING",  # the runs still log to the API
    )
    if args.server == "harness":  # the embedded server's settings (no telemetry, batches)
        os.environ.update(server_env())
    else:  # the scale-out recipe's server (README "Scale-out"): Prefect's defaults
        os.environ.update(PREFECT_SERVER_ANALYTICS_ENABLED="false")

    rounds: dict[int, list[float]] = {n: [] for n in sizes}
    runs: dict[int, list[RoundRun]] = {n: [] for n in sizes}
    split: dict[int, list[tuple[float, float, float]]] = {n: [] for n in sizes}
    ends: dict[int, list[str]] = {n: [] for n in sizes}
    bares: dict[int, list[float]] = {n: [] for n in sizes}
    api_url: str | None = None
    critical: dict[int, list[float]] = {n: [] for n in sizes}
    floors: dict[int, list[float]] = {n: [] for n in sizes}
    costs: list[RoundCosts] = []
    try:
        fleet.load(_scenario(sizes), time_scale=args.time_scale)
        with _server(args.server, home, fleet) as server:
            from prefect.settings import get_current_settings

            api_url = get_current_settings().api.url
            at = datetime(2026, 11, 2, tzinfo=UTC)
            for n in sizes:  # warm-up: imports, block types, lingua's models
                asyncio.run(one_round(n, at - timedelta(days=1)))
                asyncio.run(bare(n, at - timedelta(days=1)))
                asyncio.run(prefect_floor())
            for i in range(args.repeats):
                for n in sizes:
                    settle()
                    run = asyncio.run(one_round(n, at + timedelta(minutes=30 * i)))
                    runs[n].append(run)
                    rounds[n].append(run.wall)
                    ends[n].append(run.end)
                    settle()
                    wall, slowest = asyncio.run(bare(n, at + timedelta(minutes=30 * i)))
                    bares[n].append(wall)
                    critical[n].append(slowest)
                    settle()
                    floors[n].append(asyncio.run(prefect_floor()))
            for n in sizes:
                split[n] = asyncio.run(phases(runs[n]))
            if args.profile is not None:
                for n in sizes:
                    later = at + timedelta(minutes=30 * args.repeats)
                    _profiled_round(n, later, args.profile / f"round-{n}.prof")
            for n in sizes:
                first = args.repeats + 1
                slots = [at + timedelta(minutes=30 * (first + j)) for j in range(args.cost_rounds)]
                costs.append(round_costs(n, slots, server, fleet))
    finally:
        stop_fleet(fleet)

    print(
        f"Prefect server: {args.server} ({api_url}), time_scale {args.time_scale}, {args.repeats} repeats "
        f"(medians), probe concurrency {max(sizes)}"
    )
    head = (
        f"{'endpoints':>9} {'round s':>8} {'critical s':>10} {'bare s':>7} "
        f"{'round/crit':>10} {'paired':>7} {'round/bare':>10} {'overhead s':>10} {'floor s':>8}"
    )
    print(head)
    overheads: list[float] = []
    for n in sizes:
        r, b, c, f = (statistics.median(x[n]) for x in (rounds, bares, critical, floors))
        overheads.append(r - b)
        paired = statistics.median(x / y for x, y in zip(rounds[n], critical[n], strict=True))
        print(
            f"{n:>9} {r:>8.2f} {c:>10.2f} {b:>7.2f} {r / c:>9.2f}x {paired:>6.2f}x {r / b:>9.2f}x "
            f"{r - b:>10.2f} {f:>8.2f}"
        )
    fit = _fit(sizes, overheads)
    if fit is not None:
        fixed, per = fit
        print(
            f"overhead = fixed + per endpoint x N: fixed {fixed:.2f} s, "
            f"per endpoint {per * 1000:.1f} ms"
        )
    print(
        "floor: a flow run with a clean round's task runs, doing nothing, on the same "
        "server: Prefect's own cost for the round's DAG"
    )
    for n in sizes:
        print(
            f"{n} endpoints, each run: round {' '.join(f'{x:.2f}' for x in rounds[n])} s, "
            f"critical {' '.join(f'{x:.2f}' for x in critical[n])} s"
        )
        if any(e != "Completed" for e in ends[n]):
            print(f"{n} endpoints: rounds ended {', '.join(ends[n])} (not all Completed)")
    print(
        "where a round's time goes (medians; the pinned-probes task run's times as the server "
        "recorded them): before = call to probes start (flow run start, round lock, state "
        "read, discovery), after = probes end to return (judging, locks, policy, apply, "
        "artifacts, final state); allowance = what the aim leaves over the critical path"
    )
    print(f"{'endpoints':>9} {'before s':>8} {'probes s':>8} {'after s':>8} {'allowance s':>11}")
    for n in sizes:
        if not split[n]:
            print(f"{n:>9} (no pinned-probes task run recorded)")
            continue
        before, probes, after = (statistics.median(x[k] for x in split[n]) for k in range(3))
        aim = AIMS.get(n)
        allowance = f"{(aim - 1) * statistics.median(critical[n]):>11.2f}" if aim else f"{'-':>11}"
        print(f"{n:>9} {before:>8.2f} {probes:>8.2f} {after:>8.2f} {allowance}")
    if args.profile is not None:
        print(f"profiles: {args.profile}/round-<N>.prof")
    if costs:
        print_costs(costs, args.server)


if __name__ == "__main__":
    main()
