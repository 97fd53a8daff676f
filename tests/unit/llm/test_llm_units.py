"""State parsing, provider config, usage check, references and the offline model."""
from __future__ import annotations

import json

import pytest

from ctxbench.config import LLMConfig
from ctxbench.llm.client import CancelToken, ChatRequest, Completed, LLMCancelled, TextDelta, ToolCallStarted
from ctxbench.llm.offline import OfflineClient
from ctxbench.llm.providers import ProviderError, describe, make_client, resolve_llm_config
from ctxbench.llm.reflection import Vocabulary, check_usage, find_references
from ctxbench.llm.prompts import REBUILD_PROMPT
from ctxbench.records.state import extract_state, state_fields
from ctxbench.llm.tools import TOOL_SCHEMAS, tools_tokens
from ctxbench.tokens import count_messages, get_tokenizer


# -- ### STATE --------------------------------------------------------------------------------

def test_state_block_is_the_last_one_up_to_the_next_heading():
    reply = (
        "Fixed it.\n\n### STATE\nGoal: old\n\nmore text\n\n### STATE\nGoal: fix rounding\nContext: ledger.py\n"
        "Resolved: total()\nTechnical Anchors: port 8080\n\n## Next steps\n- write tests\n"
    )
    block = extract_state(reply)
    assert block == "### STATE\nGoal: fix rounding\nContext: ledger.py\nResolved: total()\nTechnical Anchors: port 8080"
    assert state_fields(block) == {"Goal": "fix rounding", "Context": "ledger.py", "Resolved": "total()",
                                   "Technical Anchors": "port 8080"}


@pytest.mark.parametrize("reply", ["no state here", "### STATE\n\n", "### STATEMENT\nGoal: x", "## Goal: x"])
def test_no_state_block(reply):
    assert extract_state(reply) is None


def test_state_block_ends_at_a_code_fence_and_accepts_heading_variants():
    assert extract_state("```\n## STATE:\nGoal: a\n```\ntrailing") == "### STATE\nGoal: a"


# -- providers --------------------------------------------------------------------------------

def test_flags_override_env_override_file():
    base = LLMConfig(model="from-file")
    env = {"CTXBENCH_LLM_BASE_URL": "http://env/v1", "CTXBENCH_LLM_MODEL": "from-env"}
    resolved = resolve_llm_config(base, environ=env)
    assert (resolved.provider, resolved.base_url, resolved.model) == ("openai", "http://env/v1", "from-env")
    resolved = resolve_llm_config(base, model="from-flag", api_key_env="MY_KEY", environ=env)
    assert (resolved.model, resolved.api_key_env) == ("from-flag", "MY_KEY")
    assert resolve_llm_config(LLMConfig(), environ={}).provider == "offline"


def test_provider_errors_are_clear():
    with pytest.raises(ProviderError, match="needs a model name"):
        resolve_llm_config(LLMConfig(), base_url="http://x/v1", environ={})
    with pytest.raises(ProviderError, match="unknown LLM provider"):
        resolve_llm_config(LLMConfig(), provider="gemini", environ={})


def test_describe_names_the_key_variable_never_the_key(monkeypatch):
    monkeypatch.setenv("SOME_KEY", "sk-abc")
    config = LLMConfig(provider="openai", base_url="http://h/v1", model="m", api_key_env="SOME_KEY")
    line = describe(config)
    assert "SOME_KEY" in line and "sk-abc" not in line
    assert make_client(config).model == "m"
    assert make_client(LLMConfig()).provider == "offline"


# -- usage -------------------------------------------------------------------------------------

@pytest.mark.parametrize("estimated, reported, mismatch", [
    (1000, 1000, False), (1000, 1050, False), (1000, 1053, True), (1060, 1000, True), (1000, None, False),
])
def test_usage_mismatch_over_five_percent(estimated, reported, mismatch):
    check = check_usage("p", estimated, reported, "m", 0.05)
    assert check.mismatch is mismatch
    assert bool(check.badge) is mismatch


