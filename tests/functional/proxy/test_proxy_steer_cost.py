"""Steering that knows the prompt cache: before a drop or pin takes effect, the next request is previewed as a
diff against what the client sent, with where it breaks the provider's cached prefix, the tokens sent again at
the write (or uncached) price, the tokens saved a turn and the turns it takes to pay back; the figures are
those of the request that then goes upstream."""
from __future__ import annotations

import json
import math

from test_proxy import anthropic_client, conversation, openai_client, proxied, settled
from test_proxy_prices import _watch
from upstream_server import Answer

from ctxbench.config import Config, ProxyConfig
from ctxbench.service.proxy.pricing import breakpoints
from ctxbench.service.proxy.steer_cost import preview_steer
from ctxbench.service.proxy.cache_view import cache_blocks
from ctxbench.service.proxy.wire import parse_request
from ctxbench.tokens import get_tokenizer

NO_MINIMUM = Config(proxy=ProxyConfig(cache_min_tokens=0))


def test_the_preview_is_the_request_that_goes_upstream_and_its_cache_figures_are_exact(tmp_path):
    with proxied(tmp_path, steer=True, config=NO_MINIMUM) as (up, wb, proxy):
        client = openai_client(proxy)
        messages = conversation(3)
        client.chat.completions.create(model="gpt-4.1", messages=messages)
        session = wb.proxy.latest_session()
        untouched = preview_steer(wb, session, proxy_steers=True)
        assert not untouched.cost.changed and untouched.diff == () and untouched.steered == untouched.original
        wb.proxy.drop(session, "atom:2:call_2")
        preview = preview_steer(wb, session, proxy_steers=True)
        assert preview.applies and preview.cost.changed
        # the diff removes the call and its result, and nothing else
        removed = [line for line in preview.diff if line.startswith("-") and not line.startswith("---")]
        added = [line for line in preview.diff if line.startswith("+") and not line.startswith("+++")]
        assert any("call_2" in line for line in removed) and not added
        client.chat.completions.create(model="gpt-4.1", messages=messages)  # the client sends it again
        first, second = settled(wb, session)
        assert up.seen[1].body == preview.steered  # what was previewed is what went upstream, byte for byte
        before, after = wb.proxy_cache.get(first.id), wb.proxy_cache.get(second.id)
        cost = preview.cost
        assert cost.break_block == after.prefix_blocks
        assert cost.kept_tokens == after.prefix_tokens  # OpenAI: the longest unchanged prefix stays cached
        assert cost.rewritten_tokens == after.request_tokens - after.prefix_tokens
        assert cost.saved_tokens == before.request_tokens - after.request_tokens > 0
        assert cost.cached_estimate == before.request_tokens and cost.write_price_name == "uncached"
        lines = preview.text(400)
        assert (f"breaks the cache after item {cost.break_block}, at message 6 assistant: " in lines
                and f"~{cost.rewritten_tokens:,} tokens re-read at the uncached price" in lines)
        # gpt-4.1: input 2.00, cache read 0.25 of it
        extra = (cost.kept_tokens * 0.5 + cost.rewritten_tokens * 2.0 - before.request_tokens * 0.5) / 1e6
        per_turn = cost.saved_tokens * 0.5 / 1e6
        assert abs(cost.extra_usd - extra) < 1e-12 and abs(cost.saved_usd_per_turn - per_turn) < 1e-12
        assert cost.payback_turns == math.ceil(extra / per_turn - 1e-9)
        assert (f"saves {cost.saved_tokens:,} tokens a turn, re-writes {cost.rewritten_tokens:,} at the uncached "
                f"price, pays back in {cost.payback_turns} turns") in lines


