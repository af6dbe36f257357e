"""Head-to-head: the same load, in one run, against the fleet directly, a bare pass-through,
this gateway, and (where installed) LiteLLM's proxy and Portkey's gateway.

Every server is a subprocess of this script on a free loopback port (127.0.0.1 only); the
client is this process, speaking keep-alive HTTP/1.1 by hand (one connection per simulated
client; far cheaper than httpx, so the servers get the cores). For each path it reports:

    c1      non-streaming, one client: p50/p99 and what the path adds to the direct p50/p99
    c32     non-streaming, 32 clients: req/s, p50/p99, CPU-ms per request of the server's
            process tree (utime+stime from /proc), peak RSS of that tree while under load
            (this gateway's stated bound: 150 MB, `--rss-bound-mb`)
    stream  streaming, one client: time to the first content delta (TTFT) and what the path
            adds to it, twice: `instant` (first token after 20 ms, the whole reply at once:
            the path's processing) and `paced` (first token after 20 ms, then 100 tokens/s,
            which the fleet writes in 50 ms batches: adds what a path holds back before
            releasing the first token; this gateway holds a stream until its start check has
            decided the start, at its first word when it can, else at 24 characters: its
            response-start check)

then the same figures as ratios: each path to the direct path, and this gateway to each peer.
Rounds alternate between paths (direct, bare, gateway, peers, direct, ...), so machine noise
hits all alike. Peers are optional: a missing one is skipped with a line saying how to
install it. Nothing is installed into the project's venv:

    LiteLLM (its own venv, any Python >= 3.10):
        python3.12 -m venv ~/.cache/provider-canary/litellm
        ~/.cache/provider-canary/litellm/bin/pip install 'litellm[proxy]'
      (or LITELLM_BIN=/path/to/litellm, or `litellm` on PATH)
    Portkey (Node >= 18), with @hono/node-server pinned: from 1.14.1 on it hands Portkey
    fetch's immutable response headers and every streamed reply fails (500, "TypeError:
    immutable" in its log):
        mkdir -p ~/.cache/provider-canary/portkey && cd ~/.cache/provider-canary/portkey
        echo '{"dependencies": {"@portkey-ai/gateway": "1.15.2"},
               "overrides": {"@hono/node-server": "1.14.0"}}' > package.json && npm install
      (or PORTKEY_GATEWAY_JS=/path/to/@portkey-ai/gateway/build/start-server.js)
    levers of this gateway's hot path (`--levers`): the same gateway with one lever of issue 26
    taken back each: `gw-no-events` (no ledger events), `gw-h11-asyncio` (uvicorn's h11 parser
    on asyncio's loop instead of httptools on uvloop), `gw-starlette` (the chat endpoint behind
    Starlette's middleware and router instead of the plain ASGI one), `gw-two-sends` (a reply's
    head and body in two sends instead of one), `gw-outcomes-now` (an answer's verdict,
    metrics and events before its reply instead of after it has left)

    .venv/bin/python bench/bench_peers.py [--requests 600] [--repeats 2] [--levers]
                                          [--no-peers] [--baseline DIR]

`--baseline DIR` also runs the gateway of another checkout (`git worktree add /tmp/base
<commit>`) beside this one: the check that a change on the hot path costs nothing.

The peers get the fleet as an OpenAI-compatible upstream: LiteLLM a `model_list` entry
`openai/bench/echo` with `api_base` = the fleet, Portkey `x-portkey-provider: openai` with
`x-portkey-custom-host` = the fleet. This gateway runs as `canary gateway serve
--no-quarantine` (workload `chat`, events on into a temporary ledger), as in production
minus the Prefect read of provider.ignore. All of them, the fleet and the client share the
machine's cores: compare the columns, not the absolute numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import re
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("CANARY_PEERS_DIR", "~/.cache/provider-canary")).expanduser()
MODEL = "bench/echo"
FLEET_KEY = "fleet-local-key"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def scenario(ttft_s: float, tokens_per_s: float) -> dict[str, Any]:
    return {
        "name": "bench-peers",
        "seed": 1,
        "time_scale": 1.0,
        "models": [
            {
                "id": MODEL,
                "context_length": 32768,
                "endpoints": [
                    {
                        "tag": "echo-a",
                        "provider_name": "EchoA",
                        "timing": {"ttft_s": ttft_s, "tokens_per_s": tokens_per_s, "jitter": 0.0},
                    }
                ],
            }
        ],
    }


INSTANT = scenario(0.0, 1_000_000)
FIRST_AT_20MS = scenario(0.02, 1_000_000)
PACED = scenario(0.02, 100)
ROUTES = {
    "version": 1,
    "routes": [
        {
            "id": "echo",
            "model": MODEL,
            "context_length": 32768,
            "tools": True,
            "schema_modes": ["json_schema"],
            "latency_p50_ms": 10,
        }
    ],
    "groups": {g: ["echo"] for g in ("text", "schema", "tools", "vision", "long_context")},
}
BODY: dict[str, Any] = {
    "model": MODEL,
    "messages": [{"role": "user", "content": "Continue the scene: the lantern flickers."}],
    "max_tokens": 60,
}
STREAM_BODY: dict[str, Any] = {**BODY, "max_tokens": 16, "stream": True}

# A bare pass-through on Starlette + httpx, no routing, no parsing: the floor of a gateway
# built on that pair (this gateway reads its upstream with aiohttp and can go below it).
BARE_PROXY = """
import asyncio, sys, httpx, uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.responses import StreamingResponse
from starlette.routing import Route
upstream, key = sys.argv[1], sys.argv[2]
client = httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=200, max_keepalive_connections=200))
async def chat(request):
    req = client.build_request("POST", upstream + "/chat/completions", content=await request.body(),
                               headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    r = await client.send(req, stream=True)
    return StreamingResponse(r.aiter_raw(), status_code=r.status_code,
                             media_type=r.headers.get("content-type"), background=BackgroundTask(r.aclose))
app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", http="h11", loop="asyncio"))
async def main():
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.02)
    print("bare proxy at http://127.0.0.1:%d/v1" % server.servers[0].sockets[0].getsockname()[1], flush=True)
    await task
