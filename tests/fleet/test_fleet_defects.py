"""Scripted defects of the fleet observed at their configured rates on seeded
runs, healthy hosts clean over 200 replies, and replies in the prompt's
language for all 17 locales (issue 2 §3; SPEC C3, C4, C6, C7, C9)."""

from __future__ import annotations

import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import Any

import httpx
import jsonschema
import pytest
from lingua import Language, LanguageDetector, LanguageDetectorBuilder

from tests.fixtures.fleet import FleetHandle, parse_sse
from tests.fleet.prompts import PROMPTS

LLAMA = "meta-llama/llama-3.3-70b-instruct"
HEALTHY = {
    "deepinfra/fp8": "DeepInfra", "together/fp8": "Together", "fireworks/fp8": "Fireworks",
    "lambda/bf16": "Lambda", "novita/fp8": "Novita", "nebius/fp8": "Nebius AI Studio",
    "hyperbolic/bf16": "Hyperbolic", "parasail/fp8": "Parasail", "groq/fp16": "Groq",
    "cerebras/fp16": "Cerebras", "sambanova/bf16": "SambaNova", "crusoe/bf16": "Crusoe",
    "baseten/fp8": "Baseten", "friendli/fp8": "Friendli",
}  # fmt: skip
LANGUAGE_OF = {
    "en": Language.ENGLISH, "es": Language.SPANISH, "pt-BR": Language.PORTUGUESE, "fr": Language.FRENCH,
    "de": Language.GERMAN, "it": Language.ITALIAN, "pl": Language.POLISH, "ru": Language.RUSSIAN,
    "uk": Language.UKRAINIAN, "tr": Language.TURKISH, "ja": Language.JAPANESE, "ko": Language.KOREAN,
    "zh-Hans": Language.CHINESE, "id": Language.INDONESIAN, "vi": Language.VIETNAMESE,
    "ar": Language.ARABIC, "th": Language.THAI,
}  # fmt: skip
SPANISH_ONLY = {
    "usted", "con", "pero", "ella", "ahora", "entonces", "mucho", "yo", "noche", "puerta",
    "llave", "ayer", "cuente", "verdad", "tiempo", "luces", "pueblo", "anochecer", "cosa",
    "calle", "razón", "tenía", "una", "un", "donde", "principio", "viejo", "río",
}  # fmt: skip
CLEAN_ENGLISH = re.compile(r"^[\x20-\x7e’—…]*$")
SCHEMA = {
    "type": "object",
    "properties": {
        "character": {"type": "string", "minLength": 1},
        "mood": {"enum": ["calm", "tense", "playful"]},
        "trust": {"type": "integer", "minimum": 0, "maximum": 10},
        "items": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "armed": {"type": "boolean"},
    },
    "required": ["character", "mood", "trust", "items", "armed"],
    "additionalProperties": False,
}


@cache
def _detector() -> LanguageDetector:
    return (
        LanguageDetectorBuilder.from_languages(*LANGUAGE_OF.values())
        .with_preloaded_language_models()
        .build()
    )


def _lang(text: str) -> Language | None:
    return _detector().detect_language_of(text)


def _sentences(text: str) -> list[str]:
    body = text.split("*", 2)[-1] if text.startswith("*") else text
    return [s for s in re.split(r"(?<=[.!?])\s+", body.strip()) if len(s) > 12]


def _body(tag: str, locale: str = "en", **extra: Any) -> dict[str, Any]:
    provider = {
        "only": [tag],
        "allow_fallbacks": False,
        "require_parameters": "response_format" in extra,
    }
    return {
        "model": LLAMA,
        "messages": [{"role": "user", "content": PROMPTS[locale]}],
        "provider": provider,
        **extra,
    }


def _texts(
    fleet: FleetHandle, tag: str, n: int, locale: str = "en", **extra: Any
) -> list[dict[str, Any]]:
    return [fleet.chat(_body(tag, locale, **extra)).json() for _ in range(n)]


def _content(reply: dict[str, Any]) -> str:
    return reply["choices"][0]["message"]["content"] or ""


def _defects_of(text: str, locale: str, finish: str | None) -> list[str]:
    """Every defect class the tests know how to see in one reply."""
    found = []
    if not text.startswith("*"):
        found.append("start")
    if "\ufffd" in text or (locale == "en" and not CLEAN_ENGLISH.match(text)):
        found.append("encoding")
    if _lang(text) != LANGUAGE_OF[locale]:
        found.append("language")
    sentences = _sentences(text)
    if len(sentences) != len(set(sentences)):
        found.append("repetition")
    if finish != "stop":
        found.append(f"finish:{finish}")
    return found


