"""``ctxbench policy``: rules set once on the command line steer every proxied request of every client; a bad
rule is one line and nothing stored; ``policy slim`` shows what leaving out the never-called tool definitions
saves and costs before it sets anything, and a request slimmed of all its tools is still one the upstream takes."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_proxy import proxied, settled
from test_proxy_anatomy import CLAUDE_SKILLS
from test_proxy_policy_drops import post, wire

from ctxbench.cli import main


@pytest.fixture(autouse=True)
def _no_user_config(monkeypatch):
    monkeypatch.setenv("CTXBENCH_CONFIG", os.devnull)


def policy(db: Path, *args: str):
    return CliRunner().invoke(main, ["policy", *args, "--db", str(db)])


def test_rules_set_on_the_command_line_steer_every_proxied_request(tmp_path):
    db = tmp_path / "ctx.db"
    assert policy(db, "drop", "kind:skill_list").output.startswith("#1 drop kind:skill_list from every request")
    assert policy(db, "pin", "Money is rounded half up.", "--label", "rounding").output.startswith("#2 pin rounding")
    assert policy(db, "results", "50000").output.startswith("#3 results 50,000 tok")
    listed = policy(db, "list").output.splitlines()
    assert [line.split()[0] for line in listed] == ["#1", "#2", "#3"]
    with proxied(tmp_path, steer=True) as (up, _wb, proxy):
        body = {"model": "claude-house", "max_tokens": 10, "system": "sys", "messages": [
            {"role": "user", "content": [{"type": "text", "text": CLAUDE_SKILLS + "\nhello"}]}]}
        post(proxy, "anthropic", body)
        expected = dict(body, system="sys\n\n[pinned by the user in ctxbench: rounding]\nMoney is rounded half up.",
                        messages=[{"role": "user", "content": [{"type": "text", "text": "hello"}]}])
        assert up.seen[0].body == wire(expected)
    assert policy(db, "remove", "2").output == "removed policy rule 2\n"
    assert policy(db, "remove", "2").exit_code == 2


@pytest.mark.parametrize("args, words", [
    (("drop", "group:3"), "a policy drops tool:NAME | result:TOOL | kind:KIND | system:N"),
    (("drop", "kind:todos"), "unknown kind 'todos'"),
    (("results", "lots"), "results is a number of tokens"),
    (("mode", "turbo"), "unknown mode 'turbo'"),
    (("pin", "  "), "a pinned text needs some text"),
])
def test_a_bad_rule_is_one_line_and_nothing_is_stored(tmp_path, args, words):
    db = tmp_path / "ctx.db"
    result = policy(db, *args)
    assert result.exit_code == 2 and result.output.count("\n") == 1 and words in result.output, result.output
    assert "no policy" in policy(db, "list").output


def test_slim_shows_the_saving_and_the_cache_cost_first_and_sets_only_when_asked(tmp_path):
    db = tmp_path / "ctx.db"
    tools = [{"type": "function", "function": {"name": name, "description": f"{name}. " * 40,
                                               "parameters": {"type": "object", "properties": {}}}}
             for name in ("read_file", "web_search")]
    body = {"model": "gpt-4.1", "tool_choice": "auto", "parallel_tool_calls": True, "tools": tools,
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello"}]}
    with proxied(tmp_path, steer=True) as (up, wb, proxy):
        post(proxy, "openai", body)
        settled(wb)
        shown = policy(db, "slim")
        assert shown.exit_code == 0, shown.output
        lines = shown.output.splitlines()
        assert "2 tool definitions never called" in lines[0] and "read_file, web_search" in lines[0]
        assert any(line.strip().startswith("saves ") for line in lines)  # the saving, and what the cache pays
        assert any("cache" in line for line in lines[1:])
        assert lines[-1] == "nothing set: run again with --yes to leave them out"
        post(proxy, "openai", body)
        assert up.seen[1].body == wire(body)  # nothing set: nothing changes
        assert policy(db, "slim", "--yes").output.splitlines()[-1].startswith("#1 drop tool:* from every request")
        post(proxy, "openai", body)
        # every tool left out: the list goes, and with it the options the upstream takes only beside tools
        without = {k: v for k, v in body.items() if k not in ("tools", "tool_choice", "parallel_tool_calls")}
        assert up.seen[2].body == wire(without)
        assert json.loads(up.seen[2].body)["messages"] == body["messages"]


def test_slim_with_no_proxied_conversation_says_so(tmp_path):
    db = tmp_path / "ctx.db"
    policy(db, "list")  # the store exists, with no conversation in it
    result = policy(db, "slim")
    assert result.exit_code == 2 and "no recorded request" in result.output
