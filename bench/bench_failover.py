"""Failover: what a gateway user sees when a provider fails, in seventeen cases (issue 32).

Each case is one streamed chat request, read by the OpenAI SDK (`create(stream=True,
stream_options={"include_usage": True})`), to this gateway in front of the fleet: the case's
workload has two routes, a primary whose fleet endpoint has the case's fault (every request)
and a healthy fallback with a larger context that takes an assistant prefill (`prefill:
true`; one case: its endpoint refuses the prefill). Every case has its own workload, routes
and fleet models, so one case's failures (breakers, measured latency) never steer another.

Each outcome is classified from what the client read (and the fleet's request log, which
says how each upstream attempt really ended and what a continuation sent):

    complete    the whole answer (finish reason, the text of an attempt the fleet ended
                cleanly), from one attempt of the released stream
    continued   the whole answer, served by more than one attempt after release (R15): the
                text the client read is exactly the cut attempt's text plus what the
                continuation sent, once
    note        complete, with something a user notices: no usage though asked, no
                `[DONE]`, more than one response id, first token after `--slow-s`
    clean       a typed error: an HTTP error, or an in-band error chunk the SDK raises (text
                already read is marked failed, never passed as whole)
    broken      the stream broke without an error the client can read (a transport error)
    WRONG       truncated or garbled text returned as success (no finish reason, or the
                attempt that served it did not end cleanly at the fleet, or the stitched
                text is not the cut text plus its continuation)

This gateway runs as `canary gateway serve --no-quarantine` with its defaults (stall cut
after `routing.stall_timeout_s`, `routing.max_malformed_events`); the fleet is a subprocess
too, both on free loopback ports (bench/bench_peers.py's `start`/`stop`). Prints a row per
case (class, what the client read, first-token and total seconds) and the totals; exits 1
when a case of this gateway is WRONG or (with `--strict`) not the class it is expected to be.

    .venv/bin/python bench/bench_failover.py [--quick] [--strict] [--json OUT] [--only NAME]

`--quick`: the stall cut at 0.5 s and the slow first token at 3 s (tests/bench runs it so).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_peers import start, start_fleet, stop

FLEET_KEY = "fleet-local-key"
GW_KEY = "bench-failover-key"
ASK = [
    {"role": "user", "content": "Continue the scene: the lantern flickers as Mara opens the door."}
]
TIMING = {"ttft_s": 0.05, "tokens_per_s": 100.0, "jitter": 0.0}  # released long before a cut

CLASSES = ("complete", "continued", "note", "clean", "broken", "WRONG")


@dataclass(frozen=True)
class Case:
    name: str  # also the workload; its routes are `<name>-p` and `<name>-f`
    label: str
    faults: tuple[dict[str, Any], ...] = ()  # the primary endpoint's
    defects: tuple[dict[str, Any], ...] = ()
    fallback_prefill: str = "continue"  # the fallback endpoint's prefill mode
    expect: str = "complete"  # this gateway's class
    contract: tuple[tuple[str, Any], ...] = ()  # contract fields over the defaults


def cases(quick: bool) -> list[Case]:
    stall_s, slow_s, retry_s = (3.0, 3.0, 0.5) if quick else (30.0, 12.0, 2.0)

    def fault(kind: str, **kw: Any) -> tuple[dict[str, Any], ...]:
        return ({"kind": kind, "rate": 1.0, **kw},)

    cut = fault("stream_cut", after_chunks=24)
    policy = fault("openai_error", status=400, code="content_policy_violation",
                   message="Flagged by the provider's safety system: violence.")  # fmt: skip
    return [
        Case("healthy", "healthy control"),
        Case(
            "rate_limited",
            "429 with Retry-After",
            fault("http_error", status=429, retry_after_s=retry_s),
        ),
        Case("http_500", "500", fault("http_error", status=500)),
        Case("http_502", "502", fault("http_error", status=502)),
        Case("reset", "connection reset before headers", fault("reset")),
        Case(
            "slow_first",
            f"first token after {slow_s:.0f} s",
            fault("slow_first_token", ttft_s=slow_s),
        ),
        Case("stray_start", "stray start", defects=({"kind": "stray_start", "rate": 1.0},)),
        Case("cut", "cut after release", cut, expect="continued"),
        Case(
            "stall",
            "stall after release",
            fault("stall", after_chunks=24, stall_s=stall_s),
            expect="continued",
        ),
        Case(
            "garbage",
            "garbage after release",
            fault("malformed_event", count=50),
            expect="continued",
        ),
        Case("one_malformed", "one malformed event", fault("malformed_event", count=1)),
        Case("no_done", "complete without [DONE]", fault("no_done")),
        Case(
            "context_length",
            "context_length_exceeded in error.code",
            fault(
                "openai_error",
                status=400,
                code="context_length_exceeded",
                message="This model's maximum context length is 8192 tokens.",
            ),
        ),
        Case("content_policy", "content-policy refusal", policy),
        Case(
            "policy_stop",
            "the same, on_refusal: stop",
            policy,
            expect="clean",
            contract=(("on_refusal", "stop"),),
        ),
        Case(
            "midstream_error",
            "in-band error mid-stream",
            fault("midstream_error", after_fraction=0.5),
            expect="clean",
        ),
        Case(
            "prefill_rejected",
            "cut; the fallback rejects prefill",
            cut,
            fallback_prefill="reject",
            expect="clean",
        ),
    ]


# ---------------------------------------------------------------- the fleet and the contracts


def fleet_scenario(table: list[Case]) -> dict[str, Any]:
    models = []
    for c in table:
        for role, ctx in (("p", 8192), ("f", 131072)):
            ep: dict[str, Any] = {"tag": f"{role}-a", "provider_name": f"{c.name}-{role}".title(),
                                  "timing": TIMING}  # fmt: skip
            if role == "p":
                ep.update(faults=list(c.faults), defects=list(c.defects))
            else:
                ep["prefill"] = c.fallback_prefill
            models.append(
                {"id": f"bench/{c.name}-{role}", "context_length": ctx, "endpoints": [ep]}
            )
    return {"name": "bench-failover", "seed": 1, "time_scale": 1.0, "models": models}


def write_contracts(table: list[Case], directory: Path) -> None:
    (directory / "schemas").mkdir(parents=True)
    routes: list[dict[str, Any]] = []
    for c in table:
        for role, ctx, p50 in (("p", 8192, 100), ("f", 131072, 200)):
            routes.append({
                "id": f"{c.name.replace('_', '-')}-{role}", "model": f"bench/{c.name}-{role}",
                "context_length": ctx, "latency_p50_ms": p50, "model_class": "general",
                "pricing": {"prompt": 1e-7, "completion": 4e-7}, "prefill": role == "f",
            })  # fmt: skip
        contract = {
            "workload": c.name, "version": 1, "description": c.label, "modalities": ["text"],
            "max_input_tokens": 200000, "allowed_model_classes": ["general"],
            "route_groups": [c.name], "max_cost_usd": 0.05, "deadline_ms": 30000,
            "streaming": True, "locale": "en", "ambiguous_policy": "replay",
            "constraints": {"complete_output_required": False}, **dict(c.contract),
        }  # fmt: skip
        (directory / f"{c.name}.yaml").write_text(yaml.safe_dump(contract))
    groups = {c.name: [f"{c.name.replace('_', '-')}-{r}" for r in "pf"] for c in table}
    (directory / "routes.yaml").write_text(
        yaml.safe_dump({"version": 1, "routes": routes, "groups": groups})
    )


# ---------------------------------------------------------------- one request, as a client reads it


@dataclass
class Outcome:
    kind: str = "ended"  # ended | http_error | inband_error | broken
    error: str = ""
    text: str = ""
    finish: str | None = None
    ids: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)  # who served: `model`, or `served_models`
    usage: bool = False
    done: bool = False  # the raw stream ended with `data: [DONE]`
    ttft_s: float | None = None
    total_s: float = 0.0
    integrity: str = ""  # what the fleet's log contradicts, empty when nothing


class _Tee(httpx.BaseTransport):
    """The SDK's transport, keeping a copy of the raw bytes it read (to see `[DONE]`)."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.raw = bytearray()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        raw, inner = self.raw, response.stream

        class Copy(httpx.SyncByteStream):
            def __iter__(self) -> Any:
                for part in inner:  # type: ignore[union-attr]
                    raw.extend(part)
                    yield part

            def close(self) -> None:
                inner.close()  # type: ignore[union-attr]

        return httpx.Response(response.status_code, headers=response.headers, stream=Copy(),
                              extensions=response.extensions)  # fmt: skip

    def close(self) -> None:
        self.inner.close()