def test_c9_startcorrupt_corrupts_19_of_20_starts(fleet: FleetHandle) -> None:
    """StartCorrupt (rate 0.95, seed 0): 19 of 20 replies start with stray punctuation or a fragment glued to `*`."""
    replies = [_content(r) for r in _texts(fleet, "startcorrupt/fp8", 20)]
    bad = [t for t in replies if not t.startswith("*")]
    assert len(bad) == 19, "seed 0 reproduces the incident: 19 of 20"
    assert all(re.match(r"^([,;.\"')\]:\-]|[^\W\d_]+)\*", t) for t in bad), bad
    labels = [e["defect"] for e in fleet.requests()]
    assert labels.count("stray_start") == len(bad)


def test_c7_mixhost_mixes_spanish_into_portuguese_3_of_3(fleet: FleetHandle) -> None:
    """MixHost: 3 of 3 Portuguese replies carry whole Spanish sentences; an English prompt stays clean."""
    spanish_words_in_portuguese = 0
    for reply in _texts(fleet, "mixhost/fp8", 3, "pt-BR"):
        sentences = _sentences(_content(reply))
        labels = [_lang(s) for s in sentences]
        assert labels.count(Language.SPANISH) >= 2, labels
        assert labels.count(Language.PORTUGUESE) >= 1, labels
        for sentence, label in zip(sentences, labels, strict=True):
            words = set(re.findall(r"[^\W\d_]+", sentence.lower()))
            if label == Language.PORTUGUESE and words & SPANISH_ONLY:
                spanish_words_in_portuguese += 1
    assert spanish_words_in_portuguese >= 2, "portunhol inside Portuguese sentences"
    english = _content(_texts(fleet, "mixhost/fp8", 1, "en")[0])
    assert _defects_of(english, "en", "stop") == []


def test_c3_slowpoke_first_token_after_scripted_delay(fleet: FleetHandle) -> None:
    """Slowpoke: first content arrives no sooner than its scripted 12 s (scaled), with keep-alives before it."""
    scripted = next(
        e for e in fleet.scenario()["models"][0]["endpoints"] if e["tag"] == "slowpoke/bf16"
    )["scripted_slow_ttft_s"]
    assert scripted == pytest.approx(1.2)
    start = time.monotonic()
    with fleet.http.stream(
        "POST",
        f"{fleet.base_url}/chat/completions",
        json=_body("slowpoke/bf16", stream=True),
        headers={"Authorization": f"Bearer {fleet.key}"},
        timeout=30,
    ) as r:
        comments = 0
        for line in r.iter_lines():
            if line.startswith(":"):
                comments += 1
            elif line.startswith("data: "):
                ttft = time.monotonic() - start
                break
    assert ttft >= scripted * 0.97 and comments >= 3


def test_c4_policywall_filters_every_reply_in_all_its_forms(fleet: FleetHandle) -> None:
    """PolicyWall (rate 1.0): refusal in the prompt's language, content_filter (empty or cut), empty, or 403 moderation."""
    seen = set()
    for _ in range(12):
        r = fleet.chat(_body("policywall/fp8", "de"))
        if r.status_code == 403:
            meta = r.json()["error"]["metadata"]
            assert meta["error_type"] == "permission_denied" and set(meta) >= {
                "reasons",
                "flagged_input",
                "provider_name",
                "model_slug",
            }
            seen.add("403")
            continue
        choice = r.json()["choices"][0]
        text, finish = choice["message"]["content"], choice["finish_reason"]
        if finish == "content_filter":
            seen.add("content_filter")
        elif text == "":
            seen.add("empty")
        else:
            assert _lang(text) == Language.GERMAN and len(text) < 80 and not text.startswith("*"), (
                text
            )
            seen.add("refusal")
    assert len(seen) >= 3, seen


def test_c5_filter_control_host_filters_without_http_errors(fleet: FleetHandle) -> None:
    """FilterControl, the known-filtering control: every reply filtered, always HTTP 200."""
    for reply in _texts(fleet, "filterctl/fp8", 8):
        choice = reply["choices"][0]
        text = choice["message"]["content"]
        assert (
            choice["finish_reason"] == "content_filter"
            or text == ""
            or (not text.startswith("*") and len(text) < 80)
        )


