"""`ctxbench chat` speaking Anthropic Messages to a scripted upstream on loopback (``tests/upstream_server.py``):

- every included plan item's text reaches the upstream byte for byte, as ``system`` blocks or content blocks;
- the ``cache_control`` breakpoints sit where ``anthropic_wire.place_breakpoints`` puts them (the end of the
  prompt, the last message shared with the previous request, the system run), never more than four;
- the cache reads and writes the upstream reports are what the chat's JSON, ``ctxbench show`` and the stored usage
  report say, priced from the price table (a write at 1.25x, a read at 0.1x of the input price);
- the API key reaches the upstream and is never written to the store, not even when the upstream echoes it.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from click.testing import CliRunner

from ctxbench.cli import main
from ctxbench.config import Config, LLMConfig
from ctxbench.llm.anthropic_wire import END, SHARED, SYSTEM, PreviousRequest, place_breakpoints
from ctxbench.llm.tools import offered_tools
from ctxbench.service.workbench import Workbench
from upstream_server import Answer, Upstream

MODEL = "claude-haiku-4-5"
KEY = "sk-ant-test-0123456789-never-stored"


def _env(upstream: Upstream, **extra: str) -> dict[str, str]:
    return {"CTXBENCH_CONFIG": os.devnull, "CTXBENCH_LLM_PROVIDER": "anthropic", "CTXBENCH_LLM_BASE_URL": upstream.url,
            "CTXBENCH_LLM_MODEL": MODEL, "ANTHROPIC_API_KEY": KEY, **extra}


def _chat(upstream: Upstream, db: Path, message: str, *more: str):
    result = CliRunner().invoke(main, ["chat", message, "--json", "--db", str(db), *more], env=_env(upstream))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _texts(message: dict) -> list[str]:
    """The texts a plan message carries (its content; a tool call's arguments travel as its input)."""
    content = message.get("content")
    return [content] if isinstance(content, str) and content else []


def _sent_texts(body: dict) -> list[str]:
    """Every text the request carries, in order: system blocks, then text and tool_result blocks."""
    out = [b["text"] for b in body.get("system", [])]
    for turn in body["messages"]:
        for block in turn["content"]:
            if block["type"] == "text":
                out.append(block["text"])
            elif block["type"] == "tool_result":
                out.append(block["content"])
    return out


def _marked(body: dict) -> list[dict]:
    blocks = list(body.get("system", [])) + [b for t in body["messages"] for b in t["content"]]
    return [b for b in blocks if "cache_control" in b]


def _block_text(block: dict) -> str:
    return block.get("text", block.get("content", ""))


def test_the_chat_sends_every_plan_item_byte_for_byte_with_breakpoints_at_the_system_the_shared_prefix_and_the_end(tmp_path):
    db = tmp_path / "a.db"
    script = [Answer(text="Let me look.", tool_call=("query_db", {"sql": "SELECT COUNT(*) FROM messages"}),
                     prompt_tokens=1500, completion_tokens=9, cache_write_tokens=1200),
              Answer(text="There is one message.", prompt_tokens=40, completion_tokens=6, cached_tokens=1200,
                     cache_write_tokens=310),
              Answer(text="Rounding is half-even.", prompt_tokens=25, completion_tokens=7, cached_tokens=1510,
                     cache_write_tokens=64)]
    with Upstream(script) as upstream:
        first = _chat(upstream, db, "How many messages are stored?")
        second = _chat(upstream, db, "And how is money rounded?", "--session", first["session_id"])
    plan_ids = first["plan_ids"] + second["plan_ids"]
    assert len(plan_ids) == len(upstream.seen) == 3  # a tool round, its answer, the next turn
    config = Config()
    with Workbench(db, config) as wb:
        plans = [wb.plans.get(p) for p in plan_ids]
    previous = None
    for n, (plan, seen) in enumerate(zip(plans, upstream.seen)):
        assert seen.path == "/v1/messages"
        body = seen.json()
        messages = plan.messages()
        # every included item's text, byte for byte, in the plan's order
        assert _sent_texts(body) == [t for m in messages for t in _texts(m)]
        assert body["model"] == MODEL and body["stream"] is True
        tools = tuple(offered_tools(config.llm, 1 if n == 1 else 0))
        assert [t["name"] for t in body["tools"]] == [t["function"]["name"] for t in tools]
        # the breakpoints: where the pure function puts them for this plan and the request before
        items = sorted(plan.included, key=lambda i: i.order)
        points = place_breakpoints(messages, tools, items=items, previous=previous)
        marked = _marked(body)
        assert 0 < len(marked) == len(points) <= 4
        assert all(b["cache_control"] == {"type": "ephemeral"} for b in marked)
        assert [_block_text(b) for b in marked] == [_texts(messages[p.message])[-1] if _texts(messages[p.message])
                                                    else None for p in points]
        assert points[0].reason == SYSTEM and points[0].message == 0 and points[-1].reason == END
        assert marked[0] is body["system"][0] and marked[-1] is body["messages"][-1]["content"][-1]
        previous = PreviousRequest(tuple(messages), tools)
    # what each request marks, by text: the system prompt, the last message it shares with the request before it
    # (the tool round's answer: the user's question; the next turn: the tool result), the end of its prompt
    system_prompt = plans[0].messages()[0]["content"]
    with Workbench(db, config) as wb:
        result = next(m for m in wb.messages.all(first["session_id"]) if m.role == "tool").content
    assert [_block_text(b) for b in _marked(upstream.seen[0].json())] == [system_prompt,
                                                                        "How many messages are stored?"]
    assert [_block_text(b) for b in _marked(upstream.seen[1].json())] == [system_prompt,
                                                                        "How many messages are stored?", result]
    assert [_block_text(b) for b in _marked(upstream.seen[2].json())] == [system_prompt, result,
                                                                        "And how is money rounded?"]
    tool_use = next(b for t in upstream.seen[1].json()["messages"] for b in t["content"] if b["type"] == "tool_use")
    assert tool_use["id"] == "toolu_1" and tool_use["input"] == {"sql": "SELECT COUNT(*) FROM messages"}


def test_the_cache_reads_and_writes_shown_are_the_ones_the_upstream_reported(tmp_path):
    db = tmp_path / "a.db"
    answer = Answer(text="Hello.", prompt_tokens=11, completion_tokens=5, cached_tokens=800, cache_write_tokens=200)
    with Upstream([answer]) as upstream:
        data = _chat(upstream, db, "hello there")
    usage = data["usage"]
    reported_prompt = answer.prompt_tokens + answer.cached_tokens + answer.cache_write_tokens
    price = LLMConfig().price_of(MODEL)
    expected_cost = (answer.prompt_tokens * price.input_per_mtok + answer.cache_write_tokens * price.input_per_mtok
                     * 1.25 + answer.cached_tokens * price.input_per_mtok * 0.1
                     + answer.completion_tokens * price.output_per_mtok) / 1_000_000
    assert (usage["cache_read_input_tokens"], usage["cache_creation_input_tokens"]) == (800, 200)
    assert usage["reported_prompt_tokens"] == reported_prompt and usage["reply_tokens"] == 5
    assert usage["cost_usd"] == round(expected_cost, 6)
    with Workbench(db, Config()) as wb:
        (report,) = wb.plans.usage_reports(data["plan_id"])
    assert (report.reported, report.cache_read, report.cache_write, report.completion) == (reported_prompt, 800, 200, 5)
    shown = CliRunner().invoke(main, ["show", data["plan_id"], "--db", str(db)], env={"CTXBENCH_CONFIG": os.devnull})
    assert shown.exit_code == 0, shown.output
    line = next(line for line in shown.stdout.splitlines() if line.startswith("model call:"))
    assert (f"reported {reported_prompt:,} prompt tok (cache read 800 · cache write 200) · reply 5 tok · "
            f"${expected_cost:.4f}") in line
    as_json = CliRunner().invoke(main, ["show", data["plan_id"], "--json", "--db", str(db)],
                                 env={"CTXBENCH_CONFIG": os.devnull})
    (shown_usage,) = json.loads(as_json.stdout)["usage"]
    assert (shown_usage["cache_read_input_tokens"], shown_usage["cache_creation_input_tokens"],
            shown_usage["reported_prompt_tokens"]) == (800, 200, reported_prompt)
    assert shown_usage["cost_usd"] == round(expected_cost, 6)


def test_the_api_key_reaches_the_upstream_and_is_never_written_to_the_store(tmp_path):
    db = tmp_path / "a.db"
    echo = json.dumps({"type": "error", "error": {"type": "authentication_error",
                                                  "message": f"invalid x-api-key {KEY}"}}).encode()
    with Upstream([Answer(text="Fine."), Answer(status=401, error_body=echo)]) as upstream:
        ok = _chat(upstream, db, "first turn")
        failed = CliRunner().invoke(main, ["chat", "second turn", "--session", ok["session_id"], "--db", str(db)],
                                    env=_env(upstream))
    assert failed.exit_code == 1 and "HTTP 401" in failed.output and KEY not in failed.output
    assert "***" in failed.output  # the echoed key is masked in the line
    sent = [s.headers.get("x-api-key") or s.headers.get("authorization", "") for s in upstream.seen]
    assert all(KEY in h for h in sent)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "a.db" for p in files)
    for path in files:
        assert KEY.encode() not in path.read_bytes(), path
