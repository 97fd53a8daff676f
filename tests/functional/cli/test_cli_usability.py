"""What a user meets at the command line: every option explains itself, progress does not garble logs."""
import click
from click.testing import CliRunner

from ctxbench import cli


def _all_commands(group: click.Group, ctx: click.Context, prefix: str = ""):
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        path = f"{prefix}{name}"
        yield path, command
        if isinstance(command, click.Group):
            yield from _all_commands(command, click.Context(command, parent=ctx), f"{path} ")


def test_every_option_of_every_command_has_help():
    ctx = click.Context(cli.main)
    missing = [f"{path} {'/'.join(param.opts)}"
               for path, command in [("", cli.main), *_all_commands(cli.main, ctx)]
               for param in command.params
               if isinstance(param, click.Option) and not param.hidden and not (param.help or "").strip()]
    assert missing == []


def test_bench_code_prints_no_progress_counters_when_stderr_is_not_a_terminal(tmp_path, monkeypatch):
    """In a log file or a pipe (no terminal) progress counters are noise: none are printed."""
    from contextlib import contextmanager
    from types import SimpleNamespace

    from ctxbench.bench import code as bench_code
    from ctxbench.cli import repo_support

    @contextmanager
    def fake_opened_retriever(repo, db_path, config, *, semantic, quiet=False, one_shot=False):
        yield object(), SimpleNamespace(root=str(repo), cards=[])

    def fake_run(retriever, queries, *, split, plans, progress, pinned=True):
        for variant in ("fused", "keyword"):
            for done in range(1, 4):
                progress(variant, done, 3)
        raise SystemExit(0)  # the progress is what is under test, not the report

    monkeypatch.setattr(repo_support, "opened_retriever", fake_opened_retriever)
    monkeypatch.setattr(bench_code, "run_code_bench", fake_run)
    monkeypatch.setattr(bench_code, "align_gold", lambda queries, cards, prefix: (queries, []))
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": "q1", "query": "where is x", "gold": ["m.x"]}\n')
    result = CliRunner().invoke(cli.main, ["bench", "code", "--queries", str(queries), "--repo",
                                                           str(tmp_path), "--db", str(tmp_path / "b.db")])
    assert result.stderr == ""


def test_plan_over_a_malformed_transcript_names_the_file(tmp_path):
    bad = tmp_path / "notes.md"
    bad.write_text("# not a JSONL transcript\n")
    result = CliRunner().invoke(cli.main, ["plan", "what next", "--transcript", str(bad), "--db",
                                           str(tmp_path / "p.db"), "--no-semantic"])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: notes.md: line 1:"), result.stderr


def test_an_empty_query_is_bad_input_for_plan_and_retrieve(tmp_path):
    """Like `chat ''`: a blank QUERY is a mistake to be told about, not a plan or an empty hit list."""
    db = str(tmp_path / "e.db")
    (tmp_path / "m.py").write_text("def f():\n    return 1\n")
    for args in (["plan", "  ", "--db", db, "--no-semantic"],
                 ["retrieve", "", "--repo", str(tmp_path), "--db", db, "--no-semantic"]):
        result = CliRunner().invoke(cli.main, args)
        assert result.exit_code == 2, (args, result.output)
        assert result.stderr.strip().splitlines()[-1] == "error: empty query: say what to plan or search for"


WORKBENCH_COMMANDS = ("open", "demo")


def _readme_usage() -> dict[str, str]:
    """The guide's usage lines by command path: each `ctxbench CMD ...` line of a code block with its continuations."""
    from pathlib import Path

    usage: dict[str, str] = {}
    current = None
    in_block = False
    docs = Path(__file__).resolve().parents[3] / "docs"
    text = "\n".join((docs / page).read_text() for page in ("commands.md", "proxy-and-mcp.md", "benchmarks.md"))
    for line in text.splitlines():
        if line.startswith("```"):
            in_block, current = not in_block, None
            continue
        if not in_block:
            continue
        if line.startswith("ctxbench "):
            words = line.split("#")[0].split()[1:]
            if not words or words[0].startswith("-") or words[0] in WORKBENCH_COMMANDS:
                current = None  # the workbench block: its options are described in prose
                continue
            current = " ".join(words[:2]) if words[0] == "bench" else words[0]
            usage[current] = usage.get(current, "") + " " + line.split("#")[0]
        elif current and line.startswith(" ") and not line.strip().startswith("#"):
            usage[current] += " " + line.split("#")[0]
    return usage