def test_c6_schemabreak_breaks_every_structured_reply_healthy_host_does_not(
    fleet: FleetHandle,
) -> None:
    """SchemaBreak: every json_schema reply fails parsing or validation; a healthy host's always validates."""
    rf = {"type": "json_schema", "json_schema": {"name": "scene", "strict": True, "schema": SCHEMA}}

    def valid(text: str) -> bool:
        try:
            jsonschema.validate(json.loads(text), SCHEMA)
        except (json.JSONDecodeError, jsonschema.ValidationError):
            return False
        return True

    broken = [_content(r) for r in _texts(fleet, "schemabreak/fp8", 8, response_format=rf)]
    assert not any(valid(t) for t in broken)
    assert len({e["defect"] for e in fleet.requests()}) >= 3, "several break modes"
    assert all(valid(_content(r)) for r in _texts(fleet, "deepinfra/fp8", 8, response_format=rf))


def test_c7_mojibake_host_corrupts_encoding_every_time(fleet: FleetHandle) -> None:
    """Mojibake (rate 1.0): English replies carry wrongly decoded UTF-8 (characters no clean reply has)."""
    replies = [_content(r) for r in _texts(fleet, "mojibake/fp8", 10)]
    assert not any(CLEAN_ENGLISH.match(t) for t in replies)
    assert len({e["defect"] for e in fleet.requests()}) >= 3, "several codecs"


def test_q1_flaky_host_fails_in_transport_about_half_the_time_but_answers_correctly(
    fleet: FleetHandle,
) -> None:
    """Flaky: ~50% transport faults (429/502/503/reset/cut/error chunk); every completed reply is clean."""
    fleet.load("seed-incidents", time_scale=0.01, seed=0)
    faults, clean = 0, 0
    for _ in range(40):
        try:
            r = fleet.chat(_body("flaky/fp8", stream=True))
        except httpx.TransportError:
            faults += 1
            continue
        if r.status_code != 200:
            assert r.status_code in {429, 502, 503}
            faults += 1
            continue
        result = parse_sse(r.content)
        if not result.done:
            faults += 1
            continue
        assert _defects_of(result.text, "en", result.finish_reason) == []
        clean += 1
    assert 10 <= faults <= 30 and faults + clean == 40
    kinds = {e["fault"] for e in fleet.requests()} - {None}
    assert kinds >= {"http_error", "stream_cut", "midstream_error"}


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        ("langswitch/fp8", "language"),
        ("repeater/fp8", "repetition"),
        ("truncator/fp8", "finish:length"),
        ("fffd/fp8", "encoding"),
    ],
)
def test_c7_c9_defect_zoo_classes(fleet: FleetHandle, tag: str, expected: str) -> None:
    """defect-zoo: language switch, repetition loop, truncation and U+FFFD hosts show their defect every time."""
    fleet.load("defect-zoo", time_scale=0.01)
    for reply in _texts(fleet, tag, 3, "pt-BR" if tag == "langswitch/fp8" else "en"):
        locale = "pt-BR" if tag == "langswitch/fp8" else "en"
        assert expected in _defects_of(
            _content(reply), locale, reply["choices"][0]["finish_reason"]
        )


def test_c7_c9_healthy_hosts_zero_defects_over_200_replies(fleet: FleetHandle) -> None:
    """The 14 healthy hosts give 0 defects over 200 replies across all 17 locales (streamed)."""
    fleet.load("seed-incidents", time_scale=0.005, seed=7)
    tags = sorted(HEALTHY)
    locales = sorted(PROMPTS)
    jobs = [(tags[i % len(tags)], locales[i % len(locales)]) for i in range(200)]

    def run(job: tuple[str, str]) -> tuple[str, str, list[str]]:
        tag, locale = job
        r = fleet.chat(_body(tag, locale, stream=True))
        result = parse_sse(r.content)
        problems = _defects_of(result.text, locale, result.finish_reason)
        if not result.done or {p["provider"] for p in result.payloads} != {HEALTHY[tag]}:
            problems.append("transport/provider")
        return tag, locale, problems

    with ThreadPoolExecutor(max_workers=8) as pool:
        outcomes = list(pool.map(run, jobs))
    defective = [o for o in outcomes if o[2]]
    assert defective == []
    assert len(outcomes) == 200


@pytest.mark.parametrize("locale", sorted(PROMPTS))
def test_c7_reply_in_the_prompts_language(fleet: FleetHandle, locale: str) -> None:
    """A healthy host answers in the language of the last user message, for each of the 17 locales."""
    body = _body("deepinfra/fp8", locale)
    body["messages"] = [
        {"role": "system", "content": "You are a role-play partner. Stay in character."},
        {"role": "assistant", "content": "*nods*"},
        *body["messages"],
    ]
    text = _content(fleet.chat(body).json())
    assert _lang(text) == LANGUAGE_OF[locale] and text.startswith("*")
    assert fleet.requests()[-1]["locale"] == locale
