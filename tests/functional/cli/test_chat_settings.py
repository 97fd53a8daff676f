"""``ctxbench chat``: context limit and timeout from env or flags, an empty message, the session id on failure."""
from __future__ import annotations

import os
import re

import pytest
from click.testing import CliRunner
from llm_server import LLMServer, Reply, text

from ctxbench.cli import main
from ctxbench.config import Config, LLMConfig
from ctxbench.llm.providers import ProviderError, resolve_llm_config
from ctxbench.service.workbench import Workbench


def _chat(db, *args, env=None):
    return CliRunner().invoke(main, ["chat", *args, "--db", str(db)],
                              env={"CTXBENCH_CONFIG": os.devnull, **(env or {})})


def test_env_and_flags_set_context_limit_and_timeout():
    env = {"CTXBENCH_LLM_CONTEXT_LIMIT": "4096", "CTXBENCH_LLM_TIMEOUT": "2.5"}
    llm = resolve_llm_config(LLMConfig(), environ=env)
    assert (llm.context_limit, llm.timeout_s) == (4096, 2.5)
    llm = resolve_llm_config(LLMConfig(), environ=env, context_limit=1000, timeout_s=9.0)
    assert (llm.context_limit, llm.timeout_s) == (1000, 9.0)  # flags beat the environment
    assert resolve_llm_config(LLMConfig(), environ={}).context_limit == LLMConfig().context_limit


@pytest.mark.parametrize(("var", "value"), [
    ("CTXBENCH_LLM_CONTEXT_LIMIT", "lots"), ("CTXBENCH_LLM_CONTEXT_LIMIT", "0"), ("CTXBENCH_LLM_CONTEXT_LIMIT", "2.5"),
    ("CTXBENCH_LLM_TIMEOUT", "soon"), ("CTXBENCH_LLM_TIMEOUT", "-1"), ("CTXBENCH_LLM_TIMEOUT", "nan"),
    ("CTXBENCH_LLM_TIMEOUT", "inf"),
])
def test_bad_numbers_in_the_environment_are_refused_naming_the_variable(var, value):
    with pytest.raises(ProviderError, match=re.escape(f"${var}")):
        resolve_llm_config(LLMConfig(), environ={var: value})


def test_bad_environment_number_is_an_exit_2_for_chat(tmp_path):
    result = _chat(tmp_path / "ctx.db", "hi", env={"CTXBENCH_LLM_TIMEOUT": "soon"})
    assert result.exit_code == 2 and "$CTXBENCH_LLM_TIMEOUT must be a number" in result.stderr


@pytest.mark.parametrize("how", ["flag", "env"])
def test_context_limit_reaches_the_turn_and_the_failure_names_the_session(tmp_path, how):
    db = tmp_path / "ctx.db"
    args, env = (["--context-limit", "50"], {}) if how == "flag" else ([], {"CTXBENCH_LLM_CONTEXT_LIMIT": "50"})
    result = _chat(db, "a question that will not fit", *args, env=env)
    assert result.exit_code == 1
    (line,) = result.stderr.strip().splitlines()
    assert "limit of 50" in line and "nothing was stored (the new session was removed)" in line
    first = _chat(db, "hello")  # a session with a turn, then a turn that cannot be sent
    assert first.exit_code == 0, first.output
    with Workbench(db, Config()) as wb:
        (session,) = wb.sessions.list()
    result = _chat(db, "a question that will not fit", "--session", session.id, *args, env=env)
    (line,) = result.stderr.strip().splitlines()
    assert "limit of 50" in line
    session_id = re.search(r"kept in session (s_\w+) but, unanswered, left out of later plans", line).group(1)
    with Workbench(db, Config()) as wb:
        assert session_id == session.id
        assert wb.messages.all(session_id)[-1].content == "a question that will not fit"
        assert [m.role for m in wb.messages.history(session_id)] == ["user", "assistant"]


@pytest.mark.parametrize("how", ["flag", "env"])
def test_timeout_reaches_the_client(tmp_path, how):
    config = tmp_path / "c.toml"
    config.write_text("[llm]\nmax_retries = 0\n")
    db = tmp_path / "ctx.db"
    with LLMServer([Reply(content="too late", delay_s=1.0), text("never")]) as server:
        args = ["--base-url", server.base_url, "--model", "m", "--config", str(config)]
        if how == "flag":
            result = _chat(db, "hi", *args, "--timeout", "0.25")
        else:
            result = _chat(db, "hi", *args, env={"CTXBENCH_LLM_TIMEOUT": "0.25"})
    assert result.exit_code == 1
    assert "timed out after 0.25s" in result.stderr and "nothing was stored" in result.stderr


@pytest.mark.parametrize("message", ["", "   ", "\n\t"])
def test_an_empty_message_is_refused_before_anything_is_stored(tmp_path, message):
    db = tmp_path / "ctx.db"
    result = _chat(db, message)
    assert result.exit_code == 2 and "empty message" in result.stderr
    listed = CliRunner().invoke(main, ["sessions", "--json", "--db", str(db)], env={"CTXBENCH_CONFIG": os.devnull})
    assert listed.stdout.strip() == "[]"


@pytest.mark.parametrize(("flag", "value"), [("--context-limit", "0"), ("--timeout", "0"), ("--timeout", "-2")])
def test_flags_must_be_positive(tmp_path, flag, value):
    result = _chat(tmp_path / "ctx.db", "hi", flag, value)
    assert result.exit_code == 2 and f"Invalid value for '{flag}'" in result.stderr and "range" in result.stderr