def read_stream(gw_url: str, workload: str) -> Outcome:
    tee = _Tee()
    client = openai.OpenAI(base_url=gw_url, api_key=GW_KEY, max_retries=0, timeout=60.0,
                           http_client=httpx.Client(transport=tee))  # fmt: skip
    out = Outcome()
    parts: list[str] = []
    t0 = time.perf_counter()
    try:
        stream = client.chat.completions.create(
            model=workload, messages=ASK, stream=True,  # type: ignore[arg-type]
            stream_options={"include_usage": True},
        )  # fmt: skip
        for chunk in stream:
            out.ids.append(chunk.id)
            served = (chunk.model_extra or {}).get("served_models")
            out.models = list(served) if served else [chunk.model]
            out.usage = out.usage or chunk.usage is not None
            for choice in chunk.choices:
                if choice.delta.content:
                    out.ttft_s = out.ttft_s or time.perf_counter() - t0
                    parts.append(choice.delta.content)
                out.finish = choice.finish_reason or out.finish
    except openai.APIStatusError as exc:
        out.kind, out.error = "http_error", f"HTTP {exc.status_code}: {_message(exc.body)}"
    except openai.APIError as exc:  # the SDK raises an in-band error chunk as this
        out.kind, out.error = "inband_error", f"in-band: {_message(exc.body) or exc.message}"
    except Exception as exc:
        out.kind, out.error = "broken", f"{type(exc).__name__}: {exc}"
    finally:
        client.close()
    out.total_s = time.perf_counter() - t0
    out.text = "".join(parts)
    out.ids = sorted(set(out.ids))
    out.done = tee.raw.rstrip().endswith(b"data: [DONE]")
    return out


