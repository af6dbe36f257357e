"""Evidence in words (O3): the numbers behind each verdict, as the round's artifacts, the
status artifact and `canary history` show them. Pure functions on real outcomes: the
judges' own outputs, not hand-written dicts, wherever a judge produces them."""

from __future__ import annotations

from datetime import UTC, datetime

from flows.applied import AppliedRound
from flows.decisions_artifact import decisions_markdown
from flows.graph import FAILED_STATE_NAME, VerdictLogFilter, verdict_label, verdict_state
from flows.judging import Judged
from flows.render import outcome_rows
from flows.roundplan import RoundPlan
from flows.status_artifact import status_markdown
from flows.transcripts import TOTAL_CHARS, failing_transcripts_markdown
from ground.settings import ProbeConfig
from probes.contracts import judge_controls, judge_latency, judge_refusal, judge_structured
from probes.evidence import BRIEF_CHARS, evidence_brief, evidence_text
from probes.integrity import check_reply, judge_start_share
from probes.language import check_language
from probes.probeset import majority, with_anomalous_heads
from probes.types import Contract, Endpoint, Outcome, OutcomeStatus, Transcript
from quarantine.exclusions import IgnoreEntry, Layer
from quarantine.models import (
    Decision,
    DecisionKind,
    Mode,
    ModelState,
    ProviderState,
    RoundNote,
    RoundReport,
)
from quarantine.overview import Standing, endpoint_views
from quarantine.verdicts import RoundVerdict, round_verdict
from wire.text import Scrubber

DEFAULTS = ProbeConfig()  # the probe settings at their defaults

T0 = datetime(2026, 11, 3, tzinfo=UTC)
KEY = "sk-or-v1-0123456789abcdef0123456789abcdef"


def _t(contract: Contract, text: str, **extra: object) -> Transcript:
    fields: dict = {
        "request_id": f"req-{contract.value}",
        "model_id": "m/x",
        "tag": "bad/fp8",
        "pinned_provider": "Bad",
        "served_by": "Bad",
        "contract": contract,
        "locale": "pt-BR",
        "http_status": 200,
        "text": text,
        "done": True,
        "finish_reason": "stop",
        "ttft_s": 0.4,
    }
    fields.update(extra)
    return Transcript(**fields)


def _start_outcome() -> Outcome:
    texts = [", Ela sorri.", "; O vento sopra.", "*Ela sorri.* Tudo bem.", ") Ele acena."]
    replies = []
    for i, text in enumerate(texts):
        checks = check_reply(text, "pt-BR")
        chosen = next((o for o in checks if o.status is OutcomeStatus.FAIL), checks[0])
        replies.append(
            chosen.model_copy(
                update={
                    "contract": Contract.START,
                    "evidence": {**chosen.evidence, "head": text[:24], "request_id": str(i)},
                }
            )
        )
    return with_anomalous_heads(judge_start_share(replies, DEFAULTS), replies)


def test_o3_start_evidence_counts_anomalous_replies_and_shows_their_first_characters() -> None:
    """k of n replies anomalous, the share against the bar, and what each bad reply began with."""
    text = evidence_text(_start_outcome())
    assert text.startswith("3 of 4 replies anomalous (share 0.75, bar 0.15)")
    assert "`,·Ela·sorri.`" in text and "`;·O·vento·so`" in text and "`)·Ele·acena.`" in text
    assert evidence_brief(_start_outcome()) == "3/4 anomalous starts"


def test_o3_latency_language_structured_refusal_evidence_carry_their_numbers() -> None:
    """TTFT in seconds against the bar, language shares and the detected language, the
    schema error path, the refusal's first words."""
    slow = judge_latency(_t(Contract.START, "ok", ttft_s=12.34), 10.0)
    assert "first token 12.3 s against a bar of 10.0 s" in evidence_text(slow)
    assert evidence_brief(slow) == "TTFT 12.3 s / bar 10.0 s"

    mixed = (
        "*Ela sorri e olha pela janela.* Hoje o dia está bonito e quero caminhar pela praia. "
        "Pero luego decidimos quedarnos en casa porque empezó a llover muy fuerte. "
        "Nosotros preparamos la cena juntos y hablamos durante toda la noche sobre el viaje."
    )
    first = check_language(mixed, "pt-BR")
    assert first.status is OutcomeStatus.FAIL
    voted = majority([first, first, first])
    text = evidence_text(voted)
    assert "asked pt-BR" in text and "Spanish" in text and "Portuguese" in text
    assert "3 of 3 attempts failed" in text

    endpoint = Endpoint(
        model_id="m/x",
        tag="bad/fp8",
        provider_name="Bad",
        supported_parameters=("response_format",),
    )
    schema = judge_structured(
        _t(Contract.STRUCTURED, '{"name": "x", "mood": "ecstatic", "age": 38}'), endpoint
    )
    assert schema.status is OutcomeStatus.FAIL
    assert "schema error at $.mood (enum)" in evidence_text(schema)
    assert evidence_brief(schema).startswith("$.")

    refused = judge_refusal(
        _t(Contract.REFUSAL, "I'm sorry, but I can't continue this story."), "en"
    )
    assert refused.status is OutcomeStatus.FAIL
    assert "refused: “I'm sorry, but I can't continue" in evidence_text(refused)
    for o in (slow, voted, schema, refused, _start_outcome()):
        assert len(evidence_brief(o)) <= BRIEF_CHARS
        assert evidence_text(o) == evidence_text(o.model_dump(mode="json"))  # ledger form