asyncio.run(main())
"""

# This gateway with one hot-path lever of issue 26 taken back (--levers): argv[1] names it.
LEVER_LAUNCHER = """
import asyncio, sys
import routing.gateway as gateway, routing.serving as serving
lever = sys.argv[1]
if lever == "h11-asyncio":
    from uvicorn.protocols.http.h11_impl import H11Protocol
    serving.run_serving = asyncio.run
    serving.header_timeout_protocol = lambda seconds: H11Protocol
elif lever == "starlette":
    _create = gateway.create_app
    gateway.create_app = lambda router, config: _create(router, config).starlette
elif lever == "two-sends":
    serving.CoalescingTransport = lambda transport, loop: transport
elif lever == "outcomes-now":
    import routing.router as router
    _admit = router.Router.admit
    router.Router.admit = lambda self, *a, after_reply=False, **k: _admit(self, *a, **k)
sys.argv = ["canary", *sys.argv[2:]]
from canary.cli import main
main()
"""


# ---------------------------------------------------------------- processes and /proc


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def tree(pid: int) -> list[int]:
    """`pid` and its live descendants."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def cpu_s(pids: list[int]) -> float:
    total = 0
    for p in pids:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / CLK_TCK


def rss_mb(pids: list[int]) -> float:
    total_kb = 0
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kb += int(line.split()[1])
        except OSError:
            continue
    return total_kb / 1024


@dataclass
class Server:
    name: str
    url: str  # .../chat/completions
    headers: dict[str, str]
    proc: subprocess.Popen[bytes] | None  # None: the fleet itself is the direct path
    log: Path | None = None
    results: dict[str, Any] = field(default_factory=dict)