def test_the_guides_usage_lines_name_every_option_of_their_command():
    ctx = click.Context(cli.main)
    commands = dict(_all_commands(cli.main, ctx))
    usage = _readme_usage()
    assert {"import", "plan", "show", "index", "retrieve", "chat", "replay", "bench code",
            "bench plan-latency"} <= set(usage), sorted(usage)
    missing, unknown = [], []
    for path, text in usage.items():
        command = commands.get(path)
        if command is None:
            unknown.append(path)
            continue
        for param in command.params:
            if not isinstance(param, click.Option) or param.hidden or param.name in ("db_path", "config_path"):
                continue
            if not any(opt in text.split() or f"[{opt}" in text or f"{opt}]" in text or f" {opt} " in f" {text} "
                       for opt in [*param.opts, *param.secondary_opts]):
                missing.append(f"{path} {param.opts[0]}")
    assert unknown == []
    assert missing == []


def test_chat_with_a_malformed_base_url_is_bad_input_not_a_retried_network_failure(tmp_path):
    """'not a url' or ftp:// can never be reached: say so at once (exit 2), without retries or a new session."""
    db = tmp_path / "c.db"
    for url in ("not a url", "ftp://example.com/v1", "http://"):
        result = CliRunner().invoke(cli.main, ["chat", "hi", "--base-url", url, "--model", "m", "--timeout", "1",
                                               "--db", str(db)])
        assert result.exit_code == 2, (url, result.output)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and "base URL" in lines[0], result.stderr
    sessions = CliRunner().invoke(cli.main, ["sessions", "--json", "--db", str(db)])
    assert sessions.exit_code == 0 and "s_" not in sessions.output


def test_the_embed_phase_reports_its_end_even_when_every_vector_is_cached(tmp_path):
    """Progress bars showed 'embed 0/N' for good when the vectors came from the cache (no embedder callback)."""
    from ctxbench.codegraph.index import EmbedStats, PHASE_EMBED, build_index
    from ctxbench.store.db import connect

    (tmp_path / "m.py").write_text("def f():\n    return 1\n\n\ndef g():\n    return f()\n")
    seen: list[tuple[str, int, int]] = []
    conn = connect(tmp_path / "i.db")
    try:
        build_index(tmp_path, conn, progress=lambda *event: seen.append(event),
                    embed=lambda cards, progress: EmbedStats(embedded=0, reused=len(cards)))
    finally:
        conn.close()
    embeds = [(done, total) for phase, done, total in seen if phase == PHASE_EMBED]
    assert embeds and embeds[-1][0] == embeds[-1][1] > 0, embeds


def test_the_embed_phase_end_is_reported_once_when_the_embedder_reports_it(tmp_path):
    from ctxbench.codegraph.index import EmbedStats, PHASE_EMBED, build_index
    from ctxbench.store.db import connect

    (tmp_path / "m.py").write_text("def f():\n    return 1\n")
    seen: list[tuple[str, int, int]] = []

    def embed(cards, progress):
        progress(len(cards), len(cards))
        return EmbedStats(embedded=len(cards), reused=0)

    conn = connect(tmp_path / "i.db")
    try:
        build_index(tmp_path, conn, progress=lambda *event: seen.append(event), embed=embed)
    finally:
        conn.close()
    ends = [e for e in seen if e[0] == PHASE_EMBED and e[1] == e[2]]
    assert len(ends) == 1, seen