def test_o3_round_table_puts_failures_first_with_short_columns() -> None:
    """Failing endpoints first, their failing contracts first; no long column."""
    good = [Outcome(contract=c, status=OutcomeStatus.PASS, reason="ok") for c in Contract]
    bad = [*good[:-1], _start_outcome()]
    outcomes = {"a/fp8": good, "zz/fp8": bad}
    verdicts = {t: round_verdict(t, o) for t, o in outcomes.items()}
    rows = outcome_rows(outcomes, {"a/fp8": "en", "zz/fp8": "pt-BR"}, verdicts)
    assert (rows[0]["endpoint"], rows[0]["contract"], rows[0]["outcome"]) == (
        "zz/fp8",
        "start",
        "fail",
    )
    assert rows[0]["evidence"] == "3/4 anomalous starts"
    assert [r["endpoint"] for r in rows[:5]] == ["zz/fp8"] * 5
    assert all(len(str(v)) <= BRIEF_CHARS for r in rows for v in r.values())


def test_o3_decisions_markdown_lists_evidence_below_a_narrow_table_and_names_the_model() -> None:
    """The table has four short columns; evidence and round ids follow as a list; a
    model-wide decision (mode_changed) is named, never an empty code span."""
    start = _start_outcome()
    verdict = round_verdict("bad/fp8", [start])
    decisions = [
        Decision(model="m/x", kind=DecisionKind.MODE_CHANGED, tag="", at=T0, mode=Mode.ENFORCE,
                 reason="observe -> enforce"),
        Decision(model="m/x", kind=DecisionKind.SUSPENDED, tag="bad/fp8", at=T0, mode=Mode.ENFORCE,
                 reason="2 consecutive failed rounds", until=T0, rung=1,
                 evidence=("start:stray_start",), round_ids=("m-x@2026-11-02T23:30:00Z", "m-x@2026-11-03T00:00:00Z")),
    ]  # fmt: skip
    plan = RoundPlan(round_id="r", model="m/x", at=T0, targets=(), controls=frozenset())
    judged = Judged({"bad/fp8": [start]}, {"bad/fp8": verdict}, [], judge_controls([]), False)
    report = RoundReport(round_id="r", model="m/x", at=T0, mode=Mode.ENFORCE)
    state = ModelState(model="m/x", mode=Mode.ENFORCE)
    md = decisions_markdown(AppliedRound(plan, Mode.ENFORCE, report, judged, decisions, [], state))
    assert "``" not in md and "(whole model)" in md
    table = [line for line in md.splitlines() if line.startswith("|")]
    assert table and all(line.count("|") == 5 for line in table)
    assert "m-x@2026-11-03T00:00:00Z" not in "".join(table)  # round ids are below the table
    assert "  - rounds: `m-x@2026-11-02T23:30:00Z`" in md
    assert "3 of 4 replies anomalous" in md


