"""Prices, not just tokens: each proxied request is priced from the usage the provider billed (uncached input,
cache writes of the 5-minute and the 1-hour cache, cache reads, output) and the model's entry in the price
table, and the watch shows the price beside the tokens."""
from __future__ import annotations

from test_proxy import anthropic_client, openai_client, proxied, settled
from test_proxy_anatomy import claude_code_body
from upstream_server import Answer

from ctxbench.config import Config, LLMConfig, ModelPrice, config_from
from ctxbench.records.proxy import PlanDiff
from ctxbench.records.proxy_cost import BilledUsage
from ctxbench.records.views import PlanView
from ctxbench.service.options import LaunchOptions
from ctxbench.service.proxy.session import ProxyWatchSession
from ctxbench.tui.watch import exchange_note


def _watch(wb, session: str) -> ProxyWatchSession:
    """The watch's session on ``wb``'s database (closed with the test's workbench: it holds no lock)."""
    watch = ProxyWatchSession(LaunchOptions(db_path=wb.db_path, session_id=session, watch=True, index_repo=False),
                              wb.config)
    watch.open()
    return watch


def test_a_dated_model_name_is_priced_by_the_longest_entry_it_starts_with():
    llm = LLMConfig()
    assert llm.price_for_model("claude-sonnet-4-5-20250929").name == "claude-sonnet-4-5"
    assert llm.price_for_model("gpt-4o-mini-2024-07-18").name == "gpt-4o-mini"
    assert llm.price_for_model("gpt-4o").name == "gpt-4o"
    assert llm.price_for_model("claude-sonnet-4x") is None  # a prefix must end at a "-" or "@"
    assert llm.price_for_model("qwen2.5-coder") is None
    sonnet = llm.price_for_model("claude-sonnet-4-5")
    assert [round(p, 9) for p in (sonnet.cache_write_per_mtok, sonnet.cache_write_1h_per_mtok,
                                  sonnet.cache_read_per_mtok)] == [3.75, 6.0, 0.3]


def test_the_price_table_takes_cache_ratios_per_model_from_the_config():
    config = config_from({"llm": {"prices": [{"name": "house-model", "input_per_mtok": 2.0, "output_per_mtok": 4.0,
                                              "cache_read_ratio": 0.25},
                                             {"name": "gpt-4o", "cache_write_ratio": 1.0}]}})
    house = config.llm.price_for_model("house-model")
    assert (round(house.cache_read_per_mtok, 9), round(house.cache_write_per_mtok, 9)) == (0.5, 2.5)
    gpt = config.llm.price_for_model("gpt-4o")
    assert (gpt.input_per_mtok, gpt.cache_write_ratio, gpt.cache_read_ratio) == (2.5, 1.0, 0.5)


def test_an_anthropic_request_is_priced_from_its_writes_reads_and_output(tmp_path):
    answer = Answer(prompt_tokens=200, cache_write_tokens=600, cache_write_1h_tokens=400, cached_tokens=3000,
                    completion_tokens=50)
    with proxied(tmp_path, [answer]) as (up, wb, proxy):
        body = dict(claude_code_body(), model="claude-sonnet-4-5-20250929", max_tokens=1000)
        anthropic_client(proxy).messages.create(**{k: v for k, v in body.items() if k != "stream"})
        (exchange,) = settled(wb)
        assert wb.proxy_billing.usage(exchange.id) == BilledUsage(200, 600, 400, 3000, 50)
        watch = _watch(wb, exchange.session_id)
        cost = watch.cost(exchange)
        assert cost.price_name == "claude-sonnet-4-5"
        expected = (200 * 3.0 + 600 * 3.75 + 400 * 6.0 + 3000 * 0.3 + 50 * 15.0) / 1e6
        assert abs(cost.total_usd - expected) < 1e-12
        assert abs(cost.uncached_usd - 4200 * 3.0 / 1e6) < 1e-12
        poll = watch.poll()
        assert poll.cost == watch.cost_text(exchange)
        assert poll.cost.startswith(f"cost ${expected:.4f} (claude-sonnet-4-5): in 200 $0.0006 + cache write 1,000 "
                                    f"${(600 * 3.75 + 400 * 6.0) / 1e6:.4f} + cache read 3,000 $0.0009 + out 50 "
                                    f"$0.0008")
        note = str(exchange_note(exchange, PlanDiff(), PlanView(wb.plans.get(exchange.plan_id), None, (), (), None),
                                 poll.cache, poll.cost))
        assert poll.cost in note
        assert poll.cost.endswith(f" · conversation ${expected:.4f} over 1 priced request")


