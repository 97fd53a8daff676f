"""The workbench chatting with a scripted Anthropic Messages upstream on loopback: the usage line under the reply
shows the cache reads and writes the upstream reported, exactly, with the cost they price to."""
from __future__ import annotations

import dataclasses

from ctxbench.config import LLMConfig
from ctxbench.records.turns import cost_text
from ctxbench.tui.widgets.bubbles import UsageLine
from tui_helpers import make_app, quiet_config, settle, type_and_enter
from upstream_server import Answer, Upstream

MODEL = "claude-haiku-4-5"


async def test_the_usage_line_shows_the_cache_reads_and_writes_the_upstream_reported(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    answer = Answer(text="Half-even.", prompt_tokens=37, completion_tokens=4, cached_tokens=1_536, cache_write_tokens=212)
    with Upstream([answer]) as upstream:
        llm = dataclasses.replace(LLMConfig(), provider="anthropic", base_url=upstream.url, model=MODEL, max_retries=0,
                                  timeout_s=10.0, api_key_env="ANTHROPIC_API_KEY")
        app = make_app(tmp_path, config=dataclasses.replace(quiet_config(), llm=llm))
        async with app.run_test(size=(160, 40)) as pilot:
            await settle(pilot)
            main = app.main_screen
            await type_and_enter(pilot, "How is Money rounded?")
            wb, sid = main.session.wb, main.session.session_id
            group = wb.messages.history(sid)[-1].group_id
            text = str(main.chat.block(group).query_one(UsageLine).render())
            (check,) = main.feed.usage_checks
    assert len(upstream.seen) == 1 and "cache_control" in upstream.seen[0].body.decode()
    assert check.reported == answer.prompt_tokens + answer.cached_tokens + answer.cache_write_tokens
    assert "cache read 1,536 · cache write 212" in text
    price = llm.price_of(MODEL)
    cost = (37 * price.input_per_mtok + 212 * price.input_per_mtok * 1.25 + 1_536 * price.input_per_mtok * 0.1
            + 4 * price.output_per_mtok) / 1_000_000
    assert check.cost_usd is not None and abs(check.cost_usd - cost) < 1e-12 and cost_text(cost) in text


def test_the_usage_line_names_the_cache_figures_also_beside_the_mismatch_badge():
    from ctxbench.records.turns import UsageCheck
    from ctxbench.tui.present import usage_text

    ok = UsageCheck("p1", 1000, 1010, "m", 0.0099, False, cache_read=800, cache_write=200)
    bad = UsageCheck("p2", 1000, 2000, "m", 0.5, True, cache_read=0, cache_write=1900)
    assert usage_text((ok,)) == ("est 1,000 · reported 1,010 prompt tok · cache read 800 · cache write 200 · m", False)
    text, mismatch = usage_text((bad,))
    assert mismatch and "cache read 0 · cache write 1,900" in text
