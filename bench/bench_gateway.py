"""Gateway overhead: the same chat request sent to the fleet directly and through the gateway.

Starts its own fleet (`canary fleet serve`, a one-endpoint scenario with no scripted delay)
and its own gateway (`canary gateway serve --no-quarantine`, events on, into a temp ledger),
both as subprocesses on free loopback ports, then measures side by side in one run:
latency p50/p99 at 1 and 50 concurrent requests and requests per second.

    .venv/bin/python bench/bench_gateway.py [--requests 400] [--rounds 4] [--baseline DIR]

Each concurrency level runs in `--rounds` rounds that alternate the paths, so machine noise
hits every path alike. `--baseline DIR` also starts a second gateway from another checkout
(e.g. `git worktree add /tmp/base <commit>`) and reports it beside this one: the regression
check for a change on the hot path ("the same figures within noise").
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
MODEL = "bench/echo"
SCENARIO = {
    "name": "bench",
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
                    "timing": {"ttft_s": 0.0, "tokens_per_s": 1000000, "jitter": 0.0},
                }
            ],
        }
    ],
}
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
# A bare Starlette + httpx pass-through: the floor of a gateway built on that pair
# (no routing, no parsing, no validation) on the same uvicorn/h11 server.
BARE_PROXY = """
import sys, httpx, uvicorn
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route
upstream, key = sys.argv[1], sys.argv[2]
client = httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=200, max_keepalive_connections=200))
async def chat(request):
    r = await client.post(upstream + "/chat/completions", content=await request.body(),
                          headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    return Response(r.content, status_code=r.status_code, media_type=r.headers.get("content-type"))
app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", http="h11", loop="asyncio")
server = uvicorn.Server(config)
import asyncio
async def main():
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.02)
    print("bare proxy at http://127.0.0.1:%d/v1" % server.servers[0].sockets[0].getsockname()[1], flush=True)
    await task