def test_bench_inputs_that_cannot_work_exit_2_with_one_line(tmp_path):
    """A malformed query file, an empty split, an unknown perf group: bad input (2), not a crash or a no-op run."""
    (tmp_path / "m.py").write_text("def f():\n    return 1\n")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1}\n')
    tune_only = tmp_path / "tune.jsonl"
    tune_only.write_text('{"id": "a", "query": "x", "gold": ["m.f"], "split": "tune"}\n')
    db = str(tmp_path / "b.db")
    cases = {
        "bad.jsonl:1": ["bench", "code", "--queries", str(bad), "--repo", str(tmp_path), "--db", db],
        "no queries in split 'holdout'": ["bench", "code", "--queries", str(tune_only), "--repo", str(tmp_path),
                                          "--split", "holdout", "--db", db],
        "unknown phase group 'bogus'": ["bench", "perf", "--repo", str(tmp_path), "--only", "bogus", "--repeat",
                                        "1"],
    }
    for expected, args in cases.items():
        result = CliRunner().invoke(cli.main, args)
        assert result.exit_code == 2, (args, result.output)
        last = result.stderr.strip().splitlines()[-1]
        assert last.startswith("error: ") and expected in last, result.stderr


def test_a_mode_defined_in_the_config_works_for_replay_and_chat_as_for_plan(tmp_path):
    """Context modes are named profiles in config; replay and chat refused any but off/light/heavy."""
    config = tmp_path / "modes.toml"
    config.write_text("".join(f'[[planner.modes]]\nname = "{name}"\n' for name in ("off", "light", "heavy"))
                      + '[[planner.modes]]\nname = "review"\nmax_cards = 3\n')
    base = ["--db", str(tmp_path / "m.db"), "--config", str(config)]
    chat = CliRunner().invoke(cli.main, ["chat", "where is the parser?", "--mode", "review", "--json", *base])
    assert chat.exit_code == 0, chat.output
    import json

    session = json.loads(chat.stdout)["session_id"]
    replay = CliRunner().invoke(cli.main, ["replay", session, "--mode", "review", "--json", *base])
    assert replay.exit_code == 0, replay.output
    assert [row["mode"] for row in json.loads(replay.stdout)] == ["review"]
    for args in (["chat", "hi", "--mode", "nope", *base], ["replay", session, "--mode", "nope", *base]):
        result = CliRunner().invoke(cli.main, args)
        assert result.exit_code == 2, (args, result.output)
        assert result.stderr.strip().splitlines()[-1].startswith("error: unknown context mode 'nope'"), result.stderr


def test_plain_chat_says_where_the_turn_is_stored(tmp_path):
    """Without --json the user had no way to learn the session id to continue or the plan id to show."""
    db = ["--db", str(tmp_path / "c.db")]
    result = CliRunner().invoke(cli.main, ["chat", "what is in money.py?", *db])
    assert result.exit_code == 0, result.output
    assert "Offline model" in result.stdout
    sessions = CliRunner().invoke(cli.main, ["sessions", "--json", *db])
    import json

    session = json.loads(sessions.stdout)[0]["id"]
    last = result.stderr.strip().splitlines()[-1]
    assert f"session {session}" in last and "plan plan_" in last, result.stderr
    plan_id = next(word for word in last.replace(",", " ").split() if word.startswith("plan_"))
    shown = CliRunner().invoke(cli.main, ["show", plan_id, "--json", *db])
    assert shown.exit_code == 0 and json.loads(shown.stdout)["session_id"] == session


def test_a_blank_import_title_falls_back_to_the_file_name(tmp_path):
    transcript = tmp_path / "notes.jsonl"
    transcript.write_text('{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "hello"}\n')
    db = ["--db", str(tmp_path / "t.db")]
    result = CliRunner().invoke(cli.main, ["import", str(transcript), "--title", "   ", *db])
    assert result.exit_code == 0, result.output
    import json

    sessions = json.loads(CliRunner().invoke(cli.main, ["sessions", "--json", *db]).stdout)
    assert [s["title"] for s in sessions] == ["notes"]


def test_python_dash_m_names_the_program_ctxbench():
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "ctxbench", "--version"], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ctxbench, version "), result.stdout
