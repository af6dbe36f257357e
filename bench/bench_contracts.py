"""Bench: detection rate per reason of issue 22's contracts (tools, reasoning leaks, decoding
artefacts, honest streams) on generated defective cases, and the false positives on healthy
ones, as bench/bench_start_check.py does for starts. Issue 22, item 7.

    .venv/bin/python bench/bench_contracts.py [--seed N] [--cases N]

Cases are derived, seeded, never stored:
- start reasons (`reasoning_leak`, `bpe_markers`, `literal_escapes`): the clean corpus
  (tests/data/corpus/clean, 17 locales) and the fleet's reply bank, with the fleet's defect
  forms (fleet/defects.py) and a few more (`◁think▷`, `[THINK]`, a stripped harmony channel,
  SentencePiece `▁`, escapes inside the text); judged per reply by check_reply (the reason
  that names the reply, `worst_of`);
- tool reasons: replies of each probe kind as a broken parser returns them (the fleet's
  markup styles plus Llama's `<|python_tag|>`, unparseable and schema-violating arguments
  from fleet/tools.py, unknown names, text instead of a call, finish reasons, broken deltas
  through the stream recorder, `none` violated, results ignored in 17 locales, trigger
  misses), judged by probes/tools.py;
- stream reasons: buffered replies (2-30 s of silence after the headers, the whole reply in
  one chunk or flushed within 5 ms while the client reads keep-alives) against honest ones
  (first token 0.1-9 s, then 10-300 tokens at 10-200 tokens/s; a stalled client reading
  them at once; a busy host whose headers come late too), another model's name against the
  same model's spellings, a host at 3-20% of its peers' speed against peers spread +-40%.
Healthy cases: the clean corpus and the bank (every start reason), healthy calls with
arguments the fleet generates for the probes' schemas, text answers, results used in 17
locales, honest streams, the same model's names, peers of ordinary spread.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fleet import bank, defects, schema_gen  # noqa: E402
from fleet import tools as fleet_tools  # noqa: E402
from ground.settings import ProbeConfig  # noqa: E402
from probes.decode import StreamRecorder  # noqa: E402
from probes.integrity import check_reply, worst_of  # noqa: E402
from probes.peer_round import SLOW_OUTPUT, slow_outputs  # noqa: E402
from probes.probeset import ProbeSetResult  # noqa: E402
from probes.prompts import LOCALES  # noqa: E402
from probes.streams import buffered, judge_stream, same_model  # noqa: E402
from probes.tools import BOOKING, SCHEMAS, WEATHER, judge_tool_reply  # noqa: E402
from probes.types import Contract, Endpoint, OutcomeStatus, ToolCall, Transcript  # noqa: E402
from tests.data.variants import SEED, clean_locales, load_clean  # noqa: E402

CONFIG = ProbeConfig()
START_REASONS = ("reasoning_leak", "bpe_markers", "literal_escapes")
MODEL = "meta-llama/llama-3.3-70b-instruct"


def _texts(rng: random.Random, per_locale: int) -> list[tuple[str, str]]:
    """Clean replies: the corpus and the fleet's bank, every locale."""
    out = [(loc, t) for loc in clean_locales() for t in load_clean(loc)]
    out += [(loc, bank.compose_reply(loc, rng)) for loc in LOCALES for _ in range(per_locale)]
    return out


def start_cases(
    rng: random.Random, texts: list[tuple[str, str]]
) -> dict[str, list[tuple[str, str]]]:
    cases: dict[str, list[tuple[str, str]]] = {r: [] for r in START_REASONS}
    for loc, text in texts:
        reasoning = defects.reasoning_text(rng)
        style = rng.choice(["think", "thinking", "channel", "unclosed"])
        extra = rng.choice([f"◁think▷{reasoning}◁/think▷{text}", f"[THINK]{reasoning}[/THINK]{text}",
                            f"analysis{reasoning}assistantfinal{text}", f"{reasoning}</think>\n\n{text}"])  # fmt: skip
        cases["reasoning_leak"] += [
            (loc, defects.reasoning_leak(text, style, reasoning)),
            (loc, extra),
        ]
        tokens = bank.chunk_text(defects.paragraph_after_opener(text), loc)
        share = rng.choice([1.0, 0.5, 0.25])
        cases["bpe_markers"].append((loc, "".join(defects.bpe_markers(tokens, share))))
        if " " in text and loc not in ("ja", "zh-Hans", "th"):
            cases["bpe_markers"].append((loc, text.replace(" ", "\u2581")))
        for style in ("newline", "unicode", "double_json"):
            cases["literal_escapes"].append((loc, defects.literal_escapes(text, style)))
        cases["literal_escapes"].append(
            (loc, "".join(defects.unicode_escapes(bank.chunk_text(text, loc))))
        )
    return cases


