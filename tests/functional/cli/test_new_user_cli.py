"""Tried as a new user would, on the command line: each case fails before its fix.

A fresh database, read-only commands that must not create one, budgets the mandatory items do not fit,
``chat --mode`` kept for the session, ``retrieve`` on a folder that is not a repository, ``--no-semantic``
named as such, and progress counters only on a terminal.
"""
from __future__ import annotations

import json
import re
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxbench.cli import main
from ctxbench.config import Config
from ctxbench.service.workbench import Workbench

DEMO_REPO = Path(__file__).resolve().parents[3] / "fixtures" / "demo_repo"


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXBENCH_CONFIG", os.devnull)
    monkeypatch.setenv("CTXBENCH_DB", str(tmp_path / "default.db"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path


def small_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    shutil.copytree(DEMO_REPO / "ledgerlite", repo / "ledgerlite")
    (repo / "pyproject.toml").write_text("[project]\nname = 'ledgerlite'\n")
    return repo


# -- plan on a fresh database -------------------------------------------------------------------------

def test_plan_with_a_repo_on_a_fresh_database_plans_an_empty_history(env):
    db = env / "fresh.db"
    repo = small_repo(env)
    result = CliRunner().invoke(main, ["plan", "where is a ledger balanced", "--repo", str(repo), "--db", str(db),
                                       "--no-semantic", "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    kinds = [i["kind"] for i in plan["items"] if i["included"]]
    assert "history_atom" not in kinds and "current_turn" in kinds
    assert "symbol_card" in kinds and "scaffold" in kinds  # the repository was used
    with Workbench(db, Config()) as wb:
        (info,) = wb.sessions.list()
        assert info.id == plan["session_id"] and info.message_count == 0
        assert info.repo == str(repo.resolve())
        assert wb.plans.get(plan["plan_id"]).plan_id == plan["plan_id"]  # stored: show works


def test_plan_on_a_fresh_database_says_it_made_a_session(env):
    db = env / "fresh.db"
    result = CliRunner().invoke(main, ["plan", "what next", "--db", str(db), "--no-semantic"])
    assert result.exit_code == 0, result.output
    assert "no sessions yet: planning with an empty history in a new session s_" in result.stderr
    assert "stored; show it again with: ctxbench show plan_" in result.stdout


def test_a_refused_plan_on_a_fresh_database_leaves_no_session(env):
    db = env / "fresh.db"
    result = CliRunner().invoke(main, ["plan", "what next", "--db", str(db), "--no-semantic", "--pin", "group:7"])
    assert result.exit_code == 2
    assert "group:7" in result.stderr
    with Workbench(db, Config()) as wb:
        assert list(wb.sessions.list()) == []


# -- replay: the tool definitions and the turn numbers ------------------------------------------------

def _session(db: Path, tmp: Path, turns: int = 4) -> str:
    rows = [{"role": "system", "content": "Be brief."}]
    for i in range(turns):
        rows += [{"role": "user", "content": f"Question {i} about module m{i}?"},
                 {"role": "assistant", "content": f"Answer {i}."}]
    path = tmp / "s.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = CliRunner().invoke(main, ["import", str(path), "--db", str(db)])
    assert result.exit_code == 0, result.output
    return result.stdout.split()[-1]


def test_replay_counts_a_dropped_turn_and_can_budget_the_tool_definitions(env):
    db = env / "r.db"
    sid = _session(db, env)
    with Workbench(db, Config()) as wb:
        second = [m for m in wb.messages.all(sid) if m.role == "user"][1]
        wb.messages.drop(sid, second.group_id)
    runner = CliRunner()
    plain = json.loads(runner.invoke(main, ["replay", sid, "--db", str(db), "--json"]).stdout)
    assert [r["turn"] for r in plain] == [1, 2, 3, 4]
    assert [r["dropped"] for r in plain] == [False, True, False, False]
    assert plain[1]["query"] == second.content
    tools = json.loads(runner.invoke(main, ["replay", sid, "--db", str(db), "--json", "--tools"]).stdout)
    with Workbench(db, Config()) as wb:
        from ctxbench.service.model import offered_tools_tokens

        offered = offered_tools_tokens(Config(), wb.tokenizer)
    assert offered > 0
    assert all(t["sections"]["system"] == p["sections"]["system"] + offered for t, p in zip(tools, plain))
    table = runner.invoke(main, ["replay", sid, "--db", str(db)])
    assert table.exit_code == 0 and "(dropped since)" in table.stdout.splitlines()[2]


# -- a budget the mandatory items do not fit -----------------------------------------------------------

def test_chat_with_a_budget_below_the_mandatory_items_is_refused_and_nothing_is_sent(env):
    db = env / "c.db"
    runner = CliRunner()
    result = runner.invoke(main, ["chat", "hello there", "--budget", "1", "--db", str(db)])
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: not sent: mandatory items need ") and "but the budget is 1" in line
    assert "tool definitions" in line and "system prompt" in line and "raise the budget" in line
    assert result.stdout == ""  # no reply: the offline model was never called
    with Workbench(db, Config()) as wb:
        assert list(wb.sessions.list()) == []  # a new session with nothing in it is not kept

    first = runner.invoke(main, ["chat", "hello there", "--db", str(db), "--json"])
    sid = json.loads(first.stdout)["session_id"]
    again = runner.invoke(main, ["chat", "and again", "--session", sid, "--budget", "100", "--db", str(db)])
    assert again.exit_code == 2 and "not sent:" in again.stderr
    with Workbench(db, Config()) as wb:
        calls = wb.traces.calls(session_id=sid)
        assert [c.status for c in calls] == ["ok", "failed"]  # the refused turn reached no model
        assert "not sent:" in calls[-1].error


# -- budget = "auto" and the cost of a turn -----------------------------------------------------------

def _loopback_chat(server, db, config, *more):
    return CliRunner().invoke(main, ["chat", *more, "--db", str(db), "--base-url", server.base_url,
                                     "--api-key-env", "CTXBENCH_TEST_KEY", "--config", str(config)],
                              env={"CTXBENCH_TEST_KEY": "k"})


def test_an_auto_budget_is_the_context_limit_minus_the_reply_reserve(env):
    from llm_server import LLMServer, text

    db, config = env / "a.db", env / "auto.toml"
    config.write_text('[planner]\ndefault_budget = "auto"\n')
    with LLMServer([text("one"), text("two"), text("three")]) as server:
        first = _loopback_chat(server, db, config, "hi", "--model", "m", "--context-limit", "20000",
                               "--max-reply-tokens", "1500", "--json")
        config.write_text('[planner]\ndefault_budget = "auto"\nreply_reserve = 3000\n')
        second = _loopback_chat(server, db, config, "hi", "--model", "m", "--context-limit", "20000", "--json")
        config.write_text('[planner]\ndefault_budget = "auto"\n[llm]\ncontext_limit = 64000\n')
        third = _loopback_chat(server, db, config, "hi", "--model", "m", "--json")
    budgets = []
    with Workbench(db, Config()) as wb:
        for result in (first, second, third):
            assert result.exit_code == 0, result.output
            budgets.append(wb.plans.get(json.loads(result.stdout)["plan_id"]).budget)
    assert budgets == [20000 - 1500, 20000 - 3000, 64000 - 4096]  # the reserve: reply_reserve, else the reply cap


def test_a_wrong_auto_budget_is_named():
    from ctxbench.config import ConfigError, config_from

    for value, says in (("big", "expected a whole number or one of 'auto', got a string (\"big\")"),
                        (0, "must be greater than 0, got 0")):
        with pytest.raises(ConfigError, match="planner.default_budget: " + re.escape(says)):
            config_from({"planner": {"default_budget": value}})


def test_the_cost_of_a_turn_is_shown_for_a_model_with_a_known_price_only(env):
    from llm_server import ENCODING, LLMServer, text, tool_call

    db, config = env / "c.db", env / "prices.toml"
    config.write_text('[[llm.prices]]\nname = "house-model"\ninput_per_mtok = 1.0\noutput_per_mtok = 2.0\n')
    script = [text("Priced answer."), tool_call("manage_scratchpad", {"action": "read"}), text("Two calls."),
              text("Unpriced answer.")]
    with LLMServer(script) as server:
        known = _loopback_chat(server, db, config, "hi", "--model", "gpt-4o-mini", "--json")
        own = _loopback_chat(server, db, config, "use a tool", "--model", "house-model")
        unknown = _loopback_chat(server, db, config, "hi", "--model", "llama3", "--json")
        payloads, reported = server.payloads(), list(server.reported)
    assert known.exit_code == own.exit_code == unknown.exit_code == 0, (known.output, own.output, unknown.output)
    usage = json.loads(known.stdout)["usage"]
    prompt, reply = usage["reported_prompt_tokens"], usage["reply_tokens"]
    assert prompt > 0 and reply > 0
    assert usage["cost_usd"] == round((prompt * 0.15 + reply * 0.60) / 1_000_000, 6)  # gpt-4o-mini's list price
    assert len(payloads) == 4
    # two calls (a tool round), both priced by the config's own entry: $1 a million prompt tokens, $2 reply tokens
    import tiktoken

    from ctxbench.records.turns import cost_text

    enc = tiktoken.get_encoding(ENCODING)
    replies = [len(enc.encode(json.dumps({"action": "read"}))), len(enc.encode("Two calls."))]
    expected = (reported[1] + reported[2] + 2 * sum(replies)) / 1_000_000
    assert f" · cost {cost_text(expected)} (continue with" in own.stderr.strip().splitlines()[-1]
    assert json.loads(unknown.stdout)["usage"]["cost_usd"] is None  # no price: no cost, never a guess


# -- chat --mode is kept for the session ----------------------------------------------------------------

def test_chat_mode_and_budget_are_kept_for_the_session_but_a_refused_budget_is_not(env):
    db = env / "m.db"
    runner = CliRunner()
    first = runner.invoke(main, ["chat", "first", "--mode", "heavy", "--budget", "6000", "--db", str(db)])
    assert first.exit_code == 0, first.output
    assert "mode heavy and budget 6000 kept for the session" in first.stderr
    sid = first.stderr.split("session ")[1].split()[0]
    second = json.loads(runner.invoke(main, ["chat", "second", "--session", sid, "--db", str(db), "--json"]).stdout)
    refused = runner.invoke(main, ["chat", "third", "--session", sid, "--budget", "5", "--db", str(db)])
    assert refused.exit_code == 2
    with Workbench(db, Config()) as wb:
        plan = wb.plans.get(second["plan_id"])
        assert (plan.mode, plan.budget) == ("heavy", 6000)  # the next turn plans as the first one did
        assert (wb.settings(sid).mode, wb.settings(sid).budget) == ("heavy", 6000)  # 5 was refused, not kept


# -- read-only commands create nothing -------------------------------------------------------------------

def test_commands_that_read_what_is_stored_create_no_folder_and_no_database(env):
    folder = env / "new" / "dir"
    db = folder / "x.db"
    runner = CliRunner()
    listing = runner.invoke(main, ["sessions", "--db", str(db)])
    assert listing.exit_code == 0 and f"no sessions: there is no database at {db} yet" in listing.stdout
    assert json.loads(runner.invoke(main, ["sessions", "--db", str(db), "--json"]).stdout) == []
    for args, unknown in ((["show", "plan_x"], "unknown plan 'plan_x'"),
                          (["diff", "plan_a", "plan_b"], "unknown plan 'plan_a'"),
                          (["replay", "s_x"], "unknown session 's_x'"),
                          (["export", "s_x"], "unknown session 's_x'"),
                          (["branch", "list", "s_x"], "unknown session 's_x'"),
                          (["branch", "switch", "s_x", "main"], "unknown session 's_x'"),
                          (["compact", "s_x"], "unknown session 's_x'")):
        result = runner.invoke(main, [*args, "--db", str(db)])
        assert result.exit_code == 2, (args, result.output)
        assert result.stderr.strip() == (f"error: {unknown}: there is no database at {db} (nothing has been stored "
                                         "there yet)"), args
    assert not (env / "new").exists()  # not even the folder
    default = Path(os.environ["CTXBENCH_DB"])
    assert runner.invoke(main, ["sessions"]).exit_code == 0 and not default.exists()


# -- retrieve on a folder that is not a repository ----------------------------------------------------------

def test_retrieve_refuses_the_home_folder_and_a_folder_without_source_files_and_announces_a_first_index(env):
    from ctxbench.codegraph.index import indexed_roots

    home = env / "home" / "someone"
    (home / "notes").mkdir(parents=True)
    (home / "notes" / "todo.md").write_text("buy milk\n")
    (home / "project.py").write_text("def f():\n    return 1\n")
    db = env / "r.db"
    runner = CliRunner()

    def retrieve(repo):
        return runner.invoke(main, ["retrieve", "where is f", "--repo", str(repo), "--db", str(db), "--no-semantic"],
                             env={"HOME": str(home)})

    for folder, says in ((home, "is your home folder"), (home.parent, "is a folder above your home folder"),
                         (home / "notes", "holds no source files ctxbench reads")):
        result = retrieve(folder)
        assert result.exit_code == 2, result.output
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith(f"error: {folder.resolve()} ") and says in line
    with Workbench(db, Config()) as wb, wb.connection() as conn:
        assert indexed_roots(conn) == []  # nothing was indexed

    repo = small_repo(env)
    first, again = retrieve(repo), retrieve(repo)
    assert first.exit_code == again.exit_code == 0, first.output
    files = len(list((repo / "ledgerlite").glob("*.py")))
    assert f"{repo.resolve()} is not indexed yet: indexing its {files} source files first" in first.stderr
    assert "not indexed yet" not in again.stderr  # indexed before: incremental, nothing to announce


# -- --no-semantic says off, not "not available" ---------------------------------------------------------

def test_no_semantic_says_semantic_search_is_off(env):
    repo, db = small_repo(env), env / "s.db"
    runner = CliRunner()
    retrieved = json.loads(runner.invoke(main, ["retrieve", "where is a ledger balanced", "--repo", str(repo),
                                                "--db", str(db), "--no-semantic", "--json"]).stdout)
    assert retrieved["notes"] == ["semantic search off (--no-semantic)"] and not retrieved["semantic_available"]
    planned = json.loads(runner.invoke(main, ["plan", "where is a ledger balanced", "--repo", str(repo),
                                              "--db", str(db), "--no-semantic", "--json"]).stdout)
    assert "retrieval: semantic search off (--no-semantic)" in planned["notes"]
    assert not any("not available" in n for n in planned["notes"])
    below = [i for i in planned["items"] if i["reason"] == "below_threshold"]
    assert all("semantic search not available" not in i["detail"] for i in below)


# -- progress counters only on a terminal ----------------------------------------------------------------

def test_progress_counters_are_not_printed_when_stderr_is_not_a_terminal(env):
    import subprocess
    import sys

    repo, db = small_repo(env), env / "p.db"
    run = subprocess.run([sys.executable, "-m", "ctxbench", "retrieve", "ledger balance", "--repo", str(repo),
                          "--db", str(db), "--no-semantic"], capture_output=True, text=True,
                         env={**os.environ, "CTXBENCH_CONFIG": os.devnull}, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[0] == "note: semantic search off (--no-semantic)"
    # stderr is a pipe: the one-line note of a first index, and no "walk: 1/1", "parse: 8/8" counters
    assert run.stderr.splitlines() == [line for line in run.stderr.splitlines() if "is not indexed yet" in line]
    assert len(run.stderr.splitlines()) == 1


def test_progress_counters_update_in_place_on_a_terminal():
    import io

    from ctxbench.cli.repo_support import StderrProgress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Terminal()
    progress = StderrProgress(out, min_interval=0.0)
    progress("parse", 4, 8)
    progress("parse", 8, 8)
    progress.close()
    assert out.getvalue() == "\rparse: 4/8\rparse: 8/8\n"
