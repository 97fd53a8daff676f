"""One policy across clients, and drops that wait for the prompt cache: rules set once (drop a tool
definition, pin a text, a Context Mode, a budget) apply to every proxied conversation whatever assistant sends
it, a policy pin comes back after an assistant compacts its history, and a drop held back for the cache
applies only once the cache breaks before it anyway."""
from __future__ import annotations

import json

from test_proxy import TOOLS, anthropic_client, conversation, openai_client, proxied, settled
from test_proxy_prices import _watch

from ctxbench.config import Config, ProxyConfig
from ctxbench.service.proxy.steer_cost import preview_steer


def _tool(name: str) -> dict:
    return {"type": "function", "function": {"name": name, "description": f"{name}.",
                                             "parameters": {"type": "object", "properties": {}}}}


def test_a_policy_set_once_steers_every_assistant(tmp_path):
    summary = "\n".join(f"- step {n}: we changed the rate handling in app/config.py and checked it" for n in range(6))
    from upstream_server import Answer

    with proxied(tmp_path, [Answer(), Answer(), Answer(text=summary), Answer(), Answer()], steer=True) as (up, wb, proxy):
        openai = openai_client(proxy)
        openai.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "hello"}],
                                       tools=[*TOOLS, _tool("mcp__web_search"), _tool("mcp__web_fetch")])
        (first,) = settled(wb)
        watch = _watch(wb, first.session_id)
        assert watch.everywhere("drop", "tool:mcp__*").startswith("#1 drop tool:mcp__* from every request")
        assert "leaves out tool definitions matching 1 pattern" in watch.steering()  # the status line says it
        assert watch.everywhere("mode", "light").startswith("#2 mode light")
        with_text = next(i for i in wb.plans.get(first.plan_id).items if i.id.startswith("group:"))
        said = watch.everywhere("pin", with_text.id, wb.plans.get(first.plan_id))
        assert said.startswith("#3 pin turn 1: hello")

        # another assistant, another conversation: Claude through the Anthropic API, with a long old tool result
        claude = anthropic_client(proxy)
        messages = [{"role": "user", "content": "read app/config.py"},
                    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read",
                                                       "input": {"file_path": "app/config.py"}}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                                  "content": "RATE = 0.07\n" * 400}]},
                    {"role": "assistant", "content": "It sets the rate."},
                    {"role": "user", "content": "and now?"}]
        tools = [{"name": "Read", "input_schema": {"type": "object"}},
                 {"name": "mcp__web_search", "input_schema": {"type": "object"}}]
        claude.messages.create(model="claude-house", max_tokens=10, system="sys", tools=tools, messages=messages)
        sent = json.loads(up.seen[1].body)
        assert [t["name"] for t in sent["tools"]] == ["Read"]  # the policy's drop, in a conversation never steered
        result = sent["messages"][2]["content"][0]["content"]
        assert len(result) < 400 and "cut by ctxbench" in result  # the policy's mode: a past result cut
        assert "[pinned by the user in ctxbench: turn 1: hello]" in sent["system"]  # the policy's pin, added

        # the client compacts its history: the pin comes back, the rules still hold
        claude.messages.create(model="claude-house", max_tokens=10, system="sys", tools=tools,
                               messages=[*messages, {"role": "assistant", "content": summary}])
        claude.messages.create(model="claude-house", max_tokens=10, system="sys", tools=tools,
                               messages=[{"role": "user", "content": f"Summary so far:\n{summary}"}])
        compacted = json.loads(up.seen[3].body)
        assert "[pinned by the user in ctxbench: turn 1: hello]" in compacted["system"]
        assert [t["name"] for t in compacted["tools"]] == ["Read"]
        # the conversation the pin came from still carries the pinned turn: nothing is added there
        openai.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "hello"},
                                                                  {"role": "assistant", "content": "Hi."},
                                                                  {"role": "user", "content": "again"}],
                                       tools=[*TOOLS, _tool("mcp__web_search"), _tool("mcp__web_fetch")])
        origin = json.loads(up.seen[4].body)
        assert "pinned by the user" not in up.seen[4].body.decode()
        assert [t["function"]["name"] for t in origin["tools"]] == ["read_file"]
        assert "#1 drop tool:mcp__*" in watch.policy_text() and "#3 pin" in watch.policy_text()
        assert watch.everywhere("remove", "1") == "removed policy rule 1"


def test_a_conversation_keeps_its_own_mode_over_the_policy(tmp_path):
    with proxied(tmp_path, steer=True) as (up, wb, proxy):
        client = openai_client(proxy)
        messages = conversation(2)
        client.chat.completions.create(model="m", messages=messages)
        session = wb.proxy.latest_session()
        wb.proxy_policy.add("mode", "light")
        wb.update_settings(session, mode="off")  # the user chose Off for this conversation: nothing is cut
        client.chat.completions.create(model="m", messages=messages)
        assert up.seen[1].body == up.seen[0].body