def _message(body: object) -> str:
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            return str(err.get("message", ""))[:160]
    return ""


def check_with_fleet(out: Outcome, entries: list[dict[str, Any]]) -> str:
    """What the fleet's log contradicts in an answer the client read as whole: the serving
    attempt did not end cleanly, or a continuation is not exactly the cut text plus what the
    fleet sent after it. Empty: nothing."""
    if out.kind != "ended" or not out.models:
        return ""
    last = [e for e in entries if e["model"] == out.models[-1]]
    if not last:
        return f"no fleet request for {out.models[-1]}"
    entry = last[-1]
    if entry.get("outcome") not in ("done", "no_done"):
        return f"the serving attempt ended {entry.get('outcome')!r} at the fleet"
    if len(out.models) > 1:
        prefill = str(entry["body"]["messages"][-1].get("content") or "")
        sent = str(entry.get("continuation") or "")
        after = sent[len(prefill) :] if prefill and sent.startswith(prefill) else sent
        if out.text != prefill + after:
            return "the stitched text is not the cut text plus its continuation"
    return ""


# ---------------------------------------------------------------- classification (pure)


def classify(out: Outcome, slow_s: float) -> tuple[str, str]:
    """(class, what the client read), from the outcome alone."""
    if out.kind in ("http_error", "inband_error"):
        return "clean", out.error
    if out.kind == "broken":
        return "broken", out.error
    if out.finish not in ("stop", "length") or not out.text or out.integrity:
        why = out.integrity or f"finish {out.finish!r}, {len(out.text)} chars"
        return "WRONG", f"returned as success: {why}"
    if len(out.models) > 1:
        return "continued", f"{len(out.text)} chars from {' + '.join(out.models)}"
    notes = [
        *([] if out.usage else ["no usage"]),
        *([] if out.done else ["no [DONE]"]),
        *([] if len(out.ids) == 1 else [f"{len(out.ids)} ids"]),
        *([f"first token after {out.ttft_s:.1f} s"] if (out.ttft_s or 0) > slow_s else []),
    ]
    what = f"{len(out.text)} chars from {out.models[0]}"
    return ("note", f"{what}; {', '.join(notes)}") if notes else ("complete", what)


# ---------------------------------------------------------------- main