def start(
    cmd: list[str],
    env: dict[str, str],
    *,
    pattern: str | None = None,
    ready_url: str | None = None,
    cwd: Path = ROOT,
    timeout_s: float = 120.0,
) -> tuple[subprocess.Popen[bytes], str, Path]:
    """Start `cmd`; wait for `pattern` in its output (returns group 1) or `ready_url` to answer."""
    log = Path(tempfile.mkstemp(prefix="bench-peers-", suffix=".log")[1])
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{cmd[0]} exited {proc.returncode}:\n{log.read_text()[-2000:]}")
        if pattern:
            match = re.search(pattern, log.read_text(errors="replace"))
            if match:
                return proc, match.group(1), log
        elif ready_url:
            try:
                if httpx.get(ready_url, timeout=1.0).status_code < 500:
                    return proc, ready_url, log
            except httpx.HTTPError:
                pass
        time.sleep(0.1)
    stop(proc)
    raise RuntimeError(f"did not start within {timeout_s:.0f} s: {' '.join(cmd)}; see {log}")


def start_fleet(scenario: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    """The fleet serving `scenario` on a free loopback port: its process and API base URL."""
    cmd = [sys.executable, "-m", "canary.cli", "fleet", "serve", "--scenario", str(scenario),
           "--port", "0"]  # fmt: skip
    proc, api, _ = start(cmd, env, pattern=r"at (http://[\d.:]+/api/v1)")
    return proc, api


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop the process group this script started (the server and anything it forked)."""
    try:
        os.killpg(proc.pid, 15)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait()


def find_litellm() -> str | None:
    for candidate in (os.environ.get("LITELLM_BIN"), str(CACHE / "litellm" / "bin" / "litellm")):
        if candidate and Path(candidate).is_file():
            return candidate
    return shutil.which("litellm")


def find_portkey() -> str | None:
    js = os.environ.get("PORTKEY_GATEWAY_JS") or str(
        CACHE / "portkey" / "node_modules" / "@portkey-ai" / "gateway" / "build" / "start-server.js"
    )
    return js if Path(js).is_file() and shutil.which("node") else None


# ---------------------------------------------------------------- load


class Conn:
    """One keep-alive HTTP/1.1 connection, spoken by hand: the client costs a fraction of the
    CPU httpx would, so the servers under test get the cores (they all share two)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, raw: bytes, stream: bool) -> tuple[int, bytes, float | None]:
        """(status, body, seconds to the first content delta of a stream)."""
        if self.reader is None or self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        reader = self.reader
        t0 = time.perf_counter()
        self.writer.write(raw)
        head = (await reader.readuntil(b"\r\n\r\n")).lower()
        status = int(head[9:12])
        body = bytearray()
        first: float | None = None
        pending = b""

        def feed(data: bytes) -> None:
            nonlocal first, pending
            body.extend(data)
            if not stream or first is not None:
                return
            lines = (pending + data).split(b"\n")
            pending = lines.pop()
            for line in lines:
                if line.startswith(b"data: {"):
                    choices = json.loads(line[6:]).get("choices") or [{}]
                    if (choices[0].get("delta") or {}).get("content"):
                        first = time.perf_counter() - t0
                        return

        if b"transfer-encoding: chunked" in head:
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    await reader.readuntil(b"\r\n")
                    break
                feed((await reader.readexactly(size + 2))[:-2])
        elif match := re.search(rb"content-length: *(\d+)", head):
            feed(await reader.readexactly(int(match.group(1))))
        else:  # no length: the body ends with the connection
            feed(await reader.read())
            head += b"connection: close"
        if b"connection: close" in head:
            await self.close()
        return status, bytes(body), first

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(OSError):
                await self.writer.wait_closed()
        self.reader = self.writer = None