def test_a_held_back_drop_waits_for_the_cache_to_break_anyway(tmp_path):
    config = Config(proxy=ProxyConfig(cache_min_tokens=0))
    with proxied(tmp_path, steer=True, config=config) as (up, wb, proxy):
        client = openai_client(proxy)
        messages = conversation(3)
        client.chat.completions.create(model="gpt-4.1", messages=messages)
        session = wb.proxy.latest_session()
        watch = _watch(wb, session)
        said = watch.drop("atom:2:call_2")
        assert "to keep the cache: /steer defer atom:2:call_2" in said  # the drop breaks the cache: offered
        assert watch.defer("atom:2:call_2").startswith("atom:2:call_2 is dropped once the prompt cache breaks")
        assert not preview_steer(wb, session, proxy_steers=True).cost.changed  # nothing pending: the cache holds
        messages += [{"role": "assistant", "content": "Hello from upstream."}, {"role": "user", "content": "next"}]
        client.chat.completions.create(model="gpt-4.1", messages=messages)
        assert "call_2" in up.seen[1].body.decode()  # the prefix is unchanged: the drop still waits
        assert wb.proxy_policy.deferred(session) == ("atom:2:call_2",)

        wb.proxy.drop(session, "atom:1:call_1")  # an earlier drop breaks the cache before it: now it goes too
        messages += [{"role": "assistant", "content": "Hello from upstream."}, {"role": "user", "content": "more"}]
        client.chat.completions.create(model="gpt-4.1", messages=messages)
        third = json.loads(up.seen[2].body)
        ids = {c["id"] for m in third["messages"] for c in m.get("tool_calls") or ()}
        assert ids == {"call_3"}
        assert wb.proxy_policy.deferred(session) == ()
        last = settled(wb, session)[-1]
        assert any(c.startswith("applied the drop of atom:2:call_2 you held back") for c in last.changes)


def test_a_held_back_drop_applies_once_the_cache_has_expired(tmp_path):
    config = Config(proxy=ProxyConfig(cache_min_tokens=0, cache_ttl_s=0.001))
    with proxied(tmp_path, steer=True, config=config) as (up, wb, proxy):
        client = openai_client(proxy)
        messages = conversation(3)
        client.chat.completions.create(model="gpt-4.1", messages=messages)
        session = wb.proxy.latest_session()
        settled(wb, session)
        wb.proxy_policy.defer(session, "atom:2:call_2")
        messages += [{"role": "assistant", "content": "Hello from upstream."}, {"role": "user", "content": "next"}]
        client.chat.completions.create(model="gpt-4.1", messages=messages)
        assert "call_2" not in up.seen[1].body.decode()


def test_a_policy_budget_is_every_new_conversation_s_limit(tmp_path):
    with proxied(tmp_path, steer=True) as (up, wb, proxy):
        wb.proxy_policy.add("budget", "50000")
        openai_client(proxy).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        (exchange,) = settled(wb)
        assert wb.plans.get(exchange.plan_id).budget == 50_000
        session = exchange.session_id
        wb.update_settings(session, budget=80_000)  # the user's own budget for this conversation wins
        openai_client(proxy).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert wb.plans.get(settled(wb, session)[-1].plan_id).budget == 80_000


def test_a_pin_comes_back_after_codex_compacts_its_history(tmp_path):
    from upstream_server import Answer

    summary = "\n".join(f"- step {n}: we changed the rate handling in app/config.py and checked it" for n in range(6))
    with proxied(tmp_path, [Answer(text=summary), Answer(), Answer()], steer=True) as (up, wb, proxy):
        client = openai_client(proxy)
        first = [{"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "app/config.py\n```python\nRATE = 0.07\n```\nremember this file"}]}]
        client.responses.create(model="gpt-5", instructions="You are Codex.", input=first)
        session = wb.proxy.latest_session()
        wb.proxy_policy.add("pin", "path:app/config.py", label="app/config.py", content="RATE = 0.07")
        # Codex compacts: the next request holds the summary it got instead of the history
        compacted = [{"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": f"Summary of the conversation so far:\n{summary}"}]}]
        client.responses.create(model="gpt-5", instructions="You are Codex.", input=compacted)
        assert wb.proxy.latest_session() == session
        sent = json.loads(up.seen[1].body)
        assert sent["instructions"].startswith("You are Codex.\n\n[pinned by the user in ctxbench: app/config.py]")
        assert sent["instructions"].endswith("RATE = 0.07")
        # the client attaches the file again: it carries it, so nothing is added
        again = [*compacted, {"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "Hello from upstream."}]}, *first]
        client.responses.create(model="gpt-5", instructions="You are Codex.", input=again)
        assert wb.proxy.latest_session() == session
        assert json.loads(up.seen[2].body)["instructions"] == "You are Codex."