# -- references --------------------------------------------------------------------------------

VOCAB = Vocabulary.build(["ledgerlite.ledger.Ledger.total", "ledgerlite.io.load", "ledgerlite.ledger.Ledger"],
                         ["ledgerlite/ledger.py", "ledgerlite/io.py"])


def test_references_by_id_tail_quote_call_path_and_group():
    text = "Look at `Ledger.total`, then call load( on ledger.py; see group 4."
    assert set(find_references(text, VOCAB)) == {
        "card:ledgerlite.ledger.Ledger.total", "card:ledgerlite.io.load",
        "path:ledgerlite/ledger.py", "group:4",
    }


def test_plain_words_are_not_references():
    assert find_references("the total is loaded from the ledger", VOCAB) == ()


# -- offline model -------------------------------------------------------------------------------

def _stream(client, messages, tools=(), cancel=None):
    return list(client.stream(ChatRequest(tuple(messages), tuple(tools)), cancel))


def test_offline_model_is_deterministic_and_reports_usage():
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "what is in my context?"}]
    first = _stream(OfflineClient(), messages)
    assert first == _stream(OfflineClient(), messages)
    done = first[-1]
    assert isinstance(done, Completed) and done.completion.finish_reason == "stop"
    assert "".join(e.text for e in first if isinstance(e, TextDelta)) == done.completion.content
    assert extract_state(done.completion.content).startswith("### STATE\nGoal: what is in my context?")
    tok = get_tokenizer()
    assert done.completion.usage.prompt_tokens == count_messages(tok, messages)


def test_offline_model_calls_the_tools_the_message_asks_for_then_summarises():
    user = {"role": "user", "content": 'go\n!tool query_db {"sql": "SELECT 1"}\n!tool not_offered {}'}
    events = _stream(OfflineClient(), [user], TOOL_SCHEMAS)
    done = events[-1].completion
    assert [(c.name, json.loads(c.arguments)) for c in done.tool_calls] == [("query_db", {"sql": "SELECT 1"})]
    assert [e.name for e in events if isinstance(e, ToolCallStarted)] == ["query_db"]
    tok = get_tokenizer()
    assert done.usage.prompt_tokens == count_messages(tok, [user]) + tools_tokens(TOOL_SCHEMAS, tok)
    follow = [user, {"role": "assistant", "content": None, "tool_calls": [c.to_openai() for c in done.tool_calls]},
              {"role": "tool", "tool_call_id": done.tool_calls[0].id, "content": '{"1": 1}'}]
    final = _stream(OfflineClient(), follow, TOOL_SCHEMAS)[-1].completion
    assert final.tool_calls == () and '- query_db: {"1": 1}' in final.content


def test_offline_model_rebuilds_state_only():
    msgs = [{"role": "user", "content": "port is 8080"}, {"role": "assistant", "content": "noted"},
            {"role": "user", "content": REBUILD_PROMPT}]
    content = _stream(OfflineClient(), msgs)[-1].completion.content
    assert content.startswith("### STATE\nGoal: port is 8080")
    assert extract_state(content) == content


def test_offline_model_stops_when_cancelled():
    cancel = CancelToken()
    stream = OfflineClient(LLMConfig(offline_chunk_chars=2)).stream(
        ChatRequest(({"role": "user", "content": "hello"},)), cancel)
    first = next(stream)
    cancel.cancel()
    with pytest.raises(LLMCancelled) as info:
        list(stream)
    assert info.value.partial == first.text


def test_cancel_token_callbacks_run_once_and_late_registration_fires_at_once():
    token = CancelToken()
    calls = []
    remove = token.on_cancel(lambda: calls.append("a"))
    token.on_cancel(lambda: calls.append("b"))
    remove()
    token.cancel()
    token.on_cancel(lambda: calls.append("late"))
    assert calls == ["b", "late"] and token.cancelled
