"""A policy set once drops any item the anatomy names, in every wire format: a tool's results by the tool's
name, a reminder kind inside a user's message (a skills list, the environment), aider's few-shot examples, a
system block by its number — and nothing else. The upstream receives exactly the original minus the matched
items, byte for byte: each expected body is built here from the same parts without the matched ones, never by
the proxy's editing code. A budget for tool results (oldest left out first) does the same in each wire format,
only once set, and the preview and its cost line are exactly what is then sent."""
from __future__ import annotations

import json

import httpx2 as httpx
import pytest
from test_proxy import FAKE_ANTHROPIC_KEY, FAKE_OPENAI_KEY, proxied, settled
from test_proxy_anatomy import AIDER_EXAMPLES, AIDER_REPO, CLAUDE_ENV, CLAUDE_MD, CLAUDE_SKILLS
from test_proxy_prices import _watch

from ctxbench.service.proxy.policy import add_rule
from ctxbench.service.proxy.steer_cost import preview_steer
from ctxbench.service.proxy.cache_view import cache_blocks
from ctxbench.service.proxy.wire import parse_request

FORMATS = ("anthropic", "openai", "responses", "gemini")
PATHS = {"anthropic": "/v1/messages", "openai": "/v1/chat/completions", "responses": "/v1/responses",
         "gemini": "/v1beta/models/gemini-2.5-pro:generateContent"}
CALLS = (1, 2, 3)  # call 1 runs fetch_notes, calls 2 and 3 read_file
CODEX_AGENTS = "# AGENTS.md instructions for /home/u/proj\n\n<INSTRUCTIONS>\nUse uv to run Python.\n</INSTRUCTIONS>"
CODEX_ENV = "<environment_context>\n  <cwd>/home/u/proj</cwd>\n  <shell>bash</shell>\n</environment_context>"
GEMINI_ENV = ("This is the Gemini CLI. We are setting up the context for our chat.\nToday's date is Friday.\n"
              "I'm currently working in the directory: /home/u/proj")
ASK, QUESTION = "read the three modules", "and now summarise everything"
# set once, for every client: what each body below carries that a rule names
RULES = ("kind:skill_list", "kind:few_shot", "kind:environment", "result:fetch_*", "system:0")


def _tool(n: int) -> str:
    return "fetch_notes" if n == 1 else "read_file"


def _result(n: int) -> str:
    return f"# module {n}\n" + f"line {n} of the module\n" * 60