def run(table: list[Case], args: argparse.Namespace) -> list[dict[str, Any]]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-failover-"))
    (tmp / "scenario.yaml").write_text(yaml.safe_dump(fleet_scenario(table)))
    write_contracts(table, tmp / "contracts")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "CANARY_HOME": str(tmp)}
    py = sys.executable
    procs = []
    rows: list[dict[str, Any]] = []
    try:
        fleet, fleet_api = start_fleet(tmp / "scenario.yaml", env)
        procs.append(fleet)
        fleet_root = fleet_api.removesuffix("/api/v1")
        genv = {**env, "CANARY_BASE_URL": fleet_api, "CANARY_API_KEY": FLEET_KEY,
                "CANARY_GATEWAY__KEYS": GW_KEY}  # fmt: skip
        if args.quick:
            genv["CANARY_ROUTING__STALL_TIMEOUT_S"] = "0.5"
        gw, gw_url, _ = start(
            [py, "-m", "canary.cli", "gateway", "serve", "--port", "0", "--contracts",
             str(tmp / "contracts"), "--no-quarantine"],
            genv, pattern=r"at (http://[\d.:]+/v1)",
        )  # fmt: skip
        procs.append(gw)
        httpx.delete(f"{fleet_root}/_fleet/requests").raise_for_status()

        def one(case: Case) -> dict[str, Any]:
            out = read_stream(gw_url, case.name)
            log = _fleet_log(fleet_root, (f"bench/{case.name}-p", f"bench/{case.name}-f"))
            out.integrity = check_with_fleet(out, log)
            cls, what = classify(out, args.slow_s)
            return {"case": case.name, "label": case.label, "class": cls,
                    "expect": case.expect, "what": what, **asdict(out)}  # fmt: skip

        with ThreadPoolExecutor(args.concurrency) as pool:
            for row in pool.map(one, table):
                rows.append(row)
                print(_row(row), flush=True)
    finally:
        for proc in reversed(procs):
            stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


def _fleet_log(fleet_root: str, models: tuple[str, ...]) -> list[dict[str, Any]]:
    """The fleet's log of `models`, once each streamed reply's end is written (the fleet
    sets it after the reply's last bytes left)."""
    for _ in range(20):
        entries = [e for e in httpx.get(f"{fleet_root}/_fleet/requests").json()
                   if e["model"] in models]  # fmt: skip
        if all(e.get("outcome") is not None for e in entries if e["status"] == 200):
            break
        time.sleep(0.05)
    return entries


def _row(r: dict[str, Any]) -> str:
    ttft = f"{r['ttft_s']:.2f}" if r["ttft_s"] is not None else "-"
    mark = "" if r["class"] == r["expect"] else f"  (expected {r['expect']})"
    return (f"{r['label']:<38}| {r['class']:<9} {ttft:>6} {r['total_s']:>6.2f} | "
            f"{r['what'][:90]}{mark}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short stalls (tests/bench)")
    parser.add_argument("--strict", action="store_true", help="exit 1 on an unexpected class")
    parser.add_argument("--slow-s", type=float, default=5.0, help="a first token later: a note")
    parser.add_argument("--concurrency", type=int, help="cases at once (default 1; --quick: 4)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--only", action="append", help="run only this case (repeatable)")
    args = parser.parse_args()
    table = cases(args.quick)
    args.concurrency = args.concurrency or (4 if args.quick else 1)
    if args.only:
        unknown = set(args.only) - {c.name for c in table}
        if unknown:
            parser.error(
                f"--only: unknown case(s) {sorted(unknown)}; known: {[c.name for c in table]}"
            )
        table = [c for c in table if c.name in args.only]
    print(f"{'case (the primary route fails so)':<38}| {'class':<9} {'TTFT':>6} {'total':>6} |"
          " what the client read (s; read by the OpenAI SDK, streamed)")  # fmt: skip
    rows = run(table, args)
    totals = {k: sum(r["class"] == k for r in rows) for k in CLASSES}
    print("\ngateway: " + ", ".join(f"{v} {k}" for k, v in totals.items()) + f" of {len(rows)}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    unexpected = [r["case"] for r in rows if r["class"] != r["expect"]]
    if totals["WRONG"] or (args.strict and unexpected):
        print(f"FAILED: WRONG {totals['WRONG']}, unexpected classes: {unexpected}")
        sys.exit(1)


if __name__ == "__main__":
    main()
