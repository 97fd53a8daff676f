"""Limits that used to be inline numbers are config values (or one named constant) and take effect."""
from __future__ import annotations

import json

import pytest
from llm_server import LLMServer, error

from ctxbench.config import Config, LLMConfig
from ctxbench.llm.client import ChatRequest, LLMError, OpenAIChatClient
from ctxbench.llm.tools import ToolBox
from ctxbench.records.messages import ToolCall
from ctxbench.service.workbench import Workbench
from ctxbench.store import db


@pytest.fixture
def wb(tmp_path):
    with Workbench(tmp_path / "ctx.db", Config()) as bench:
        yield bench


@pytest.mark.parametrize("limit", [1, 3])
def test_retrieve_memos_returns_at_most_the_configured_number(wb, limit):
    sid = wb.new_session()
    box = ToolBox(wb, sid, LLMConfig(retrieve_memos_max=limit))
    for n in range(6):
        assert box.run(ToolCall(f"s{n}", "save_memo", json.dumps({"content": f"ledger rule {n}", "tags": ["ledger"]}))).ok
    for args in ({"query": "ledger rule"}, {"query": "", "tags": ["ledger"]}):
        out = box.run(ToolCall("r", "retrieve_memos", json.dumps(args)))
        assert out.ok and len(out.content.splitlines()) == limit, args


def test_provider_error_text_is_cut_to_the_configured_length(monkeypatch):
    monkeypatch.setenv("CTXBENCH_TEST_KEY", "k")
    long_message = "x" * 500
    with LLMServer([error(400, long_message)]) as server:
        config = LLMConfig(provider="openai", base_url=server.base_url, model="m", max_retries=0,
                           error_excerpt_chars=37, api_key_env="CTXBENCH_TEST_KEY")
        client = OpenAIChatClient(config, "k")
        with pytest.raises(LLMError) as info:
            for _ in client.stream(ChatRequest(messages=({"role": "user", "content": "hi"},))):
                pass
    assert "x" * 37 in str(info.value) and "x" * 38 not in str(info.value)


def test_busy_timeout_is_the_named_constant(tmp_path):
    conn = db.connect(tmp_path / "x.db")
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == round(db.BUSY_TIMEOUT_S * 1000)
    conn.close()