def test_o3_failing_transcripts_are_scrubbed_bounded_and_fenced() -> None:
    """Only failing endpoints, their failing contracts' requests; the key scrubbed, control
    characters shown, fences longer than any backtick run, the whole bounded."""
    start = _start_outcome()
    verdict = round_verdict("bad/fp8", [start])
    hostile = f"```\n{KEY[:20]} leaked\x1b[31m red " + "x" * 5000
    transcripts = [_t(Contract.START, hostile), _t(Contract.STRUCTURED, "{}")]
    tags = [f"h{i:02d}/fp8" for i in range(12)]
    md = failing_transcripts_markdown(
        "r",
        {**{t: verdict for t in tags}, "ok/fp8": round_verdict("ok/fp8", [])},
        {t: [start] for t in tags},
        {t: transcripts * 40 for t in tags},
        Scrubber(KEY),
    )
    assert md is not None and "ok/fp8" not in md
    assert KEY[:12] not in md and "***" in md
    assert "\x1b" not in md and "\\x1b" in md
    assert "````" in md  # the reply's own ``` cannot close the block
    assert "#### structured" not in md  # a start failure shows the text requests only
    first = md.split("## `h01/fp8`")[0]
    assert first.count("#### start") == 8  # at most 8 requests per endpoint
    assert len(md) <= TOTAL_CHARS and "left out" in md and "## `h11/fp8`" not in md
    assert failing_transcripts_markdown("r", {}, {}, {}, Scrubber(KEY)) is None


def test_o3_verdict_task_state_and_name_tell_the_graph_which_contract_failed() -> None:
    """A failed verdict is a Failed state named "Contract failed" with the evidence as its
    message; clean and frozen verdicts complete; its error log lines are toned down."""
    import logging

    failed = round_verdict("bad/fp8", [_start_outcome()])
    assert verdict_label(failed) == "bad/fp8: failed start"
    state = verdict_state(failed, ["start: 3 of 4 replies anomalous"])
    assert state.is_failed() and state.name == FAILED_STATE_NAME
    assert "3 of 4" in (state.message or "")
    clean = round_verdict(
        "ok/fp8", [Outcome(contract=Contract.START, status=OutcomeStatus.PASS, reason="ok")]
    )
    assert verdict_label(clean) == "ok/fp8: clean" and verdict_state(clean).is_completed()

    f = VerdictLogFilter()

    def record(msg: str, task: str = "verdict") -> logging.LogRecord:
        r = logging.LogRecord("prefect.task_runs", logging.ERROR, __file__, 1, msg, None, None)
        r.task_name = task
        return r

    assert not f.filter(record("Task run failed with state: Contract failed(...)"))
    finished = record(f"Finished in state {FAILED_STATE_NAME}('start:stray_start')")
    assert f.filter(finished) and finished.levelno == logging.INFO
    other = record("Task run failed with exception: boom", task="pinned-probes")
    assert f.filter(other) and other.levelno == logging.ERROR


def test_o3_status_view_and_artifact_list_every_standing_with_layer_reason_and_evidence() -> None:
    """Suspended, shadow-suspended, excluded (layer, reason) and active endpoints, most
    severe first; an endpoint under an incident exclusion is `excluded`, not `active`."""
    note = RoundNote(
        round_id="r9", at=T0, verdict=RoundVerdict.FAILED, reasons=["start:stray_start"]
    )
    state = ModelState(
        model="m/x",
        mode=Mode.ENFORCE,
        providers={
            "bad/fp8": ProviderState(suspended_until=T0.replace(day=4), suspensions=1,
                                     last_reasons=["start:stray_start"], recent_rounds=[note]),
            "shadow/fp8": ProviderState(shadow_suspended_until=T0.replace(day=4), suspensions=1),
            "inc/fp8": ProviderState(),
            "ok/fp8": ProviderState(consecutive_clean_rounds=3),
        },
    )  # fmt: skip
    ignore = [IgnoreEntry(tag="inc", layer=Layer.INCIDENT, reason="outage 42 (ops)")]
    views = endpoint_views(state, ignore, T0)
    assert [(v.tag, v.standing) for v in views] == [
        ("bad/fp8", Standing.SUSPENDED), ("shadow/fp8", Standing.SHADOW_SUSPENDED),
        ("inc/fp8", Standing.EXCLUDED), ("ok/fp8", Standing.ACTIVE),
    ]  # fmt: skip
    assert views[2].layer is Layer.INCIDENT and views[2].reason == "outage 42 (ops)"
    assert views[0].last_round_id == "r9" and views[0].last_verdict == "failed"
    md = status_markdown(
        model="m/x", mode="enforce", round_id="r9", at=T0, views=views, ignore=ignore,
        evidence={"bad/fp8": ["start `stray_start`: 3 of 4 replies anomalous"]},
    )  # fmt: skip
    suspended = md.split("## Suspended")[1].split("## Shadow")[0]
    assert "`bad/fp8` until 2026-11-04 00:00Z, rung 1: start:stray_start" in suspended
    assert "3 of 4 replies anomalous" in suspended
    assert "`inc/fp8` (incident)" in md.split("## Excluded")[1]
    assert "| `ok/fp8` | - | - | 0 / 3 | 0 |" in md
