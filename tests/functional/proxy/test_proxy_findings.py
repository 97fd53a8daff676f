"""Findings: the watch flags waste in a proxied conversation as it happens — a large tool result sent again and
again, tool definitions never called, the same block twice in one request, an overflow coming — each with the
steer that removes it and what that steer saves and costs."""
from __future__ import annotations

import json
import math

from test_proxy import openai_client, proxied, settled
from test_proxy_calibration import other_tokenizer
from test_proxy_prices import _watch
from upstream_server import Answer

from ctxbench.config import Config, ProxyConfig
from ctxbench.records.proxy import PlanDiff
from ctxbench.records.views import PlanView
from ctxbench.service.proxy.calibration import calibration_for
from ctxbench.service.proxy.findings import findings
from ctxbench.service.proxy.steer_cost import preview_steer
from ctxbench.tui.watch import exchange_note


def _tool(name: str) -> dict:
    return {"type": "function", "function": {"name": name, "description": f"{name} something. " * 20,
                                             "parameters": {"type": "object", "properties": {}}}}


TOOLS = [_tool("read_file"), _tool("write_file"), _tool("run_tests")]


def _source(n: int) -> str:
    return "".join(f"def function_{n}_{i}(value):\n    return value * {i} + {n}  # step {i}\n" for i in range(120))


def _turn(n: int, module: int) -> list[dict]:
    return [{"role": "user", "content": f"question {n}: what does module_{module}.py do?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"call_{n}", "type": "function",
                 "function": {"name": "read_file", "arguments": json.dumps({"path": f"module_{module}.py"})}}]},
            {"role": "tool", "tool_call_id": f"call_{n}", "content": _source(module)},
            {"role": "assistant", "content": f"module_{module}.py computes things."}]


def _run(client, turns: list[tuple[int, int]]) -> list[dict]:
    messages: list[dict] = [{"role": "system", "content": "You are a careful coding assistant."}]
    for n, module in turns:
        messages += [*_turn(n, module), {"role": "user", "content": "go on"}]
        client.chat.completions.create(model="gpt-4.1", messages=messages, tools=TOOLS)
        messages.append({"role": "assistant", "content": "Hello from upstream."})  # the reply, as the client keeps it
    return messages


def test_waste_is_flagged_with_what_its_steer_saves_and_costs(tmp_path):
    config = Config(proxy=ProxyConfig(cache_min_tokens=0, budget=200_000))
    with proxied(tmp_path, steer=True, config=config) as (up, wb, proxy):
        _run(openai_client(proxy), [(1, 1), (2, 2), (3, 1)])  # turn 3 reads module_1.py again
        session = wb.proxy.latest_session()
        found = {f.kind: f for f in findings(wb, session, proxy_steers=True)}
        assert set(found) == {"repeated_result", "unused_tools", "repeated_block"}
        plan = wb.plans.get(settled(wb, session)[-1].plan_id)
        items = {i.id: i for i in plan.included}

        unused = found["unused_tools"]
        assert unused.item_ids == ("tool:write_file", "tool:run_tests")
        assert unused.tokens == items["tool:write_file"].tokens + items["tool:run_tests"].tokens
        assert unused.message == f"2 tool definitions never called in 3 requests ({unused.tokens:,} tok each request)"

        repeated = found["repeated_result"]
        assert repeated.item_ids == ("atom:1:call_1",)  # turn 1's result, in all three requests (turn 3's is new)
        assert repeated.saved_tokens == repeated.tokens == items["atom:1:call_1"].tokens

        twice = found["repeated_block"]
        assert twice.item_ids == ("atom:1:call_1",)  # the older copy of module_1.py; the newest stays

        # what a finding says its steer saves is what the steered request would save, exactly
        cost = preview_steer(wb, session, proxy_steers=True, extra_drops=frozenset(unused.item_ids)).cost
        assert unused.saved_tokens == cost.saved_tokens == unused.tokens
        assert unused.steer == "drop tool:write_file, tool:run_tests: " + "; ".join(cost.lines()[:2])
        assert "breaks the cache after item 1, at tool write_file:" in unused.steer  # tools come first in the cache

        wb.proxy.drop(session, "atom:1:call_1")  # the user takes the advice: the findings it answered go
        assert {f.kind for f in findings(wb, session, proxy_steers=True)} == {"unused_tools"}


def test_an_overflow_coming_is_flagged_before_the_window_is_full(tmp_path):
    config = Config(proxy=ProxyConfig(budget=16_000))
    with proxied(tmp_path, [Answer(prompt_of=other_tokenizer)], steer=True, config=config) as (up, wb, proxy):
        _run(openai_client(proxy), [(1, 1), (2, 2), (3, 3)])
        session = wb.proxy.latest_session()
        exchanges = settled(wb, session)
        sizes = [wb.plans.get(e.plan_id).used_tokens for e in exchanges]
        ratio = calibration_for(wb, "gpt-4.1").ratio  # counted as the provider counts (calibrated)
        used, growth = round(sizes[-1] * ratio), (sizes[-1] - sizes[0]) / 2 * ratio
        assert used < 16_000 < used + growth * 5
        (overflow,) = [f for f in findings(wb, session, proxy_steers=True) if f.kind == "overflow"]
        requests = math.ceil((16_000 - used) / growth)
        assert overflow.message == (f"overflow in ~{requests} request{'s' if requests != 1 else ''}: {used:,} tok "
                                    f"(calibrated) of 16,000, growing {round(growth):,} tok a request")
        items = {i.id: i.tokens for i in wb.plans.get(exchanges[-1].plan_id).included}
        # the past results (each turn's "go on" is a turn of its own: all three reads are past), largest first
        assert set(overflow.item_ids) == {"atom:1:call_1", "atom:3:call_2", "atom:5:call_3"}
        assert [items[i] for i in overflow.item_ids] == sorted((items[i] for i in overflow.item_ids), reverse=True)
        assert overflow.saved_tokens == overflow.tokens > 0


def test_the_watch_note_lists_the_findings(tmp_path):
    with proxied(tmp_path, steer=True, config=Config(proxy=ProxyConfig(cache_min_tokens=0))) as (up, wb, proxy):
        _run(openai_client(proxy), [(1, 1), (2, 2), (3, 1)])
        session = wb.proxy.latest_session()
        settled(wb, session)
        watch = _watch(wb, session)
        poll = watch.poll()
        assert {f.kind for f in poll.findings} == {"repeated_result", "unused_tools", "repeated_block"}
        exchange = poll.update.exchange
        note = str(exchange_note(exchange, PlanDiff(), PlanView(wb.plans.get(exchange.plan_id), None, (), (), None),
                                 poll.cache, poll.cost, poll.counts, poll.findings))
        for finding in poll.findings:
            assert f"finding ({finding.kind}): {finding.message}" in note and finding.steer in note
        assert watch.findings_text().startswith("repeated_result: ")