def build(fmt: str, *, system0: bool = True, scaffold: bool = True, calls: tuple[int, ...] = CALLS) -> dict:
    """A request of wire format ``fmt`` like its clients send: a system prompt (``system0``: its first block),
    the client's scaffolding (``scaffold``: what RULES drop; a memory file or a repository map that they do not
    is always there), a past turn making ``calls`` with their results, and the question in progress."""
    if fmt == "anthropic":
        system = [{"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."}] if system0 else []
        system.append({"type": "text", "text": "You help with software engineering tasks.",
                       "cache_control": {"type": "ephemeral"}})
        words = (CLAUDE_ENV + CLAUDE_SKILLS + "\n" if scaffold else "") + ASK
        messages: list[dict] = [{"role": "user", "content": [{"type": "text", "text": CLAUDE_MD},
                                                             {"type": "text", "text": words}]}]
        for n in CALLS:  # the words beside a call are not the call: they stay when it goes
            use = {"type": "tool_use", "id": f"toolu_{n}", "name": _tool(n), "input": {"path": f"m{n}.py"}}
            messages.append({"role": "assistant",
                             "content": [{"type": "text", "text": f"Reading {n}."}, *([use] if n in calls else [])]})
            if n in calls:
                messages.append({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": _result(n)}]})
        messages += [{"role": "assistant", "content": "Done."}, {"role": "user", "content": QUESTION}]
        return {"model": "claude-house", "max_tokens": 100, "system": system,
                "tools": [{"name": "read_file", "input_schema": {"type": "object"}}], "messages": messages}
    if fmt == "openai":
        messages = [{"role": "system", "content": "Act as an expert software developer."}] if system0 else []
        messages += [*(AIDER_EXAMPLES if scaffold else []), *AIDER_REPO, {"role": "user", "content": ASK}]
        for n in calls:
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": f"call_{n}", "type": "function",
                 "function": {"name": _tool(n), "arguments": json.dumps({"path": f"m{n}.py"})}}]})
            messages.append({"role": "tool", "tool_call_id": f"call_{n}", "content": _result(n)})
        messages += [{"role": "assistant", "content": "Done."}, {"role": "user", "content": QUESTION}]
        return {"model": "gpt-4o", "temperature": 0, "messages": messages}
    if fmt == "responses":
        items: list[dict] = [_codex_message("user", CODEX_AGENTS)]
        if scaffold:
            items.append(_codex_message("user", CODEX_ENV))
        items.append(_codex_message("user", ASK))
        for n in calls:
            items.append({"type": "function_call", "call_id": f"call_{n}", "name": _tool(n),
                          "arguments": json.dumps({"path": f"m{n}.py"})})
            items.append({"type": "function_call_output", "call_id": f"call_{n}", "output": _result(n)})
        items += [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]},
                  _codex_message("user", QUESTION)]
        body: dict = {"model": "gpt-5-codex"}
        if system0:
            body["instructions"] = "You are Codex, based on GPT-5."
        return {**body, "store": False, "input": items}
    contents: list[dict] = []
    if scaffold:
        contents += [{"role": "user", "parts": [{"text": GEMINI_ENV}]},
                     {"role": "model", "parts": [{"text": "Got it. Thanks for the context!"}]}]
    contents.append({"role": "user", "parts": [{"text": ASK}]})
    for n in calls:
        contents.append({"role": "model", "parts": [{"functionCall": {"name": _tool(n), "args": {"path": f"m{n}.py"}}}]})
        contents.append({"role": "user", "parts": [{"functionResponse": {"name": _tool(n),
                                                                         "response": {"output": _result(n)}}}]})
    contents += [{"role": "model", "parts": [{"text": "Done."}]}, {"role": "user", "parts": [{"text": QUESTION}]}]
    body = {"systemInstruction": {"parts": [{"text": "You are an interactive CLI agent."}]}} if system0 else {}
    return {**body, "contents": contents, "generationConfig": {"temperature": 0}}


def _codex_message(role: str, text: str) -> dict:
    return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}