def _claude_turns() -> dict:
    system = [{"type": "text", "text": "You are Claude Code. " * 40, "cache_control": {"type": "ephemeral"}}]
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "read app.py"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_a", "name": "Read",
                                           "input": {"file_path": "app.py"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "print(1)\n" * 300}]},
        {"role": "assistant", "content": [{"type": "text", "text": "It prints 1."}]},
        {"role": "user", "content": [{"type": "text", "text": "and now?", "cache_control": {"type": "ephemeral"}}]},
    ]
    return {"model": "claude-sonnet-4-5", "max_tokens": 1000, "system": system, "messages": messages,
            "tools": [{"name": "Read", "description": "Read a file. " * 30,
                       "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}}]}


def test_an_anthropic_drop_keeps_the_prefix_up_to_the_breakpoint_before_it_and_rewrites_the_rest(tmp_path):
    with proxied(tmp_path, [Answer(cached_tokens=900)], steer=True, config=NO_MINIMUM) as (up, wb, proxy):
        client = anthropic_client(proxy)
        body = _claude_turns()
        client.messages.create(**body)
        session = wb.proxy.latest_session()
        first = settled(wb, session)[0]
        sent = parse_request("anthropic", up.seen[0].body, get_tokenizer())
        blocks = cache_blocks(sent)
        assert breakpoints(sent) == (1, 6)  # the system block and the last message
        wb.proxy.drop(session, "atom:1:toolu_a")
        preview = preview_steer(wb, session, proxy_steers=True)
        cost = preview.cost
        # tools (block 0), system (1), message 0 (2) unchanged; the atom's call is block 3. The cache holds what
        # the previous request wrote at its breakpoints: only the system's (block 1) lies inside that prefix
        assert cost.break_block == 3
        assert cost.kept_tokens == blocks[0][1] + blocks[1][1]
        assert cost.cached_estimate == sum(t for _h, t in blocks)  # the last message's breakpoint: all of it
        assert cost.reported_cached == 900
        assert cost.write_price_name == "write"
        steered = parse_request("anthropic", preview.steered, get_tokenizer())
        assert cost.rewritten_tokens == sum(t for _h, t in cache_blocks(steered)) - cost.kept_tokens
        text = preview.text(400)
        assert f"re-read at the write price; {cost.kept_tokens:,} stay cached" in text
        assert f"cache now: est. {cost.cached_estimate:,} tok cached · reported 900" in text
        client.messages.create(**body)
        assert up.seen[1].body == preview.steered
        assert json.loads(up.seen[1].body)["messages"][1:] == [body["messages"][3], body["messages"][4]]
        assert first.id < settled(wb, session)[1].id


def test_a_change_after_the_cached_prefix_keeps_the_cache(tmp_path):
    with proxied(tmp_path, steer=True, config=NO_MINIMUM) as (up, wb, proxy):
        client = anthropic_client(proxy)
        body = _claude_turns()
        body["messages"][-1]["content"][0].pop("cache_control")  # the client marked only the system prompt
        client.messages.create(**body)
        session = wb.proxy.latest_session()
        wb.proxy.drop(session, "atom:1:toolu_a")
        cost = preview_steer(wb, session, proxy_steers=True).cost
        assert cost.tail and cost.kept_tokens == cost.cached_estimate
        assert cost.lines()[0].startswith("keeps the cache: the change lies after the cached prefix")


def test_the_watch_says_what_a_drop_costs_and_previews_it(tmp_path):
    with proxied(tmp_path, steer=True, config=NO_MINIMUM) as (up, wb, proxy):
        openai_client(proxy).chat.completions.create(model="gpt-4.1", messages=conversation(3))
        (exchange,) = settled(wb)
        watch = _watch(wb, exchange.session_id)
        said = watch.drop("atom:2:call_2")
        cost = watch.preview().cost
        assert said.startswith("dropped atom:2:call_2 from the next requests: breaks the cache after item "
                               f"{cost.break_block}") and f"pays back in {cost.payback_turns} turns" in said
        text = watch.preview_text()
        assert text.startswith("next request (from request #1) as steering will send:")
        assert "--- sent by the client" in text and "+++ to be sent upstream" in text


async def test_the_steer_preview_command_shows_the_diff_and_its_cost_in_the_watch(tmp_path):
    from tui_helpers import quiet_config, settle, type_and_enter

    from ctxbench.service.options import LaunchOptions
    from ctxbench.tui.app import CtxbenchApp
    from ctxbench.tui.screens.viewer import ViewerScreen

    config = quiet_config()
    with proxied(tmp_path, steer=True, config=config) as (up, wb, proxy):
        openai_client(proxy).chat.completions.create(model="gpt-4.1", messages=conversation(3))
        (exchange,) = settled(wb)
        wb.proxy.drop(exchange.session_id, "atom:2:call_2")
        expected = preview_steer(wb, exchange.session_id, proxy_steers=True).text(config.proxy.preview_diff_lines)
        app = CtxbenchApp(LaunchOptions(db_path=wb.db_path, session_id=exchange.session_id, watch=True,
                                        index_repo=False), config)
        app._disable_notifications = True
        async with app.run_test(size=(130, 45)) as pilot:
            await settle(pilot)
            await type_and_enter(pilot, "/steer preview")
            for _ in range(100):
                if isinstance(app.screen, ViewerScreen):
                    break
                await pilot.pause(0.05)
            assert isinstance(app.screen, ViewerScreen), app.main_screen.slash.last_error
            assert app.screen.body == expected
            assert "breaks the cache after item" in app.screen.body and "-     \"id\": \"call_2\"," in app.screen.body


def test_each_request_shows_what_the_provider_s_rule_caches_beside_what_it_reported(tmp_path):
    script = [Answer(cached_tokens=0), Answer(cached_tokens=777)]
    with proxied(tmp_path, script, config=NO_MINIMUM) as (up, wb, proxy):
        client = anthropic_client(proxy)
        body = _claude_turns()
        body["messages"][-1]["content"][0].pop("cache_control")  # the client marks only its system prompt
        client.messages.create(**body)
        body["messages"] += [{"role": "assistant", "content": "Hello from upstream."},
                             {"role": "user", "content": "and then?"}]
        client.messages.create(**body)
        first, second = settled(wb)
        sent = parse_request("anthropic", up.seen[1].body, get_tokenizer())
        blocks = cache_blocks(sent)
        report = wb.proxy_cache.get(second.id)
        assert report.prefix_blocks == 7  # the naive estimate: the whole first request is an unchanged prefix
        watch = _watch(wb, first.session_id)
        line = watch.poll().cached
        # but Anthropic caches only where the first request wrote a breakpoint: tools and the system prompt
        assert line == (f"cache by the provider's rule (cache_control breakpoints): est. "
                        f"{blocks[0][1] + blocks[1][1]:,} tok cached · reported 777")


def test_a_drop_in_the_uncached_tail_pays_back_at_once(tmp_path):
    with proxied(tmp_path, steer=True, config=NO_MINIMUM) as (up, wb, proxy):
        client = anthropic_client(proxy)
        body = _claude_turns()
        body["messages"][-1]["content"][0].pop("cache_control")
        client.messages.create(**body)
        session = wb.proxy.latest_session()
        wb.proxy.drop(session, "atom:1:toolu_a")
        cost = preview_steer(wb, session, proxy_steers=True).cost
        assert cost.tail and cost.saved_tokens > 0 and cost.extra_usd < 0 and cost.payback_turns == 0
        assert cost.lines()[1].endswith(", pays back at once")


def test_a_pin_added_to_the_system_prompt_says_it_adds_tokens_and_breaks_the_cache_at_the_start(tmp_path):
    with proxied(tmp_path, steer=True, config=NO_MINIMUM) as (up, wb, proxy):
        client = openai_client(proxy)
        messages = conversation(2)
        client.chat.completions.create(model="gpt-4.1", messages=messages)
        session = wb.proxy.latest_session()
        wb.proxy_policy.add("pin", "text:house rules", label="house rules", content="Always run the tests. " * 50)
        preview = preview_steer(wb, session, proxy_steers=True)
        cost = preview.cost
        assert cost.changed and cost.saved_tokens < 0 and cost.break_block == 0 and cost.kept_tokens == 0
        assert cost.break_label.startswith("message 0 system: You are a careful coding assistant.")
        assert cost.lines()[1].startswith(f"adds {-cost.saved_tokens:,} tokens a turn") and "never pays back" in \
            cost.lines()[1]
        client.chat.completions.create(model="gpt-4.1", messages=messages)
        assert up.seen[1].body == preview.steered
        sent = parse_request("openai", up.seen[1].body, get_tokenizer())
        assert cost.rewritten_tokens == sum(t for _h, t in cache_blocks(sent))


def test_pinning_in_the_watch_says_what_adding_the_pin_back_would_cost(tmp_path):
    from ctxbench.service.proxy.steer_passes import PINNED_BLOCK
    from ctxbench.service.proxy.steer_cost import readd_cost
    from ctxbench.tui.screens.overlay_actions import overlay_action
    from ctxbench.tui.screens.overlay_rows import OverlayRow

    with proxied(tmp_path, steer=True, config=NO_MINIMUM) as (up, wb, proxy):
        client = anthropic_client(proxy)
        client.messages.create(**_claude_turns())
        session = wb.proxy.latest_session()
        (exchange,) = settled(wb, session)
        watch = _watch(wb, session)
        plan = wb.plans.get(exchange.plan_id)
        item = next(i for i in plan.items if i.id == "atom:1:toolu_a")
        said = overlay_action("pin_sticky", OverlayRow(item.id, "included", item=item), plan)(watch)
        pin = wb.pins.list(session)[-1]
        cost = readd_cost(wb, session, PINNED_BLOCK.format(label=pin.label, content=pin.content))
        assert said.startswith(f"pinned atom:1:toolu_a sticky ({pin.id}): nothing changes while the client sends it; "
                               "once it stops, adding it back breaks the cache after item 2, at message 0 user:")
        assert f"adds {-cost.saved_tokens:,} tokens a turn" in said  # the system prompt grows by the pinned block