def judge_start(
    cases: dict[str, list[tuple[str, str]]], texts: list[tuple[str, str]]
) -> tuple[dict[str, tuple[int, int]], int, int]:
    rates = {}
    for reason, items in cases.items():
        caught = sum(worst_of(check_reply(t, loc)).reason == reason for loc, t in items)
        rates[reason] = (caught, len(items))
    fp = sum(worst_of(check_reply(t, loc)).reason in START_REASONS for loc, t in texts)
    return rates, fp, len(texts)


# ---- tools ----------------------------------------------------------------------------------


def _reply(probe: str, rng: random.Random, **kw: Any) -> Transcript:
    base: dict[str, Any] = {
        "request_id": f"r{rng.getrandbits(32)}", "model_id": MODEL, "tag": "h/fp8",
        "pinned_provider": "H", "served_by": "H", "contract": Contract.TOOLS, "probe": probe,
        "http_status": 200, "done": True, "finish_reason": "stop", "locale": "en",
    }  # fmt: skip
    base.update(kw)
    return Transcript(**base)


def _args(name: str, rng: random.Random) -> Any:
    return schema_gen.generate(SCHEMAS[name], rng)


def _call(name: str, arguments: str, rng: random.Random) -> ToolCall:
    return ToolCall(index=0, id=fleet_tools.call_id(rng), name=name, arguments=arguments)


def _streamed(deltas: list[dict[str, Any]]) -> Transcript:
    """A reply whose tool-call deltas go through the real stream recorder."""
    t = Transcript(request_id="d", model_id=MODEL, tag="h/fp8", pinned_provider="H",
                   contract=Contract.TOOLS, probe="required")  # fmt: skip
    rec = StreamRecorder(t)
    for i, d in enumerate(deltas):
        rec.chunk({"id": "g", "model": MODEL, "provider": "H", "choices": [{"delta": d, "finish_reason": "tool_calls" if i == len(deltas) - 1 else None}]}, 0.1 * i)  # fmt: skip
    out = rec.finish()
    return out.model_copy(
        update={"http_status": 200, "done": True, "served_by": "H", "expect": WEATHER}
    )


