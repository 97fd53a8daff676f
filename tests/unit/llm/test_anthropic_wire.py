"""A plan's payload as Anthropic Messages, and where its cache_control breakpoints go (pure functions)."""
from __future__ import annotations

import json

from ctxbench.llm.anthropic_wire import (
    END,
    SHARED,
    STABLE,
    SYSTEM,
    Breakpoint,
    PreviousRequest,
    anthropic_body,
    place_breakpoints,
)
from ctxbench.records.plans import PlanItem


def item(item_id, kind, *messages, reason="", pin=""):
    return PlanItem(id=item_id, kind=kind, section="", label=item_id, tokens=10, included=True, reason=reason,
                    pin=pin, messages=tuple(messages))


def sys(text):
    return {"role": "system", "content": text}


def user(text):
    return {"role": "user", "content": text}


def assistant(text, *calls):
    out = {"role": "assistant", "content": text}
    if calls:
        out["tool_calls"] = [{"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
                             for cid, name, args in calls]
    return out


def tool(call_id, text):
    return {"role": "tool", "content": text, "tool_call_id": call_id}


TOOLS = ({"type": "function", "function": {"name": "read_file", "description": "Read a file.",
                                          "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}},)

# a cache-ordered plan: system, tools, scaffold, a sticky pin, a summary, a standing instruction, the window's
# turns, the state block, a turn picked for the query, a symbol card, the current turn
ITEMS = (
    item("system", "system_prompt", sys("You are ctxbench.")),
    item("tools", "tool_definitions"),
    item("scaffold", "scaffold", sys("### ORIENTATION\nsrc/")),
    item("pin:1", "pin", sys("### PINNED (sticky) rules\nbe brief"), pin="sticky"),
    item("summary:1", "summary", sys("### SUMMARY of turns 1-3\nwe fixed rounding")),
    item("group:4", "history_atom", user("always answer in English"), assistant("ok"), reason="standing_instruction"),
    item("group:7", "history_atom", user("where is money?"), assistant("", ("c1", "read_file", '{"path": "m.py"}')),
         tool("c1", "def money(): ..."), assistant("In m.py."), reason="recent"),
    item("state", "state", sys("### STATE\nGoal: ship")),
    item("group:5", "history_atom", user("rounding?"), assistant("banker's"), reason="keyword_match"),
    item("card:m.money", "symbol_card", sys("### SYMBOL CARD m.money\ndef money()")),
    item("current", "current_turn", user("and totals?")),
)
MESSAGES = [m for i in ITEMS for m in i.messages]


def test_breakpoints_go_at_the_end_the_shared_prefix_the_stable_context_and_the_system_run():
    # the previous request had the same opening up to the window's last turn, then a different state block
    previous = PreviousRequest(tuple(MESSAGES[:10]) + (sys("### STATE\nGoal: old"),), TOOLS)
    points = place_breakpoints(MESSAGES, TOOLS, items=ITEMS, previous=previous)
    assert points == (Breakpoint(0, SYSTEM), Breakpoint(5, STABLE), Breakpoint(9, SHARED),
                      Breakpoint(len(MESSAGES) - 1, END))
    assert MESSAGES[5] == assistant("ok")  # the standing instruction's turn closes the stable context
    assert MESSAGES[9] == assistant("In m.py.")  # the last message both requests open with


def test_without_a_previous_request_or_with_other_tools_nothing_counts_as_shared():
    alone = place_breakpoints(MESSAGES, TOOLS, items=ITEMS)
    assert [b.reason for b in alone] == [SYSTEM, STABLE, END]
    previous = PreviousRequest(tuple(MESSAGES), ())  # the same messages, but the last round offered no tools
    assert place_breakpoints(MESSAGES, TOOLS, items=ITEMS, previous=previous) == alone


def test_the_limit_keeps_the_end_and_the_shared_prefix_first():
    previous = PreviousRequest(tuple(MESSAGES[:10]), TOOLS)
    assert [b.reason for b in place_breakpoints(MESSAGES, TOOLS, items=ITEMS, previous=previous, limit=2)] == \
        [SHARED, END]
    assert place_breakpoints(MESSAGES, TOOLS, items=ITEMS, previous=previous, limit=0) == ()
    assert len(place_breakpoints(MESSAGES, TOOLS, items=ITEMS, previous=previous, limit=9)) == 4


def test_in_relevance_order_the_state_block_ends_the_stable_context():
    items = (ITEMS[0], ITEMS[1], ITEMS[7], ITEMS[2], ITEMS[9], ITEMS[6], ITEMS[10])
    messages = [m for i in items for m in i.messages]
    assert place_breakpoints(messages, (), items=items) == (Breakpoint(0, SYSTEM), Breakpoint(len(messages) - 1, END))


def test_an_identical_request_places_no_separate_shared_breakpoint():
    previous = PreviousRequest(tuple(MESSAGES), TOOLS)
    assert [b.reason for b in place_breakpoints(MESSAGES, TOOLS, items=ITEMS, previous=previous)] == \
        [SYSTEM, STABLE, END]


def test_items_that_do_not_add_up_to_the_messages_fall_back_to_the_leading_system_messages():
    points = place_breakpoints(MESSAGES, TOOLS, items=ITEMS[:3])
    assert points == (Breakpoint(3, SYSTEM), Breakpoint(len(MESSAGES) - 1, END))  # the four system messages


def test_the_body_keeps_every_text_in_order_and_marks_the_named_messages():
    points = place_breakpoints(MESSAGES, TOOLS, items=ITEMS, previous=PreviousRequest(tuple(MESSAGES[:10]), TOOLS))
    body = anthropic_body(MESSAGES, TOOLS, points)
    assert [b["text"] for b in body.system] == [m["content"] for m in MESSAGES[:4]]
    assert body.tools == [{"name": "read_file", "description": "Read a file.",
                           "input_schema": TOOLS[0]["function"]["parameters"]}]
    # roles alternate: the state block and the card ride in user turns, the tool result with the next text
    assert [t["role"] for t in body.messages] == ["user", "assistant", "user", "assistant", "user", "assistant",
                                                  "user", "assistant", "user"]
    blocks = [b for t in body.messages for b in t["content"]]
    texts = [b.get("text", b.get("content")) for b in blocks if b["type"] in ("text", "tool_result")]
    assert texts == [_text(m) for m in MESSAGES[4:] if _text(m)]
    use = next(b for b in blocks if b["type"] == "tool_use")
    result = next(b for b in blocks if b["type"] == "tool_result")
    assert use == {"type": "tool_use", "id": "c1", "name": "read_file", "input": {"path": "m.py"}}
    assert result["tool_use_id"] == "c1"
    marked = [b for b in body.system + blocks if "cache_control" in b]
    assert len(marked) == 4 and all(b["cache_control"] == {"type": "ephemeral"} for b in marked)
    assert [b.get("text") for b in marked] == ["You are ctxbench.", "ok", "In m.py.", "and totals?"]


def test_a_mark_on_a_message_that_renders_nothing_goes_to_the_block_before():
    messages = [sys("S"), user("q"), assistant("", ("bad id!", "read_file", "not json"))]
    body = anthropic_body(messages, (), (Breakpoint(2, END),))
    use = body.messages[-1]["content"][-1]
    assert use == {"type": "tool_use", "id": "bad_id_", "name": "read_file", "input": {"arguments": "not json"},
                   "cache_control": {"type": "ephemeral"}}
    body = anthropic_body([sys("S"), user("q"), assistant("")], (), (Breakpoint(2, END),))
    assert body.messages == [{"role": "user", "content": [{"type": "text", "text": "q",
                                                           "cache_control": {"type": "ephemeral"}}]}]
    json.dumps(body.messages)


def _text(message):
    return message.get("content") or ""