def _raw_request(server: Server, body: dict[str, Any]) -> tuple[str, int, bytes]:
    url = urlsplit(server.url)
    payload = json.dumps(body).encode()
    lines = [
        f"POST {url.path} HTTP/1.1",
        f"Host: {url.netloc}",
        "Content-Type: application/json",
        f"Content-Length: {len(payload)}",
        *(f"{k}: {v}" for k, v in server.headers.items()),
    ]
    return (
        url.hostname or "127.0.0.1",
        url.port or 80,
        "\r\n".join(lines).encode() + (b"\r\n\r\n" + payload),
    )


async def _load(
    server: Server, body: dict[str, Any], n: int, concurrency: int, warmup: int
) -> tuple[list[float], list[float], float]:
    """(latencies s, TTFTs s for streams, req/s) of `n` requests from `concurrency` clients,
    each on its own keep-alive connection, after `warmup` requests per connection."""
    host, port, raw = _raw_request(server, body)
    stream = bool(body.get("stream"))
    conns = [Conn(host, port) for _ in range(concurrency)]
    lat: list[float] = []
    ttfts: list[float] = []

    async def one(conn: Conn, record: bool) -> None:
        t0 = time.perf_counter()
        status, data, first = await asyncio.wait_for(conn.request(raw, stream), 60)
        elapsed = time.perf_counter() - t0
        assert status == 200, (server.name, status, data[:300])
        if stream:
            assert first is not None, f"{server.name}: no content delta"
        else:
            assert json.loads(data)["choices"][0]["message"]["content"], server.name
        if record:
            lat.append(elapsed)
            if first is not None:
                ttfts.append(first)

    left = n

    async def client(conn: Conn) -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await one(conn, True)

    try:
        for conn in conns:
            for _ in range(max(1, warmup // concurrency)):
                await one(conn, False)
        t0 = time.perf_counter()
        await asyncio.gather(*(client(c) for c in conns))
        return lat, ttfts, n / (time.perf_counter() - t0)
    finally:
        for conn in conns:
            await conn.close()


async def _sampled(server: Server, work: Callable[[], Any]) -> tuple[Any, float, float]:
    """Run `work` while sampling the server tree's RSS; returns (result, cpu s, peak RSS MB)."""
    if server.proc is None:
        return await work(), float("nan"), float("nan")
    pids = tree(server.proc.pid)
    cpu0 = cpu_s(pids)
    peak = rss_mb(pids)
    task = asyncio.ensure_future(work())
    while not task.done():
        await asyncio.sleep(0.1)
        peak = max(peak, rss_mb(tree(server.proc.pid)))
    return task.result(), cpu_s(tree(server.proc.pid)) - cpu0, peak


def measure(servers: list[Server], fleet_root: str, args: argparse.Namespace) -> None:
    for r in range(args.repeats):
        httpx.post(f"{fleet_root}/_fleet/scenario", json={"scenario": INSTANT}).raise_for_status()
        for s in servers:
            lat, _, _ = asyncio.run(_load(s, BODY, args.requests // 3, 1, warmup=20))
            s.results.setdefault("c1", []).extend(lat)
        for s in servers:
            n = args.requests
            (lat, _, rps), cpu, peak = asyncio.run(
                _sampled(s, functools.partial(_load, s, BODY, n, 32, warmup=32))
            )
            s.results.setdefault("c32", []).extend(lat)
            s.results.setdefault("rps32", []).append(rps)
            s.results.setdefault("cpu", []).append(cpu)
            s.results.setdefault("n32", []).append(n)
            s.results["rss"] = max(s.results.get("rss", 0.0), peak)
        for key, scen in (("ttft0", FIRST_AT_20MS), ("ttft", PACED)):
            httpx.post(f"{fleet_root}/_fleet/scenario", json={"scenario": scen}).raise_for_status()
            for s in servers:
                _, ttft, _ = asyncio.run(_load(s, STREAM_BODY, args.requests // 30, 1, warmup=3))
                s.results.setdefault(key, []).extend(ttft)
        print(f"  round {r + 1}/{args.repeats} done", flush=True)


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] * 1000


def report(servers: list[Server], args: argparse.Namespace) -> None:
    d = servers[0].results
    d50, d99, dt50 = pct(d["c1"], 50), pct(d["c1"], 99), pct(d["ttft"], 50)
    dz50 = pct(d["ttft0"], 50)
    drps = statistics.median(d["rps32"])
    rows: dict[str, dict[str, float]] = {}
    for s in servers:
        r = s.results
        rows[s.name] = {
            "p50": pct(r["c1"], 50),
            "p99": pct(r["c1"], 99),
            "add50": pct(r["c1"], 50) - d50,
            "add99": pct(r["c1"], 99) - d99,
            "rps1": 1 / statistics.mean(r["c1"]),
            "rps32": statistics.median(r["rps32"]),
            "p50_32": pct(r["c32"], 50),
            "p99_32": pct(r["c32"], 99),
            "cpu": sum(r["cpu"]) * 1000 / sum(r["n32"]),
            "rss": r["rss"],
            "ttft0": pct(r["ttft0"], 50),
            "addttft0": pct(r["ttft0"], 50) - dz50,
            "ttft": pct(r["ttft"], 50),
            "addttft": pct(r["ttft"], 50) - dt50,
        }
    n1, n32, ns = args.requests // 3, args.requests, args.requests // 30
    print(
        f"\n{os.cpu_count()} CPUs shared by the fleet, every server and the client; "
        f"{args.repeats} rounds x (c1 {n1}, c32 {n32}, 2 x stream {ns}) requests per path"
    )
    print(
        f"{'path':<16}| {'c1 p50':>7} {'p99':>7} {'+p50':>7} {'+p99':>7} {'req/s':>6} |"
        f" {'c32 req/s':>9} {'p50':>7} {'p99':>7} {'CPU-ms/req':>10} {'RSS MB':>7} |"
        f" {'instant':>7} {'+TTFT':>6} {'paced':>7} {'+TTFT':>6}"
    )
    for name, x in rows.items():
        direct = name == "direct"
        add = f"{'':>7} {'':>7}" if direct else f"{x['add50']:>7.2f} {x['add99']:>7.2f}"  # ms added
        cpu = f"{'(fleet)':>10} {'':>7}" if direct else f"{x['cpu']:>10.2f} {x['rss']:>7.0f}"
        addt0 = f"{'':>6}" if direct else f"{x['addttft0']:>6.1f}"
        addt = f"{'':>6}" if direct else f"{x['addttft']:>6.1f}"
        print(
            f"{name:<16}| {x['p50']:>7.2f} {x['p99']:>7.2f} {add} {x['rps1']:>6.0f} |"
            f" {x['rps32']:>9.0f} {x['p50_32']:>7.2f} {x['p99_32']:>7.2f} {cpu} |"
            f" {x['ttft0']:>7.1f} {addt0} {x['ttft']:>7.1f} {addt}"
        )
    print("(ms; + = added to the direct path's figure; TTFT columns are p50s of streams)")
    print("\nratios to the direct path (latency: path/direct; throughput: path/direct)")
    print(f"{'path':<16}| {'c1 p50':>7} {'c1 p99':>7} {'c32 req/s':>9} {'TTFT':>7} {'paced':>7}")
    for name, x in rows.items():
        if name == "direct":
            continue
        print(
            f"{name:<16}| {x['p50'] / d50:>7.2f} {x['p99'] / d99:>7.2f}"
            f" {x['rps32'] / drps:>9.2f} {x['ttft0'] / dz50:>7.2f} {x['ttft'] / dt50:>7.2f}"
        )
    ours = [n for n in rows if n.startswith(("gateway", "gw-"))]
    peers = [n for n in rows if n not in ("direct", *ours)]
    if peers:
        print("\nthis gateway / each other path (added p50, p99, CPU-ms/req, added TTFT instant:")
        print("below 1 = this gateway costs less; c32 req/s: above 1 = this gateway serves more)")
        print(
            f"{'gateway vs':<28}| {'+p50':>6} {'+p99':>6} {'CPU-ms':>6} {'req/s':>6} {'+TTFT':>6}"
            f" {'paced':>6}"
        )
        for g in ours:
            for p in peers:
                a, b = rows[g], rows[p]
                print(
                    f"{g + ' / ' + p:<28}| {_ratio(a['add50'], b['add50']):>6}"
                    f" {_ratio(a['add99'], b['add99']):>6} {_ratio(a['cpu'], b['cpu']):>6}"
                    f" {_ratio(a['rps32'], b['rps32']):>6} {_ratio(a['addttft0'], b['addttft0']):>6}"
                    f" {_ratio(a['addttft'], b['addttft']):>6}"
                )
    gw = rows.get("gateway")
    if gw:
        bound = args.rss_bound_mb
        verdict = "within" if gw["rss"] <= bound else "OVER"
        print(
            f"\ngateway RSS under 32 clients: {gw['rss']:.0f} MB peak ({verdict} the stated bound "
            f"of {bound:.0f} MB)"
        )


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b > 0.05 else "n/a"


# ---------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=600, help="per path at 32 clients")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--levers", action="store_true", help="also the gateway with each hot-path lever undone"
    )
    parser.add_argument("--no-peers", action="store_true", help="skip LiteLLM and Portkey")
    parser.add_argument("--rss-bound-mb", type=float, default=150.0)
    parser.add_argument(
        "--baseline", type=Path, help="also this gateway from another checkout (regression check)"
    )
    args = parser.parse_args()
    if args.baseline is not None and not (args.baseline / "routing" / "gateway.py").exists():
        parser.error(f"--baseline {args.baseline}: not a provider-canary checkout")

    tmp = Path(tempfile.mkdtemp(prefix="bench-peers-"))
    (tmp / "scenario.yaml").write_text(yaml.safe_dump(INSTANT))
    contracts = tmp / "contracts"
    (contracts / "schemas").mkdir(parents=True)
    for src in (ROOT / "routing" / "contracts").glob("*.yaml"):
        if src.name != "routes.yaml":
            (contracts / src.name).write_text(src.read_text())
    for src in (ROOT / "routing" / "contracts" / "schemas").glob("*.json"):
        (contracts / "schemas" / src.name).write_text(src.read_text())
    (contracts / "routes.yaml").write_text(yaml.safe_dump(ROUTES))
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "CANARY_HOME": str(tmp)}
    py = sys.executable
    procs: list[subprocess.Popen[bytes]] = []
    servers: list[Server] = []
    try:
        fleet, fleet_api = start_fleet(tmp / "scenario.yaml", env)
        procs.append(fleet)
        fleet_root = fleet_api.removesuffix("/api/v1")
        fleet_auth = {"Authorization": f"Bearer {FLEET_KEY}"}
        servers.append(Server("direct", f"{fleet_api}/chat/completions", fleet_auth, None))

        bare, bare_url, log = start(
            [py, "-c", BARE_PROXY, fleet_api, FLEET_KEY], env, pattern=r"at (http://[\d.:]+/v1)"
        )
        procs.append(bare)
        servers.append(Server("bare", f"{bare_url}/chat/completions", {}, bare, log))

        genv = {
            **env,
            "CANARY_BASE_URL": fleet_api,
            "CANARY_API_KEY": FLEET_KEY,
            "CANARY_GATEWAY__KEYS": "bench-key",
        }
        gw_args = ["gateway", "serve", "--port", "0", "--contracts", str(contracts),
                   "--no-quarantine"]  # fmt: skip
        gw_headers = {"Authorization": "Bearer bench-key", "X-Workload": "chat"}
        gw, gw_url, log = start(
            [py, "-m", "canary.cli", *gw_args], genv, pattern=r"at (http://[\d.:]+/v1)"
        )
        procs.append(gw)
        servers.append(Server("gateway", f"{gw_url}/chat/completions", gw_headers, gw, log))

        if args.baseline is not None:  # the same gateway, from another checkout
            benv = {**genv, "PYTHONPATH": str(args.baseline.resolve())}
            if "class GatewayConfig" not in (args.baseline / "ground" / "settings.py").read_text():
                # a checkout from before the nested gateway settings reads the flat name
                benv["CANARY_GATEWAY_KEYS"] = benv.pop("CANARY_GATEWAY__KEYS")
            p, url, log = start(
                [py, "-m", "canary.cli", *gw_args], benv, pattern=r"at (http://[\d.:]+/v1)",
                cwd=args.baseline,
            )  # fmt: skip
            procs.append(p)
            servers.append(Server("baseline", f"{url}/chat/completions", gw_headers, p, log))

        if args.levers:  # each hot-path lever of issue 26 taken back, one at a time
            for name, launch in (
                ("gw-no-events", [py, "-m", "canary.cli", *gw_args, "--no-events"]),
                ("gw-h11-asyncio", [py, "-c", LEVER_LAUNCHER, "h11-asyncio", *gw_args]),
                ("gw-starlette", [py, "-c", LEVER_LAUNCHER, "starlette", *gw_args]),
                ("gw-two-sends", [py, "-c", LEVER_LAUNCHER, "two-sends", *gw_args]),
                ("gw-outcomes-now", [py, "-c", LEVER_LAUNCHER, "outcomes-now", *gw_args]),
            ):
                p, url, log = start(launch, genv, pattern=r"at (http://[\d.:]+/v1)")
                procs.append(p)
                servers.append(Server(name, f"{url}/chat/completions", gw_headers, p, log))

        litellm = None if args.no_peers else find_litellm()
        if litellm is None:
            print("skipped LiteLLM: not installed (see this file's docstring)")
        else:
            port = free_port()
            master_key = "sk-" + secrets.token_hex(32)  # as our gateway's, a client key
            config = {
                "model_list": [
                    {
                        "model_name": MODEL,
                        "litellm_params": {
                            "model": f"openai/{MODEL}",
                            "api_base": fleet_api,
                            "api_key": FLEET_KEY,
                        },
                    }
                ],
                "litellm_settings": {"telemetry": False, "drop_params": True},
                "general_settings": {"master_key": master_key},
            }
            (tmp / "litellm.yaml").write_text(yaml.safe_dump(config))
            lenv = {k: v for k, v in env.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
            lenv.update(LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_LOG="ERROR",
                        LITELLM_TELEMETRY="False", PYTHONUNBUFFERED="1")  # fmt: skip
            p, _, log = start(
                [litellm, "--config", str(tmp / "litellm.yaml"), "--host", "127.0.0.1",
                 "--port", str(port), "--num_workers", "1"],
                lenv, ready_url=f"http://127.0.0.1:{port}/health/liveliness", cwd=tmp,
            )  # fmt: skip
            procs.append(p)
            servers.append(
                Server(
                    "litellm",
                    f"http://127.0.0.1:{port}/v1/chat/completions",
                    {"Authorization": f"Bearer {master_key}"},
                    p,
                    log,
                )
            )

        portkey = None if args.no_peers else find_portkey()
        if portkey is None:
            print("skipped Portkey: not installed (see this file's docstring)")
        else:
            port = free_port()
            p, _, log = start(
                ["node", portkey, f"--port={port}", "--headless"],
                {**env, "NODE_ENV": "production"},
                ready_url=f"http://127.0.0.1:{port}/",
                cwd=tmp,
            )
            procs.append(p)
            headers = {
                "Authorization": f"Bearer {FLEET_KEY}",
                "x-portkey-provider": "openai",
                "x-portkey-custom-host": fleet_api,
            }
            servers.append(
                Server("portkey", f"http://127.0.0.1:{port}/v1/chat/completions", headers, p, log)
            )

        print("paths: " + ", ".join(s.name for s in servers), flush=True)
        measure(servers, fleet_root, args)
        report(servers, args)
    finally:
        for proc in reversed(procs):
            stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