def _broken_deltas(args: str, rng: random.Random) -> Transcript:
    head = {
        "index": 0,
        "id": "call_a",
        "type": "function",
        "function": {"name": WEATHER, "arguments": ""},
    }
    pieces = [args[i : i + 8] for i in range(0, len(args), 8)]
    form = rng.choice(["no_index", "id_changed", "gap", "before_header"])
    body = [{"tool_calls": [{"index": 0, "function": {"arguments": p}}]} for p in pieces]
    if form == "no_index":
        body[len(body) // 2] = {"tool_calls": [{"function": {"arguments": pieces[len(body) // 2]}}]}
    elif form == "id_changed":
        body.insert(
            1, {"tool_calls": [{"index": 0, "id": "call_b", "function": {"arguments": ""}}]}
        )
    elif form == "gap":
        head["index"] = 1
        body = [{"tool_calls": [{"index": 1, "function": {"arguments": p}}]} for p in pieces]
    else:
        return _streamed([*body, {"tool_calls": [head]}])
    return _streamed([{"tool_calls": [head]}, *body])


def tool_cases(rng: random.Random, n: int) -> dict[str, list[Transcript]]:
    cases: dict[str, list[Transcript]] = {}
    for _ in range(n):
        name = rng.choice([WEATHER, BOOKING])
        args = _args(name, rng)
        text_args = json.dumps(args)
        style = rng.choice(["xml", "mistral", "kimi", "llama"])
        loc = rng.choice(LOCALES)
        add = cases.setdefault
        add("as_text", []).append(
            _reply("required", rng, expect=name, text=fleet_tools.as_text(name, text_args, style))
        )
        add("bad_arguments", []).append(
            _reply(
                "required",
                rng,
                expect=name,
                finish_reason="tool_calls",
                tool_calls=[_call(name, fleet_tools.bad_json(args, rng), rng)],
            )
        )
        _, broken = fleet_tools.schema_violation(
            args, SCHEMAS[name], ["missing_required", "wrong_enum", "wrong_type"], rng
        )
        cases["bad_arguments"].append(
            _reply(
                "required",
                rng,
                expect=name,
                finish_reason="tool_calls",
                tool_calls=[_call(name, broken, rng)],
            )
        )
        add("unknown_name", []).append(
            _reply(
                "required",
                rng,
                expect=name,
                finish_reason="tool_calls",
                tool_calls=[_call(name + rng.choice(["_v2", "s", "_tool"]), text_args, rng)],
            )
        )
        add("ignored", []).append(
            _reply("required", rng, expect=name, text=bank.compose_reply(loc, rng))
        )
        add("finish_reason", []).append(
            _reply(
                "required",
                rng,
                expect=name,
                finish_reason=rng.choice(["stop", "length", None]),
                tool_calls=[_call(name, text_args, rng)],
            )
        )
        add("inconsistent_deltas", []).append(_broken_deltas(json.dumps(_args(WEATHER, rng)), rng))
        add("choice_none_violated", []).append(
            _reply(
                "none",
                rng,
                finish_reason="tool_calls",
                tool_calls=[_call(WEATHER, json.dumps(_args(WEATHER, rng)), rng)],
            )
        )
        unknown = json.loads((ROOT / "fleet/replies/tool_phrases.json").read_text("utf-8"))[loc][
            "unknown"
        ]
        add("result_ignored", []).append(
            _reply("result", rng, text=rng.choice([unknown, bank.compose_reply(loc, rng)]))
        )
        add("trigger_missed", []).append(_reply("auto_need", rng, text=unknown))
        add("trigger_spurious", []).append(
            _reply(
                "auto_plain",
                rng,
                finish_reason="tool_calls",
                tool_calls=[_call(WEATHER, text_args, rng)],
            )
        )
    return cases  # fmt: skip


def healthy_tools(rng: random.Random, n: int) -> list[Transcript]:
    phrases = json.loads((ROOT / "fleet/replies/tool_phrases.json").read_text("utf-8"))
    out = []
    for _ in range(n):
        name, loc = rng.choice([WEATHER, BOOKING]), rng.choice(LOCALES)
        calls = [_call(name, json.dumps(_args(name, rng), ensure_ascii=rng.random() < 0.5), rng)]
        out.append(
            _reply("required", rng, expect=name, finish_reason="tool_calls", tool_calls=calls)
        )
        out.append(_reply("none", rng, text=bank.compose_reply(loc, rng)))
        values = ", ".join(["Lisbon", "13", "light rain", "WX-4471"])
        out.append(_reply("result", rng, text=phrases[loc]["result"].format(values=values)))
        out.append(
            _reply(
                "auto_need",
                rng,
                finish_reason="tool_calls",
                tool_calls=[_call(WEATHER, json.dumps(_args(WEATHER, rng)), rng)],
            )
        )
        out.append(_reply("auto_plain", rng, text="56"))
    return out


# ---- streams --------------------------------------------------------------------------------


def _stream(first: float, spread: float, chunks: int, chars: int, **kw: Any) -> Transcript:
    return Transcript(
        request_id=kw.pop("request_id", "s"), model_id=MODEL, tag="h/fp8", pinned_provider="H", served_by="H",
        contract=Contract.START, http_status=200, done=True, text="x" * chars, ttft_s=first,
        last_content_s=first + spread, content_chunks=chunks, first_chunk_chars=4,
        usage={"completion_tokens": chars // 4}, **kw,
    )  # fmt: skip


def _held(rng: random.Random) -> Transcript:
    """A buffered reply: one merged chunk, or a buffering proxy flushing every chunk at once
    while the client reads keep-alives."""
    chunks = rng.choice([1, 1, rng.randint(10, 300)])
    spread = 0.0 if chunks == 1 else rng.uniform(0.0, 0.005)
    opened = rng.uniform(0.05, 0.5)  # headers (and keep-alives) at once, then silence
    first = opened + rng.uniform(2.0, 30.0)
    idle = opened + (first - opened) * rng.uniform(0.6, 0.99)
    return _stream(first, spread, chunks, rng.randint(60, 1200), headers_s=opened, idle_read_s=idle)


def _late(rng: random.Random) -> Transcript:
    """A busy host: its headers come late (the request queued), then its tokens at once."""
    tokens, first = rng.randint(10, 300), rng.uniform(2.0, 10.0)
    opened = first - rng.uniform(0.0, 0.3)
    return _stream(first, 0.0, tokens, tokens * 4, headers_s=opened, idle_read_s=opened)


def _stalled(rng: random.Random) -> Transcript:
    """An honest stream read at once by a client that stalled 2-10 s (a busy machine)."""
    tokens = rng.randint(10, 300)
    return _stream(
        rng.uniform(2.0, 10.0), 0.0, tokens, tokens * 4, idle_read_s=rng.uniform(0.0, 0.5)
    )


def stream_cases(
    rng: random.Random, n: int
) -> tuple[dict[str, tuple[int, int]], dict[str, tuple[int, int]]]:
    """(caught, cases) per reason and (false positives, cases) per healthy kind."""
    held = [_held(rng) for _ in range(n)]
    honest = []
    for _ in range(n):
        tokens, tps = rng.randint(10, 300), rng.uniform(10, 200)
        honest.append(_stream(rng.uniform(0.1, 9.0), tokens / tps, tokens, tokens * 4))
    others = ["meta-llama/llama-3.1-8b-instruct", "meta-llama/llama-3.1-70b-instruct", "qwen/qwen-2.5-72b-instruct", "meta-llama/llama-3.2-3b-instruct", "mistralai/mistral-small-24b-instruct-2501"]  # fmt: skip
    same = [MODEL, MODEL + ":free", MODEL + ":nitro", "Llama-3.3-70B-Instruct", "meta-llama/Llama-3.3-70B-Instruct-Turbo", "llama-3.3-70b-instruct-fp8", "meta-llama/llama-3.3-70b-instruct-2024-12-06"]  # fmt: skip
    slow_caught = slow_fp = 0
    for _ in range(n // 10):
        slow, ratio = _slow_round(rng)
        slow_caught += slow
        slow_fp += ratio
    caught = {
        "buffered": (sum(buffered(t, CONFIG) for t in held), len(held)),
        "served_model_mismatch": (
            sum(not same_model(rng.choice(others), MODEL) for _ in range(n)),
            n,
        ),
        SLOW_OUTPUT: (slow_caught, n // 10),
    }
    stalled = [_stalled(rng) for _ in range(n)]
    late = [_late(rng) for _ in range(n)]
    fps = {
        "honest streams (buffered)": (sum(buffered(t, CONFIG) for t in honest), len(honest)),
        "honest streams, client stalled (buffered)": (sum(buffered(t, CONFIG) for t in stalled), n),
        "a busy host answering late, then at once": (sum(buffered(t, CONFIG) for t in late), n),
        "the same model's names": (
            sum(not same_model(rng.choice(same), MODEL) for _ in range(n)),
            n,
        ),
        "peers of ordinary speed (slow_output)": (slow_fp, (n // 10) * 14),
    }
    return caught, fps


def _slow_round(rng: random.Random) -> tuple[int, int]:
    """One round: a host at 3-20% of its 14 peers' speed, peers spread +-40%: (the slow host
    flagged, healthy peers flagged)."""
    endpoint = Endpoint(model_id=MODEL, tag="h", provider_name="H", throughput_p50_tps=45.0)
    results = {}
    base = rng.uniform(200, 2000)
    for i in range(15):
        speed = base * (rng.uniform(0.03, 0.2) if i == 0 else rng.uniform(0.6, 1.4))
        ts = [_stream(0.3, 300 / speed, 60, 304, request_id=f"r{j}") for j in range(6)]
        first = judge_stream(endpoint, ts, CONFIG)[0]
        results[f"h{i}"] = ProbeSetResult(
            tag=f"h{i}", locale="en", outcomes={Contract.STREAM: first}
        )
    slow = slow_outputs(results, CONFIG)
    return int("h0" in slow), sum(1 for t in slow if t != "h0")


# ---- report ---------------------------------------------------------------------------------


def _line(name: str, k: int, n: int) -> str:
    return f"  {name:44} {k:6d} / {n:<6d} {k / n if n else float('nan'):7.3f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=None, help="default: the tests' seed")
    ap.add_argument("--cases", type=int, default=400, help="generated cases per tool/stream reason")
    args = ap.parse_args()
    rng = random.Random(SEED if args.seed is None else args.seed)

    texts = _texts(rng, per_locale=40)
    rates, fp, clean = judge_start(start_cases(rng, texts), texts)
    print("detection rate per reason (caught / cases)")
    print(" start (per reply, check_reply in 17 locales):")
    for reason, (k, n) in rates.items():
        print(_line(f"start:{reason}", k, n))
    cases = tool_cases(rng, args.cases)
    print(" tools (per reply, probes/tools.py):")
    for reason, items in cases.items():
        k = sum(judge_tool_reply(t).reason == reason for t in items)
        print(_line(f"tools:{reason}", k, len(items)))
    caught, fps = stream_cases(rng, args.cases)
    print(" stream (per reply; slow_output per round against 14 peers):")
    for reason, (k, n) in caught.items():
        print(_line(f"stream:{reason}", k, n))
    print()
    print("false positives on healthy cases (flagged / cases)")
    print(_line("clean replies (any start reason above)", fp, clean))
    healthy = healthy_tools(rng, args.cases)
    flagged = Counter(
        judge_tool_reply(t).probe
        for t in healthy
        if judge_tool_reply(t).status is OutcomeStatus.FAIL
    )  # type: ignore[misc]
    print(_line("healthy tool replies (every probe kind)", sum(flagged.values()), len(healthy)))
    for name, (k, n) in fps.items():
        print(_line(name, k, n))


if __name__ == "__main__":
    main()