asyncio.run(main())
"""

BODY = {
    "model": MODEL,
    "messages": [{"role": "user", "content": "Continue the scene: the lantern flickers."}],
    "max_tokens": 60,
}


def _start(
    cmd: list[str], env: dict[str, str], pattern: str, cwd: Path = ROOT
) -> tuple[subprocess.Popen[bytes], str]:
    log = tempfile.NamedTemporaryFile(prefix="bench-", suffix=".log", delete=False)  # noqa: SIM115
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        match = re.search(pattern, Path(log.name).read_text(errors="replace"))
        if match:
            return proc, match.group(1)
        if proc.poll() is not None:
            raise RuntimeError(Path(log.name).read_text())
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"did not start: {' '.join(cmd)}")


async def _run(
    url: str, headers: dict[str, str], body: dict, n: int, concurrency: int
) -> tuple[list[float], float]:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=30, limits=limits) as client:

        async def one() -> float:
            t0 = time.perf_counter()
            if body.get("stream"):
                async with client.stream("POST", url, json=body, headers=headers) as r:
                    async for _ in r.aiter_bytes():
                        pass
                    assert r.status_code == 200, r.status_code
            else:
                r = await client.post(url, json=body, headers=headers)
                assert r.status_code == 200, r.text[:300]
            return time.perf_counter() - t0

        for _ in range(20):  # warm-up: connections, caches
            await one()
        sem = asyncio.Semaphore(concurrency)

        async def bounded() -> float:
            async with sem:
                return await one()

        t0 = time.perf_counter()
        lat = await asyncio.gather(*(bounded() for _ in range(n)))
        return list(lat), time.perf_counter() - t0


def _pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=4, help="alternations of the paths")
    parser.add_argument("--baseline", type=Path, help="another checkout's gateway, side by side")
    args = parser.parse_args()
    if args.baseline is not None and not (args.baseline / "routing" / "gateway.py").exists():
        parser.error(f"--baseline {args.baseline}: not a provider-canary checkout")
    tmp = Path(tempfile.mkdtemp(prefix="bench-gateway-"))
    (tmp / "scenario.yaml").write_text(yaml.safe_dump(SCENARIO))
    contracts = tmp / "contracts"
    contracts.mkdir()
    (contracts / "schemas").mkdir()
    for src in (ROOT / "routing" / "contracts").glob("*.yaml"):
        if src.name != "routes.yaml":
            (contracts / src.name).write_text(src.read_text())
    for src in (ROOT / "routing" / "contracts" / "schemas").glob("*.json"):
        (contracts / "schemas" / src.name).write_text(src.read_text())
    (contracts / "routes.yaml").write_text(yaml.safe_dump(ROUTES))
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "CANARY_HOME": str(tmp)}
    py = sys.executable
    procs: list[subprocess.Popen[bytes]] = []
    try:
        fleet, fleet_url = _start(
            [py, "-m", "canary.cli", "fleet", "serve", "--scenario", str(tmp / "scenario.yaml"),
             "--port", "0"],
            env,
            r"at (http://[\d.:]+/api/v1)",
        )  # fmt: skip
        procs.append(fleet)
        key = os.environ.get("CANARY_FLEET_KEY", "fleet-local-key")
        genv = {
            **env,
            "CANARY_BASE_URL": fleet_url,
            "CANARY_API_KEY": key,
            "CANARY_GATEWAY__KEYS": "bench-key",
        }
        serve = ["-m", "canary.cli", "gateway", "serve", "--port", "0", "--contracts",
                 str(contracts), "--no-quarantine"]  # fmt: skip
        gateway, gw_url = _start([py, *serve], genv, r"at (http://[\d.:]+/v1)")
        procs.append(gateway)
        bare, bare_url = _start(
            [py, "-c", BARE_PROXY, fleet_url, key], env, r"at (http://[\d.:]+/v1)"
        )
        procs.append(bare)
        via_headers = {"Authorization": "Bearer bench-key", "X-Workload": "chat"}
        paths: list[tuple[str, str, dict[str, str], dict]] = [
            ("direct", f"{fleet_url}/chat/completions", {"Authorization": f"Bearer {key}"},
             {**BODY, "stream": True}),
            ("bare", f"{bare_url}/chat/completions", {}, {**BODY, "stream": True}),
            ("gateway", f"{gw_url}/chat/completions", via_headers, BODY),
        ]  # fmt: skip
        if args.baseline is not None:
            benv = {**genv, "PYTHONPATH": str(args.baseline.resolve())}
            base, base_url = _start(
                [py, *serve], benv, r"at (http://[\d.:]+/v1)", cwd=args.baseline
            )
            procs.append(base)
            paths.append(("baseline", f"{base_url}/chat/completions", via_headers, BODY))
        print(
            f"gateway overhead on this machine ({os.cpu_count()} CPUs; fleet, proxies and client share them)"
        )
        print("  direct   = client -> fleet (streamed, read to [DONE])")
        print(
            "  bare     = client -> bare Starlette+httpx pass-through -> fleet (the floor of a Starlette+httpx gateway)"
        )
        print(
            "  gateway  = client -> canary gateway (workload chat, non-stream) -> fleet (streamed upstream)"
        )
        if args.baseline is not None:
            print(f"  baseline = the same, the gateway of {args.baseline}")
        print(
            f"{'conc':>4} {'n':>5} {'path':>8} | {'p50':>8} {'p99':>9} {'req/s':>6} | {'added p50':>9} {'added p99':>9}"
        )
        for conc in (1, 50):
            n = args.requests if conc > 1 else max(100, args.requests // 2)
            per_round = max(conc, n // args.rounds)
            lat: dict[str, list[float]] = {name: [] for name, *_ in paths}
            busy: dict[str, float] = dict.fromkeys(lat, 0.0)
            for _ in range(args.rounds):
                for name, url, headers, body in paths:
                    got, wall = asyncio.run(_run(url, headers, body, per_round, conc))
                    lat[name] += got
                    busy[name] += wall
            dp50, dp99 = _pct(lat["direct"], 50), _pct(lat["direct"], 99)
            for name in lat:
                p50, p99 = _pct(lat[name], 50), _pct(lat[name], 99)
                rps = len(lat[name]) / busy[name]
                added = "" if name == "direct" else f"{p50 - dp50:>7.2f}ms {p99 - dp99:>7.2f}ms"
                print(
                    f"{conc:>4} {len(lat[name]):>5} {name:>8} | {p50:>6.2f}ms {p99:>7.2f}ms {rps:>6.0f} | {added}"
                )
            if "baseline" in lat:
                ratio = (_pct(lat["gateway"], 50) - dp50) / max(
                    1e-9, _pct(lat["baseline"], 50) - dp50
                )
                print(f"{conc:>4}       added p50 gateway/baseline = {ratio:.2f}x")
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    main()
