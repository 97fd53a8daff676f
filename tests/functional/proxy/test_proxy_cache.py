"""The prompt cache per proxied request: the prefix of the request (tool definitions, system blocks,
messages, as sent upstream) unchanged since the conversation's previous answered request — what a prefix
cache can serve — beside the cached tokens the provider reported."""
from __future__ import annotations

import json

from test_proxy import Capture, anthropic_client, conversation, openai_client, proxied, settled
from test_proxy_anatomy import claude_code_body
from upstream_server import Answer

from ctxbench.service.proxy.cache_view import cache_blocks
from ctxbench.service.proxy.wire import parse_request
from ctxbench.tokens import get_tokenizer


def test_a_growing_conversation_reuses_its_whole_previous_request_as_a_prefix(tmp_path):
    script = [Answer(prompt_tokens=500, cached_tokens=0), Answer(prompt_tokens=200, cached_tokens=2900)]
    with proxied(tmp_path, script) as (up, wb, proxy):
        client = anthropic_client(proxy)
        body = dict(claude_code_body(), max_tokens=1000)
        client.messages.create(**{k: v for k, v in body.items() if k != "stream"})
        session = wb.proxy.latest_session()
        body["messages"] += [{"role": "assistant", "content": "Hello from upstream."},
                             {"role": "user", "content": "and the fix?"}]
        client.messages.create(**{k: v for k, v in body.items() if k != "stream"})
        first, second = settled(wb, session)
        one, two = wb.proxy_cache.get(first.id), wb.proxy_cache.get(second.id)
        assert one.first_request and one.prefix_tokens == 0 and one.reported_cached == 0
        # the second request starts with everything the first one sent: 2 tools, 2 system blocks, 1 message
        assert not two.first_request and two.prefix_blocks == 5
        assert two.prefix_tokens == one.request_tokens < two.request_tokens
        sent = parse_request("anthropic", up.seen[1].body, get_tokenizer())
        assert two.request_tokens == sum(t for _h, t in cache_blocks(sent))
        assert two.reported_cached == 2900 and two.reported_prompt == 3100
        summary = two.summary()
        assert f"unchanged prefix {two.prefix_tokens:,} of {two.request_tokens:,} tok" in summary
        assert "reported cached 2,900 of 3,100" in summary


def test_a_drop_early_in_the_conversation_ends_the_cached_prefix_there(tmp_path):
    with proxied(tmp_path, steer=True) as (up, wb, proxy):
        client = openai_client(proxy)
        messages = conversation(3)
        client.chat.completions.create(model="m", messages=messages)
        session = wb.proxy.latest_session()
        wb.proxy.drop(session, "atom:1:call_1")
        messages += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "next"}]
        client.chat.completions.create(model="m", messages=messages)
        first, second = settled(wb, session)
        report = wb.proxy_cache.get(second.id)
        # system message and the first question stay; the dropped call's message was the third block
        assert report.prefix_blocks == 2
        sent = json.loads(up.seen[1].body)["messages"]
        tok = get_tokenizer()
        assert report.prefix_tokens == sum(
            b[1] for b in cache_blocks(parse_request("openai", json.dumps({"messages": sent[:2]}).encode(), tok)))


def test_the_watch_note_shows_the_estimate_beside_the_reported_figure(tmp_path):
    from ctxbench.records.proxy import CacheReport, PlanDiff
    from ctxbench.tui.watch import exchange_note

    with proxied(tmp_path, [Answer(cached_tokens=40)]) as (up, wb, proxy):
        openai_client(proxy).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        (exchange,) = settled(wb)
        from ctxbench.records.views import PlanView

        view = PlanView(wb.plans.get(exchange.plan_id), None, (), (), None)
        report = wb.proxy_cache.get(exchange.id)
        assert isinstance(report, CacheReport) and report.reported_cached == 40
        note = str(exchange_note(exchange, PlanDiff(), view, report))
        assert "cache: first request: nothing cached yet · reported cached 40 of 1,234" in note
