"""The capacity model of docs/SCALE.md, as code: what the canary needs for `--models` models of
`--providers` endpoints each, a round per model every `--slot-min` minutes, from the figures
`make scale-test` measured (`--costs-json`), so that the document's numbers are re-derived
by one command after the benches are re-run.

    .venv/bin/python -m scale.slot_test --models 100 --endpoints 2-7 --costs-json a.json
    .venv/bin/python -m scale.slot_test --models 20 --endpoints 20 --costs-json b.json
    .venv/bin/python -m scale.model a.json b.json [--models 400] [--providers 5 12.5 20]
        [--finish-within-s 300] [--confirmation-rate 0.05]

With two shapes every per-round cost is fitted as fixed + per endpoint x endpoints (least
squares over the two); with one, it is scaled per endpoint-round. Probe requests per
endpoint-round come from `probes.probeset.probe_requests` with the settings' start samples,
plus the confirmations times the confirmation rate (an assumption: `--confirmation-rate`).
Spend per request: the seed-incidents fleet's listing prices (the median over its
endpoints) times the tokens of each probe request as the fleet counts its prompt
(`fleet.request.prompt_tokens`) and `max_tokens` of completion (the bound: a reply that
stops early costs less).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path
from typing import Any

SLOTS_PER_DAY_AT_30_MIN = 48
ROUNDS = "rounds (workers + flow-run processes)"


def fit(shapes: list[dict[str, Any]], value: Any) -> tuple[float, float]:
    """(fixed per round, per endpoint-round) of `value(shape)` (a slot's total)."""
    points = [(s["endpoint_rounds"] / s["rounds"], value(s) / s["rounds"]) for s in shapes]
    if len(points) < 2 or len({x for x, _ in points}) < 2:
        x, y = points[0]
        return 0.0, y / x
    (x1, y1), (x2, y2) = points[:2]
    per = (y2 - y1) / (x2 - x1)
    return max(0.0, y1 - per * x1), per


def probe_requests_per_endpoint_round(confirmation_rate: float) -> tuple[float, int, int]:
    """(requests per endpoint-round, the set with structured output, without it)."""
    from ground.settings import load_settings
    from probes.probeset import probe_requests
    from probes.types import Endpoint

    probe = load_settings().probe
    with_so = Endpoint(
        model_id="a/b", tag="a/b", provider_name="A", supported_parameters=("response_format",)
    )
    without = Endpoint(model_id="a/b", tag="a/b", provider_name="A")
    n_with = len(probe_requests(with_so, "en", "en", probe))
    n_without = len(probe_requests(without, "en", "en", probe))
    return n_with + probe.confirmations * confirmation_rate, n_with, n_without


def price_per_request() -> tuple[float, float, float, float, float]:
    """(USD per probe request, prompt tokens, completion tokens, median USD per completion
    token, per prompt token) from the seed-incidents listing and the probe prompts (module
    docstring)."""
    from fleet.request import parse_request, prompt_tokens
    from fleet.scenario import load_scenario
    from ground.settings import load_settings
    from probes.prompts import prompt_for
    from probes.types import Contract

    scenario = load_scenario("seed-incidents")
    prices = [e.pricing for m in scenario.models for e in m.endpoints]
    prompt_usd = statistics.median(float(p.prompt) for p in prices)
    completion_usd = statistics.median(float(p.completion) for p in prices)
    tokens = [
        prompt_tokens(parse_request({"model": "m", "messages": prompt_for(c, "en")}), 0)
        for c in (Contract.LANGUAGE, Contract.REFUSAL, Contract.START, Contract.STRUCTURED)
    ]
    prompt = statistics.fmean(tokens)
    completion = float(load_settings().probe.max_tokens)
    usd = prompt * prompt_usd + completion * completion_usd
    return usd, prompt, completion, completion_usd, prompt_usd


def model(
    shapes: list[dict[str, Any]], args: argparse.Namespace, providers: float
) -> dict[str, float]:
    """Every figure of the model for one provider count per model (labels carry units)."""
    m, slots = args.models, SLOTS_PER_DAY_AT_30_MIN * 30 / args.slot_min
    eps = m * providers  # endpoint-rounds per slot
    within = args.finish_within_s
    out: dict[str, float] = {"endpoint-rounds per slot": eps}
    cpu: dict[str, float] = {}
    for group in shapes[0]["cpu_s"]:
        fixed, per = fit(shapes, lambda s, g=group: s["cpu_s"][g])
        cpu[group] = m * fixed + eps * per
        out[f"CPU-s per slot: {group.split(' (')[0]}"] = cpu[group]
    canary = sum(v for g, v in cpu.items() if not g.startswith("fleet"))
    out["cores, to finish the slot within"] = canary / within
    out["cores, averaged over the slot period"] = canary / (args.slot_min * 60)
    out["Prefect server cores within (1 process: <= 1)"] = cpu["Prefect server"] / within
    wall = args.round_wall_s or statistics.fmean(s["one_round_wall_s"] for s in shapes)
    out["concurrent rounds (pool concurrency)"] = math.ceil(m * wall / within)
    mem = statistics.fmean(s["memory_per_concurrent_round_mb"] for s in shapes)
    out["memory of the rounds at once, GB"] = (
        out["concurrent rounds (pool concurrency)"] * mem / 1024
    )
    for key in ("prefect_transactions", "prefect_rows", "prefect_bytes", "ledger_bytes"):
        fixed, per = fit(shapes, lambda s, k=key: s[k])
        out[key] = m * fixed + eps * per
    out["Prefect DB transactions/s within"] = out.pop("prefect_transactions") / within
    out["Prefect DB rows written/s within"] = out.pop("prefect_rows") / within
    out["Prefect DB growth, GB/day"] = out.pop("prefect_bytes") * slots / 1e9
    out["ledger growth, GB/day"] = out.pop("ledger_bytes") * slots / 1e9
    out[f"ledger at {args.retention_days:g} days retention, GB"] = (
        out["ledger growth, GB/day"] * args.retention_days
    )
    requests, _, _ = probe_requests_per_endpoint_round(args.confirmation_rate)
    usd, *_ = price_per_request()
    out["probe requests per day"] = eps * slots * requests
    out["spend per day, USD (completion bound)"] = out["probe requests per day"] * usd
    return out


def _print(shapes: list[dict[str, Any]], args: argparse.Namespace) -> None:
    requests, n_with, n_without = probe_requests_per_endpoint_round(args.confirmation_rate)
    usd, prompt, completion, completion_usd, prompt_usd = price_per_request()
    print(f"inputs: {', '.join(f'{s["shape"]} (load {s["load_average"]})' for s in shapes)}")
    print(f"probe requests per endpoint-round: {n_with} with structured output, {n_without} "
          f"without, + confirmations x {args.confirmation_rate:g} = {requests:.2f} (upper)")  # fmt: skip
    print(f"price per probe request: ${usd:.6f} ({prompt:.0f} prompt tokens at the median "
          f"${prompt_usd * 1e6:.2f}/M + {completion:.0f} completion tokens at the median "
          f"${completion_usd * 1e6:.2f}/M of the seed-incidents listing)")  # fmt: skip
    rows = {p: model(shapes, args, p) for p in args.providers}
    wall = args.round_wall_s or statistics.fmean(s["one_round_wall_s"] for s in shapes)
    print(f"\n{args.models} models, a round each every {args.slot_min:g} min, the slot "
          f"finished within {args.finish_within_s:.0f} s, a round {wall:.1f} s alone:")  # fmt: skip
    print(f"{'providers per model':<48}" + "".join(f"{p:>11g}" for p in rows))
    for key in rows[args.providers[0]]:
        print(f"{key:<48}" + "".join(f"{_num(r[key]):>11}" for r in rows.values()))


def _num(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("costs", type=Path, nargs="+", help="scale.slot_test --costs-json files")
    parser.add_argument("--models", type=int, default=400)
    parser.add_argument("--providers", type=float, nargs="+", default=[5, 12.5, 20])
    parser.add_argument("--slot-min", type=float, default=30)
    parser.add_argument("--finish-within-s", type=float, default=300)
    parser.add_argument("--confirmation-rate", type=float, default=0.05)
    parser.add_argument("--round-wall-s", type=float, default=None,
                        help="a round's wall time alone (default: the measured one)")  # fmt: skip
    parser.add_argument("--retention-days", type=float, default=None)
    args = parser.parse_args()
    if args.retention_days is None:
        from ground.settings import load_settings

        args.retention_days = load_settings().ledger.retention_days
    _print([json.loads(p.read_text()) for p in args.costs], args)


if __name__ == "__main__":
    main()
