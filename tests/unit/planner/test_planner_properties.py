"""Property tests of the planner over random sessions, budgets, modes and strategies (hypothesis)."""
from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbench.config import PlannerConfig
from ctxbench.records.messages import Message, ToolCall, strategy_family
from ctxbench.planner import build_plan, plan_id
from ctxbench.records.plans import Memo, Pin, PlanInputs
from ctxbench.records.vocab import EXCLUDED_REASONS, INCLUDED_REASONS, STRATEGIES
from ctxbench.records.retrieval import RetrievalHit, RetrievalSet
from ctxbench.tokens import count_message, count_messages, get_tokenizer

TOK = get_tokenizer()
CONFIG = PlannerConfig()

WORDS = st.sampled_from(["always", "never", "parser", "ledger", "fix", "the", "bug", "from now on", "tabs", "x" * 40, "émoji ✓"])
TEXT = st.lists(WORDS, min_size=0, max_size=12).map(" ".join)
LONG = st.one_of(TEXT, st.integers(200, 6000).map(lambda n: ("result line\n" * (n // 12 + 1))[:n]))
FORMATS = st.sampled_from(["openai", "gemini", "anthropic"])
FLAGS = st.lists(st.sampled_from(["instruction", "error", "solution", "decision", "code"]), max_size=2, unique=True).map(tuple)


@st.composite
def turn_spec(draw):
    return {
        "system": draw(st.booleans()) and draw(st.integers(0, 9)) == 0,
        "user": draw(TEXT),
        "user_flags": draw(FLAGS),
        # (format, calls, results, flags, results left unstored: an import or a turn cut off mid-tool)
        "calls": draw(st.lists(st.tuples(FORMATS, st.integers(1, 2), st.lists(LONG, min_size=2, max_size=2), FLAGS,
                                         st.sampled_from([0, 0, 0, 1, 2])),
                               max_size=3)),
        "reply": draw(st.one_of(st.none(), TEXT)),
        "dropped_msg": draw(st.integers(0, 14)) == 0,
    }


def build_messages(specs):
    messages: list[Message] = []
    next_id = 1

    def add(gid, role, content, **kw):
        nonlocal next_id
        messages.append(Message(id=next_id, session_id="s", branch_id="main", group_id=gid, role=role,
                                content=content, **kw))
        next_id += 1

    for gid, spec in enumerate(specs):
        if spec["system"]:
            add(gid, "system", "system note " + spec["user"])
        add(gid, "user", spec["user"] or "hi", flags=spec["user_flags"],
            status="dropped" if spec["dropped_msg"] else "active")
        for fmt, n_calls, results, flags, unanswered in spec["calls"]:
            ids = [f"c{next_id}_{k}" for k in range(n_calls)]
            add(gid, "assistant", "", tool_calls=tuple(ToolCall(i, "grep", '{"q": "x"}') for i in ids), parsing_strategy=fmt)
            for k, call_id in enumerate(ids[: max(0, n_calls - unanswered)]):
                add(gid, "tool", results[k], tool_call_id=call_id, tool_name="grep", parsing_strategy=fmt, flags=flags)
        if spec["reply"] is not None:
            add(gid, "assistant", spec["reply"] or "done")
    return messages


@st.composite
def plan_inputs(draw):
    specs = draw(st.lists(turn_spec(), min_size=1, max_size=12))
    messages = build_messages(specs)
    last = len(specs) - 1
    history = tuple(m for m in messages if m.group_id != last)
    current = tuple(dataclasses.replace(m, status="active") for m in messages if m.group_id == last)
    past_groups = sorted({m.group_id for m in history})
    group_ids = st.sampled_from(past_groups + [last, 999]) if past_groups else st.sampled_from([last, 999])
    targets = st.one_of(group_ids.map(lambda g: f"group:{g}"), st.sampled_from(["text:a", "text:b", "card:pkg.f1"]))
    pins = draw(st.lists(
        st.builds(Pin, id=st.sampled_from(["p1", "p2", "p3", "p4"]), target=targets,
                  kind=st.sampled_from(["sticky", "leased", "ephemeral"]), content=TEXT, ttl=st.integers(0, 3)),
        max_size=4, unique_by=lambda p: p.id))
    hits = tuple(
        RetrievalHit(f"pkg.f{k}", "pkg.py", k, score, provenance=prov, card_text=f"def f{k}(): {text}", excerpt=text * 3)
        for k, (score, prov, text) in enumerate(draw(st.lists(
            st.tuples(st.floats(0, 1, allow_nan=False), st.sampled_from(["semantic", "keyword", "graph", "pin"]), TEXT),
            max_size=8)))
    )
    retrieval = RetrievalSet(RetrievalSet.make_id("q", hits), "q", hits, scaffold=draw(TEXT))
    return PlanInputs(
        session_id="s",
        query=current[0].content if current else "q",
        history=history,
        current_turn=current,
        budget=draw(st.one_of(st.integers(0, 600), st.integers(600, 20000))),
        mode=draw(st.sampled_from(["off", "light", "heavy"])),
        strategy=draw(st.sampled_from(STRATEGIES)),
        window_groups=draw(st.integers(0, 4)),
        provider_family=draw(st.sampled_from(["openai", "gemini", "anthropic"])),
        pins=tuple(pins),
        dropped_groups=tuple(draw(st.lists(st.sampled_from(past_groups or [0]), max_size=2))),
        state_block=draw(TEXT),
        scratchpad=draw(TEXT),
        memos=tuple(Memo(i, t) for i, t in enumerate(draw(st.lists(TEXT, max_size=2)))),
        retrieval=retrieval,
        keyword_ranking=tuple(draw(st.permutations(past_groups))[: draw(st.integers(0, len(past_groups)))]),
        semantic_ranking=tuple((g, draw(st.floats(0, 1, allow_nan=False))) for g in past_groups[: draw(st.integers(0, len(past_groups)))]),
        tools_tokens=draw(st.one_of(st.just(0), st.integers(1, 1500))),
    )


def assert_mandatory_included(inputs: PlanInputs, plan) -> None:
    """System prompt, current turn, active system messages and sticky pins are in, whatever the budget."""
    items = {i.id: i for i in plan.items}
    assert items["system"].included and items["current"].included
    if inputs.tools_tokens:
        tools = items["tools"]
        assert tools.included and tools.reason == "mandatory" and tools.kind == "tool_definitions"
        assert tools.section == "system" and tools.tokens == inputs.tools_tokens and tools.messages == ()
    else:
        assert "tools" not in items
    dropped = set(inputs.dropped_groups)
    for m in inputs.history:
        if m.role == "system" and m.status == "active" and m.group_id not in dropped:
            assert items[f"sysmsg:{m.id}"].included
    current_group = inputs.current_turn[0].group_id if inputs.current_turn else None
    history_groups = {m.group_id for m in inputs.history}
    first_pin_on: dict[str, str] = {}
    for pin in sorted(inputs.pins, key=lambda p: ({"sticky": 0, "leased": 1, "ephemeral": 2}[p.kind], p.id)):
        first = first_pin_on.setdefault(pin.target, pin.id) == pin.id
        if pin.kind != "sticky" or not first:
            continue
        kind, _, name = pin.target.partition(":")
        if kind != "group":
            assert items[f"pin:{pin.id}"].included and items[f"pin:{pin.id}"].reason == "pinned_sticky"
            continue
        gid = int(name)
        if gid == current_group or gid in dropped:
            continue
        if gid not in history_groups:
            assert items[f"pin:{pin.id}"].included == bool(pin.content)
            continue
        atoms = [i for i in plan.items if i.kind == "history_atom" and i.id.startswith(f"atom:{gid}:")]
        for atom in atoms:
            if atom.reason not in ("isolated_strategy", "dropped_by_user"):
                assert atom.included and atom.reason == "pinned_sticky", atom


def assert_tool_calls_answered(payload: list[dict]) -> None:
    """What providers check: every tool call id is answered by the tool messages that directly follow
    its assistant message, and every tool message belongs to the tool calls just before it."""
    for n, msg in enumerate(payload):
        if msg.get("tool_calls"):
            assert msg["role"] == "assistant"
            answers = []
            k = n + 1
            while k < len(payload) and payload[k]["role"] == "tool":
                answers.append(payload[k]["tool_call_id"])
                k += 1
            assert sorted(answers) == sorted(c["id"] for c in msg["tool_calls"]), (msg, answers)
        if msg["role"] == "tool":
            k = n - 1
            while k >= 0 and payload[k]["role"] == "tool":
                k -= 1
            assert k >= 0 and msg["tool_call_id"] in [c["id"] for c in payload[k].get("tool_calls") or ()], msg


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def budget_near_the_edges(data, inputs: PlanInputs) -> int:
    """A budget where decisions are tight: around the size of everything, or of a prefix of it."""
    full = build_plan(dataclasses.replace(inputs, budget=10**7), CONFIG, TOK)
    sizes = [i.tokens for i in full.included]
    cut = data.draw(st.integers(0, len(sizes)))
    edge = sum(sizes[:cut]) + 3
    return data.draw(st.one_of(
        st.integers(0, full.used_tokens + 20),
        st.integers(max(0, edge - 6), edge + 6),
        st.integers(max(0, full.used_tokens - 12), full.used_tokens + 2),
    ))


@pytest.mark.slow
@SETTINGS
@given(plan_inputs(), st.data())
def test_plan_invariants(inputs: PlanInputs, data):
    inputs = dataclasses.replace(inputs, budget=budget_near_the_edges(data, inputs))
    plan = build_plan(inputs, CONFIG, TOK)
    payload = plan.messages()
    items = plan.items

    # a valid payload: no tool call left unanswered, no tool message without its call
    assert_tool_calls_answered(payload)

    # exact token accounting of the whole prompt (messages + tool definitions), budget respected or
    # flagged with mandatory intact
    assert plan.used_tokens == count_messages(TOK, payload) + inputs.tools_tokens
    for item in items:
        if item.included and item.kind != "tool_definitions":
            assert item.tokens == sum(count_message(TOK, m) for m in item.messages)
    assert_mandatory_included(inputs, plan)
    if plan.over_budget:
        assert plan.used_tokens > plan.budget and plan.over_budget_reason
        assert all(i.reason in ("mandatory", "pinned_sticky") for i in items if i.included)
    else:
        assert plan.used_tokens <= plan.budget

    # every candidate exactly once, with one valid reason; included first, in payload order
    ids = [i.id for i in items]
    assert len(ids) == len(set(ids))
    all_message_ids = [mid for i in items for mid in i.message_ids]
    expected = [m.id for m in inputs.history] + [m.id for m in inputs.current_turn]
    assert sorted(all_message_ids) == sorted(expected)
    assert len(items) == len(ids)
    seen_excluded = False
    for n, item in enumerate(items):
        assert item.reason in (INCLUDED_REASONS if item.included else EXCLUDED_REASONS)
        if item.included:
            assert not seen_excluded and item.order == n
        else:
            seen_excluded = True
            assert item.order == -1 and item.messages == ()
    assert sum(1 for p in inputs.pins) == sum(1 for i in items if i.kind == "pin")
    assert len(inputs.retrieval.hits) == sum(1 for i in items if i.kind == "symbol_card")

    by_id = {m.id: m for m in (*inputs.history, *inputs.current_turn)}
    item_of = {mid: item for item in items for mid in item.message_ids}

    # atoms never split: a tool call and its results share one item
    for m in inputs.history:
        for call in m.tool_calls:
            for r in inputs.history:
                if r.role == "tool" and r.tool_call_id == call.id:
                    assert item_of[r.id] is item_of[m.id]

    # a turn never loses its user message; fused sends a plain message on its own by design (its tool calls still
    # bring their user message)
    for item in items:
        if item.included and item.kind == "history_atom":
            if inputs.strategy == "fused" and not any(by_id[mid].tool_calls for mid in item.message_ids):
                continue
            gid = by_id[item.message_ids[0]].group_id
            user = next(m for m in inputs.history if m.group_id == gid and m.role == "user")
            assert item_of[user.id].included

    # history strictly chronological, current turn last
    history_ids = [mid for i in plan.included if i.kind == "history_atom" for mid in i.message_ids]
    assert history_ids == sorted(history_ids)
    assert plan.included[-1].id == "current"

    # isolation: no included tool message from another provider family
    family = strategy_family(inputs.provider_family)
    for item in plan.included:
        for mid in item.message_ids:
            m = by_id[mid]
            if m.is_tool_message:
                assert strategy_family(m.parsing_strategy) == family
            assert m.status == "active" or item.kind == "current_turn"

    # determinism: same inputs, same id, same bytes; input order of pins / drops does not matter
    again = build_plan(dataclasses.replace(inputs, pins=inputs.pins[::-1], dropped_groups=inputs.dropped_groups[::-1]),
                       CONFIG, TOK)
    assert again.plan_id == plan.plan_id == plan_id(inputs, CONFIG, TOK.name)
    assert json.dumps(again.to_json()) == json.dumps(plan.to_json())
    assert json.dumps(again.messages()) == json.dumps(payload)
    # the tool definitions are an input: another size, another PlanId; the payload is the same when
    # the budget leaves room for both
    other = dataclasses.replace(inputs, tools_tokens=inputs.tools_tokens + 7)
    assert plan_id(other, CONFIG, TOK.name) != plan.plan_id


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(plan_inputs(), st.integers(0, 3000))
def test_more_budget_never_includes_less_for_the_window(inputs: PlanInputs, extra: int):
    inputs = dataclasses.replace(inputs, strategy="window", mode="off", pins=())
    small = build_plan(inputs, CONFIG, TOK)
    large = build_plan(dataclasses.replace(inputs, budget=inputs.budget + extra), CONFIG, TOK)
    assert large.used_tokens >= small.used_tokens or small.over_budget