def test_the_watch_adds_up_the_conversation_s_cost(tmp_path):
    script = [Answer(prompt_tokens=1000, completion_tokens=10), Answer(prompt_tokens=3000, cached_tokens=2000,
                                                                       completion_tokens=20)]
    with proxied(tmp_path, script) as (up, wb, proxy):
        client = openai_client(proxy)
        messages = [{"role": "user", "content": "x"}]
        client.chat.completions.create(model="gpt-4o", messages=messages)
        messages += [{"role": "assistant", "content": "Hello from upstream."}, {"role": "user", "content": "y"}]
        client.chat.completions.create(model="gpt-4o", messages=messages)
        first, second = settled(wb)
        watch = _watch(wb, first.session_id)
        one = (1000 * 2.5 + 10 * 10.0) / 1e6
        two = (1000 * 2.5 + 2000 * 1.25 + 20 * 10.0) / 1e6
        assert abs(watch.cost(second).total_usd - two) < 1e-12
        assert watch.cost_text(second).endswith(f" · conversation ${one + two:.4f} over 2 priced requests")
        assert watch.cost_text(first).endswith(f" · conversation ${one:.4f} over 1 priced request")


def test_an_openai_prompt_is_billed_uncached_apart_from_its_cached_tokens(tmp_path):
    with proxied(tmp_path, [Answer(prompt_tokens=5000, cached_tokens=4096, completion_tokens=20)]) as (up, wb, proxy):
        openai_client(proxy).chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "x"}])
        (exchange,) = settled(wb)
        assert wb.proxy_billing.usage(exchange.id) == BilledUsage(904, 0, 0, 4096, 20)
        cost = _watch(wb, exchange.session_id).cost(exchange)
        assert abs(cost.total_usd - (904 * 2.0 + 4096 * 0.5 + 20 * 8.0) / 1e6) < 1e-12
        assert cost.cache_saved_usd > 0


def test_a_model_without_a_price_shows_its_billed_tokens_and_no_cost(tmp_path):
    config = Config(llm=LLMConfig(prices=(ModelPrice("other", 1.0, 1.0),)))
    with proxied(tmp_path, [Answer(prompt_tokens=300, cached_tokens=100)], config=config) as (up, wb, proxy):
        openai_client(proxy).chat.completions.create(model="local-model", messages=[{"role": "user", "content": "x"}])
        (exchange,) = settled(wb)
        watch = _watch(wb, exchange.session_id)
        assert watch.cost(exchange) is None
        text = watch.cost_text(exchange)
        assert text.startswith("billed: in 200 + cache write 0 + cache read 100 + out 7 tok")
        assert "$" not in text


def test_responses_and_gemini_requests_are_priced_with_their_cached_tokens_apart(tmp_path):
    from test_proxy_gemini import WHOLE, gemini_cli_body, post

    answer = Answer(prompt_tokens=4000, cached_tokens=3000, completion_tokens=100)
    with proxied(tmp_path, [answer]) as (up, wb, proxy):
        openai_client(proxy).responses.create(model="gpt-5", input="what does ledger.py do?")
        post(proxy, WHOLE, gemini_cli_body())
        responses, gemini = sorted(_all(wb), key=lambda e: e.id)  # two conversations, one request each
        assert (responses.provider, gemini.provider) == ("responses", "gemini")
        for exchange, price in ((responses, (1.25, 0.125, 10.0)), (gemini, (0.30, 0.075, 2.50))):
            assert wb.proxy_billing.usage(exchange.id) == BilledUsage(1000, 0, 0, 3000, 100)
            cost = _watch(wb, exchange.session_id).cost(exchange)
            assert abs(cost.total_usd - (1000 * price[0] + 3000 * price[1] + 100 * price[2]) / 1e6) < 1e-12


def _all(wb):
    """Every exchange of every proxied conversation, once each has ended."""
    from test_proxy import _sessions

    return [e for s in _sessions(wb) for e in settled(wb, s)]
