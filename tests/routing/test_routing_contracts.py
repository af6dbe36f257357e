"""Contracts and route groups (R1), capability filter (R6), acceptance pipeline (R7): pure tests."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from routing.acceptance import Accepted, accept
from routing.capability import estimate_needs, select_routes
from routing.classify import Rejection
from routing.errors import ContractError
from routing.response import Completion, StreamAssembler, ToolCall
from routing.routes import DEFAULT_DIR, load_catalog
from routing.semantic import check_classify, check_invoice

CATALOG = load_catalog()


def test_r1_shipped_worked_examples_load() -> None:
    """The shipped directory holds chat, invoice_extraction, classify, tool_agent, invoice-v3 and five route groups (R1)."""
    assert set(CATALOG.contracts) == {"chat", "invoice_extraction", "classify", "tool_agent"}
    assert "invoice-v3" in CATALOG.schemas
    assert set(CATALOG.routes.groups) == {"text", "schema", "tools", "vision", "long_context"}
    inv = CATALOG.contract("invoice_extraction")
    assert (
        inv.structured_output.schema_id == "invoice-v3"
        and inv.deadline_ms == 8000
        and inv.max_cost_usd == 0.08
    )


def _copy(tmp_path: Path) -> Path:
    target = tmp_path / "contracts"
    shutil.copytree(DEFAULT_DIR, target)
    return target


@pytest.mark.parametrize(
    ("file", "old", "new", "message"),
    [
        ("chat.yaml", "deadline_ms: 30000", "deadline_ms: -5", "chat.yaml: deadline_ms"),
        (
            "chat.yaml",
            "streaming: true",
            "streaming: true\nstreming: false",
            "chat.yaml: streming: Extra inputs",
        ),
        (
            "invoice_extraction.yaml",
            "schema_id: invoice-v3",
            "schema_id: invoice-v9",
            "structured_output.schema_id: unknown schema 'invoice-v9'",
        ),
        (
            "classify.yaml",
            "route_groups: [schema]",
            "route_groups: [schemas]",
            "route_groups: unknown group 'schemas'",
        ),
        (
            "tool_agent.yaml",
            "ambiguous_policy: fail",
            "ambiguous_policy: replay",
            "side effects may not use ambiguous_policy 'replay'",
        ),
        (
            "routes.yaml",
            "context_length: 32768",
            "context_length: lots",
            "routes.yaml: routes.1.context_length",
        ),
        (
            "routes.yaml",
            "vision: [gemini-flash]",
            "vision: [gemini-pro]",
            "group 'vision' names unknown routes ['gemini-pro']",
        ),
    ],
)
def test_r1_bad_file_is_a_clear_error_naming_file_and_field(
    tmp_path: Path, file: str, old: str, new: str, message: str
) -> None:
    """Every malformed contract or route file fails at load with the file and field named (R1)."""
    root = _copy(tmp_path)
    path = root / file
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    with pytest.raises(ContractError, match=re.escape(message)):
        load_catalog(root)


def test_r1_broken_schema_file_is_named(tmp_path: Path) -> None:
    """A JSON Schema that is not valid JSON Schema is rejected with its file named (R1)."""
    root = _copy(tmp_path)
    (root / "schemas" / "invoice-v3.json").write_text(json.dumps({"type": "objekt"}))
    with pytest.raises(ContractError, match=r"schemas/invoice-v3\.json"):
        load_catalog(root)


@pytest.mark.parametrize("file", ["chat.yaml", "routes.yaml", "schemas/invoice-v3.json"])
def test_r1_non_utf8_file_is_a_contract_error_naming_the_file(tmp_path: Path, file: str) -> None:
    """A contract, route or schema file that is not UTF-8 fails with a ContractError naming it, not a UnicodeDecodeError (R1)."""
    root = _copy(tmp_path)
    path = root / file
    path.write_bytes(path.read_bytes() + "# caf\xe9\n".encode("latin-1"))
    with pytest.raises(ContractError, match=re.escape(f"{path.name}: not UTF-8 text")):
        load_catalog(root)


def _body(text: str, image: bool = False, **extra: object) -> dict:
    content: object = (
        text
        if not image
        else [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": "data:x"}}]
    )
    return {"messages": [{"role": "user", "content": content}], **extra}


def test_r6_capability_filter_by_modality_context_tools_schema_class_cost() -> None:
    """Routes are filtered by what the request needs, not by rank (R6)."""
    routes = CATALOG.routes.routes
    chat = CATALOG.contract("chat")
    sel = select_routes(list(routes), chat, estimate_needs(chat, _body("hi")), remaining_cost_usd=1)
    assert {r.id for r in sel.ranked} == {"llama-70b", "qwen-72b", "gemini-flash"}
    big = estimate_needs(chat, _body("x" * 4 * 60_000))  # ~60k tokens: too much for qwen's 32k
    sel = select_routes(list(routes), chat, big, remaining_cost_usd=1)
    assert sel.dropped == {"qwen-72b": "context_too_small"}
    inv = CATALOG.contract("invoice_extraction")
    sel = select_routes(
        list(routes), inv, estimate_needs(inv, _body("invoice", image=True)), remaining_cost_usd=1
    )
    assert [r.id for r in sel.ranked] == ["gemini-flash"] and sel.dropped["llama-70b"] == "modality"
    sel = select_routes(
        list(routes), chat, estimate_needs(chat, _body("hi")), remaining_cost_usd=1e-9
    )
    assert sel.ranked == [] and set(sel.dropped.values()) == {"cost"}
    sel = select_routes(
        list(routes),
        chat,
        estimate_needs(chat, _body("hi")),
        remaining_cost_usd=1,
        suppressed=frozenset({"llama-70b"}),
    )
    assert sel.dropped == {"llama-70b": "circuit_open"}
    eu_only = chat.model_copy(
        update={"constraints": chat.constraints.model_copy(update={"regions": ("eu",)})}
    )
    sel = select_routes(
        list(routes), eu_only, estimate_needs(chat, _body("hi")), remaining_cost_usd=1
    )
    assert sel.ranked == [] and set(sel.dropped.values()) == {
        "region"
    }  # shipped routes declare no region
    tools = CATALOG.contract("tool_agent")
    assert estimate_needs(tools, _body("x")).tools


def _done(
    content: str = "", finish: str = "stop", calls: list[ToolCall] | None = None
) -> Completion:
    return Completion(content=content, finish_reason=finish, tool_calls=calls or [], done=True)


INVOICE = {
    "invoice_number": "A-1",
    "currency": "EUR",
    "total": 30.0,
    "line_items": [{"description": "a", "amount": 10.0}, {"description": "b", "amount": 20.0}],
}


@pytest.mark.parametrize(
    ("workload", "completion", "reason"),
    [
        (
            "invoice_extraction",
            Completion(content=json.dumps(INVOICE), finish_reason="stop", done=False),
            "transport_incomplete",
        ),
        ("invoice_extraction", _done(json.dumps(INVOICE), "length"), "finish_length"),
        ("chat", _done("Hello there.", "content_filter"), "finish_content_filter"),
        ("chat", _done("Hello there.", "error"), "finish_error"),
        ("invoice_extraction", _done('{"invoice_number": "A-1", '), "malformed_json"),
        ("invoice_extraction", _done("Here it is: " + json.dumps(INVOICE)), "malformed_json"),
        (
            "invoice_extraction",
            _done(json.dumps({k: v for k, v in INVOICE.items() if k != "currency"})),
            "missing_field",
        ),
        ("invoice_extraction", _done(json.dumps({**INVOICE, "total": "30"})), "schema_invalid"),
        (
            "invoice_extraction",
            _done(json.dumps({**INVOICE, "total": 31.0})),
            "invoice_items_do_not_sum",
        ),
        (
            "invoice_extraction",
            _done(json.dumps({**INVOICE, "currency": "JPY"})),
            "invoice_unsupported_currency",
        ),
        ("classify", _done(json.dumps({"label": "weather"})), "schema_invalid"),
        (
            "tool_agent",
            _done("", "tool_calls", [ToolCall("c1", "delete_everything", "{}")]),
            "unknown_tool",
        ),
        (
            "tool_agent",
            _done(
                "",
                "tool_calls",
                [ToolCall("c1", "create_ticket", '{"title": "x", "priority": "urgent"}')],
            ),
            "tool_args_invalid",
        ),
        (
            "tool_agent",
            _done("", "tool_calls", [ToolCall("c1", "create_ticket", '{"title": ')]),
            "tool_args_malformed",
        ),
        ("tool_agent", _done("I would open a ticket."), "no_tool_call"),
        (
            "tool_agent",
            _done('<tool_call>\n{"name": "create_ticket", "arguments": {}}\n</tool_call>'),
            "tool_markup_leak",
        ),
        (  # a leak beside a well-formed call is still a broken parser
            "tool_agent",
            _done(
                "[TOOL_CALLS]",
                "tool_calls",
                [ToolCall("c1", "create_ticket", '{"title": "x", "priority": "high"}')],
            ),
            "tool_markup_leak",
        ),
        ("chat", _done(",Hello there, traveller. The night is young."), "stray_start"),
    ],
)
def test_r7_acceptance_rejects_each_contract_violation(
    workload: str, completion: Completion, reason: str
) -> None:
    """Each acceptance step rejects its violation with its own reason code (R7)."""
    verdict = accept(completion, CATALOG.contract(workload), CATALOG.schemas)
    assert isinstance(verdict, Rejection) and verdict.reason == reason


def test_r7_accepted_answers_are_only_trimmed() -> None:
    """Valid answers pass; the only normalisation is trimming surrounding whitespace (R7)."""
    v = accept(
        _done("\n  " + json.dumps(INVOICE) + "  \n"),
        CATALOG.contract("invoice_extraction"),
        CATALOG.schemas,
    )
    assert isinstance(v, Accepted) and v.parsed == INVOICE and v.content == json.dumps(INVOICE)
    v = accept(
        _done(
            "",
            "tool_calls",
            [ToolCall("c1", "create_ticket", '{"title": "x", "priority": "high"}')],
        ),
        CATALOG.contract("tool_agent"),
        CATALOG.schemas,
    )
    assert isinstance(v, Accepted) and v.tool_arguments == [{"title": "x", "priority": "high"}]
    v = accept(
        _done(json.dumps({"label": " billing "})), CATALOG.contract("classify"), CATALOG.schemas
    )
    # a padded label is not "repaired" by trimming the field: the schema rejects it
    assert isinstance(v, Rejection) and v.reason == "schema_invalid"


def test_r7_semantic_validators() -> None:
    """Invoice: non-negative total, supported currency, items sum within tolerance; classify: allowed label (R7)."""
    params = {"currencies": ["EUR"], "tolerance": 0.01}
    assert check_invoice(INVOICE, params) is None
    assert check_invoice({**INVOICE, "total": 30.009}, params) is None
    assert check_invoice({**INVOICE, "total": -1, "line_items": []}, params) == (
        "invoice_negative_total",
        "-1",
    )
    assert check_invoice({**INVOICE, "line_items": []}, params) is None
    assert check_classify({"label": "other"}, {"labels": ["other"]}) is None
    assert check_classify({"label": 3}, {"labels": ["other"]}) is not None


def test_r7_sse_chunks_assemble_a_completion() -> None:
    """An SSE chunk sequence assembles the completion's facts, tool-call deltas included (R7)."""
    asm = StreamAssembler()
    asm.feed(
        {
            "id": "g",
            "provider": "P",
            "choices": [
                {
                    "delta": {
                        "tool_calls": [
                            {"index": 0, "id": "c", "function": {"name": "t", "arguments": '{"a"'}}
                        ]
                    }
                }
            ],
        }
    )
    asm.feed(
        {
            "choices": [
                {
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]},
                    "finish_reason": "tool_calls",
                }
            ]
        }
    )
    asm.feed({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}})
    c = asm.completion
    assert c.tool_calls[0].arguments == '{"a": 1}' and c.tokens() == (3, 4) and not c.done
    asm.feed(
        {
            "error": {
                "code": 502,
                "message": "x",
                "metadata": {"error_type": "provider_unavailable"},
            },
            "choices": [{"delta": {"content": ""}, "finish_reason": "error"}],
        }
    )
    assert (
        asm.release() == ""
        and c.error is not None
        and c.error.in_band
        and c.error.error_type == "provider_unavailable"
    )
