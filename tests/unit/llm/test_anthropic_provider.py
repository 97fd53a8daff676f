"""Choosing the Anthropic provider, reading its streamed usage, and pricing a call with cache reads and writes."""
from __future__ import annotations

import pytest

from ctxbench.config import LLMConfig, ModelPrice
from ctxbench.llm.anthropic_client import AnthropicChatClient
from ctxbench.llm.client import _Assembly
from ctxbench.llm.providers import ProviderError, describe, make_client, resolve_llm_config
from ctxbench.llm.reflection import check_usage


def test_the_anthropic_provider_reads_its_own_key_variable_and_needs_a_model():
    llm = resolve_llm_config(LLMConfig(), environ={"CTXBENCH_LLM_PROVIDER": "anthropic",
                                                   "CTXBENCH_LLM_MODEL": "claude-haiku-4-5"})
    assert (llm.provider, llm.api_key_env) == ("anthropic", "ANTHROPIC_API_KEY")
    assert resolve_llm_config(LLMConfig(provider="anthropic", model="m", api_key_env="MY_KEY"),
                              environ={}).api_key_env == "MY_KEY"
    with pytest.raises(ProviderError, match="anthropic provider needs a model name"):
        resolve_llm_config(LLMConfig(provider="anthropic"), environ={})
    with pytest.raises(ProviderError, match="is not an http"):
        resolve_llm_config(LLMConfig(provider="anthropic", model="m", base_url="localhost:1"), environ={})
    assert describe(llm) == "claude-haiku-4-5 at api.anthropic.com (key from $ANTHROPIC_API_KEY)"


def test_make_client_gives_the_anthropic_client_without_storing_the_key(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-xyz")
    client = make_client(LLMConfig(provider="anthropic", model="m", api_key_env="ANTHROPIC_API_KEY"))
    assert isinstance(client, AnthropicChatClient) and client.provider == "anthropic"
    assert "sk-ant-xyz" not in repr(client.config)


class _Obj:
    def __init__(self, **fields):
        self.__dict__.update(fields)


def test_a_later_usage_report_replaces_the_counts_and_the_prompt_is_their_sum():
    assembly = _Assembly()
    client = AnthropicChatClient.__new__(AnthropicChatClient)
    start = _Obj(type="message_start", message=_Obj(model="claude-x", usage=_Obj(
        input_tokens=10, cache_read_input_tokens=900, cache_creation_input_tokens=None, output_tokens=1)))
    list(client._absorb(start, assembly))
    assert (assembly.usage.prompt_tokens, assembly.usage.cache_read_tokens, assembly.usage.cache_write_tokens) == \
        (910, 900, None)
    delta = _Obj(type="message_delta", delta=_Obj(stop_reason="end_turn"), usage=_Obj(
        input_tokens=None, cache_read_input_tokens=900, cache_creation_input_tokens=50, output_tokens=12))
    list(client._absorb(delta, assembly))
    usage = assembly.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == \
        (960, 12, 900, 50)
    assert assembly.finish_reason == "end_turn" and assembly.model == "claude-x"


def test_a_call_is_priced_with_its_cache_reads_and_writes_at_their_share_of_the_input_price():
    price = ModelPrice("m", 3.0, 15.0)  # write 1.25x, read 0.1x
    check = check_usage("p", 1000, 1010, "m", 0.05, completion=5, price=price, cache_read=800, cache_write=200)
    assert check.cost_usd == pytest.approx((10 * 3.0 + 200 * 3.75 + 800 * 0.3 + 5 * 15.0) / 1_000_000)
    assert check.cache_text == "cache read 800 · cache write 200"
    plain = check_usage("p", 1000, 1010, "m", 0.05, completion=5, price=price)
    assert plain.cost_usd == pytest.approx((1010 * 3.0 + 5 * 15.0) / 1_000_000) and plain.cache_text == ""


def test_a_recorded_call_whose_plan_is_gone_leaves_no_previous_request(tmp_path):
    from ctxbench.config import Config
    from ctxbench.llm.loop import TurnRunner
    from ctxbench.service.workbench import Workbench

    with Workbench(tmp_path / "w.db", Config()) as wb:
        sid = wb.new_session("t", None)
        runner = TurnRunner(wb, AnthropicChatClient(LLMConfig(provider="anthropic", model="m"), None))
        assert runner._previous_request(sid) is None  # no call yet
        wb.traces.record_call(plan_id="plan_gone", session_id=sid, group_id=1, round=0, provider="anthropic",
                              model="m", status="ok")
        assert runner._previous_request(sid) is None