def wire(body: dict) -> bytes:
    """A body as the proxy writes an edited one: compact JSON, UTF-8 as is (clients send the same JSON)."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def post(proxy, fmt: str, body: dict) -> bytes:
    raw = wire(body)
    headers = {"content-type": "application/json", "x-api-key": FAKE_ANTHROPIC_KEY,
               "authorization": f"Bearer {FAKE_OPENAI_KEY}"}
    with httpx.Client(timeout=30) as client:
        client.post(proxy.url + PATHS[fmt], content=raw, headers=headers).read()
    return raw


def test_a_policy_set_once_drops_exactly_the_matched_items_in_every_wire_format(tmp_path):
    with proxied(tmp_path, steer=True) as (up, wb, proxy):
        for rule in RULES:
            add_rule(wb, "drop", rule)
        for n, fmt in enumerate(FORMATS):
            post(proxy, fmt, build(fmt))
            assert up.seen[n].body == wire(build(fmt, system0=False, scaffold=False, calls=(2, 3))), fmt
        # a request that holds none of what the rules name goes upstream as it came, not even re-written
        untouched = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hello"}]}
        raw = json.dumps(untouched).encode()
        with httpx.Client(timeout=30) as client:
            client.post(proxy.url + PATHS["openai"], content=raw, headers={"content-type": "application/json"}).read()
        assert up.seen[len(FORMATS)].body == raw
        exchanges = [e for info in wb.sessions.list() for e in settled(wb, info.id)]
        assert len(exchanges) == len(FORMATS) + 1
        # the watch's status line says what the policy will leave out
        assert f"leaves out what the policy drops ({', '.join(r for r in RULES)})" in \
            _watch(wb, exchanges[0].session_id).steering()
        for exchange in exchanges:  # each change the plan records names the rule that made it
            assert all("the policy drops" in c for c in exchange.changes), exchange.changes
            plan = wb.plans.get(exchange.plan_id)
            gone = [i for i in plan.items if not i.included]
            assert all(i.detail.startswith("dropped by the policy (") for i in gone)
            assert len(gone) == len(exchange.changes)


def test_a_drop_of_the_turn_in_progress_s_tool_results_is_held_and_said(tmp_path):
    with proxied(tmp_path, steer=True) as (up, wb, proxy):
        add_rule(wb, "drop", "result:read_file")
        body = build("openai")
        body["messages"] = body["messages"][:-2]  # the turn in progress is the one making the calls
        post(proxy, "openai", body)
        assert up.seen[0].body == wire(body)
        (exchange,) = settled(wb)
        notes = wb.plans.get(exchange.plan_id).notes
        assert any(n.startswith("kept atom:") and "turn in progress works with it" for n in notes), notes


@pytest.mark.parametrize("bad", ["tool:", "kind:nonsense", "group:3", "result:", "system:x"])
def test_a_policy_drop_that_names_nothing_an_item_can_be_is_refused(tmp_path, bad):
    with proxied(tmp_path, steer=True) as (_up, wb, _proxy):
        with pytest.raises(ValueError):
            add_rule(wb, "drop", bad)
        assert wb.proxy_policy.rules() == ()


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_budget_for_tool_results_leaves_out_the_oldest_and_the_preview_is_what_is_sent(tmp_path, fmt):
    with proxied(tmp_path, steer=True) as (up, wb, proxy):
        first = post(proxy, fmt, build(fmt))
        assert up.seen[0].body == first  # no rule set: nothing changes
        (exchange,) = settled(wb)
        atoms = sorted((i for i in wb.plans.get(exchange.plan_id).items if i.kind == "tool_atom"),
                       key=lambda i: i.order)
        assert len(atoms) == 3
        add_rule(wb, "results", str(atoms[1].tokens + atoms[2].tokens))
        preview = preview_steer(wb, exchange.session_id, proxy_steers=True)
        post(proxy, fmt, build(fmt))
        sent = up.seen[1].body
        assert sent == wire(build(fmt, calls=(2, 3)))  # call 1, the oldest, is left out; nothing else changes
        assert preview.steered == sent  # the preview is exactly what went
        second = settled(wb, exchange.session_id)[-1]
        assert preview.changes == second.changes and len(second.changes) == 1
        assert "oldest left out first" in second.changes[0]
        assert not [line for line in preview.diff if line.startswith("+") and not line.startswith("+++")]
        before = sum(t for _h, t in cache_blocks(parse_request(fmt, first, wb.tokenizer, PATHS[fmt])))
        after = sum(t for _h, t in cache_blocks(parse_request(fmt, sent, wb.tokenizer, PATHS[fmt])))
        assert preview.cost.saved_tokens == before - after > 0


def test_a_dropped_reminder_leaves_the_users_words_beside_it(tmp_path):
    with proxied(tmp_path, steer=True) as (up, wb, proxy):
        post(proxy, "anthropic", build("anthropic"))
        (exchange,) = settled(wb)
        plan = wb.plans.get(exchange.plan_id)
        (skills,) = [i for i in plan.items if i.kind == "skill_list"]
        wb.proxy.drop(exchange.session_id, skills.id)  # this conversation's own drop, of a past turn's reminder
        post(proxy, "anthropic", build("anthropic"))
        expected = build("anthropic")
        expected["messages"][0]["content"][1]["text"] = CLAUDE_ENV + ASK
        assert up.seen[1].body == wire(expected)
