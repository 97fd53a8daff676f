"""A config file that is wrong says what is wrong, on its first line, naming the key: exit 2, no ``Usage:``, no
traceback, nothing stored. Each case is a real file on disk read by the real command line."""
from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import pytest
from click.testing import CliRunner

from ctxbench.cli import main
from ctxbench.config import Config, ConfigError, config_from, load_config
from ctxbench.service.workbench import Workbench
from ctxbench.validation import Range, TableError, validate
from llm_server import LLMServer, text

DOCS = Path(__file__).resolve().parents[3] / "docs"


def _run(tmp_path, toml: str, *args: str):
    config = tmp_path / "config.toml"
    config.write_text(toml, encoding="utf-8")
    result = CliRunner().invoke(main, [*(args or ("sessions",)), "--db", str(tmp_path / "ctx.db"),
                                       "--config", str(config)],
                                env={"CTXBENCH_CONFIG": None, "HF_HUB_OFFLINE": "1"})
    return result, config


def _refused(result, config, *fragments: str) -> str:
    """The first line of stderr, checked: exit 2, ``error: FILE: KEY: ...``, every fragment in it."""
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert "Traceback" not in result.output and "Usage:" not in result.output
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"error: {config}: "), first
    for fragment in fragments:
        assert fragment in first, (fragment, first)
    return first


# -- wrong values a user writes --------------------------------------------------------------------------------------

def test_a_string_where_a_list_is_expected_is_refused_not_split_into_characters(tmp_path):
    result, config = _run(tmp_path, '[index]\nsecret_file_globs = "*.pem"\n')
    _refused(result, config, "index.secret_file_globs: expected a list of strings, got a string (\"*.pem\")")


def test_a_number_where_a_list_is_expected_is_refused_without_a_traceback(tmp_path):
    result, config = _run(tmp_path, "[index]\nskip_dirs = 5\n")
    _refused(result, config, "index.skip_dirs: expected a list of strings, got a whole number (5)")


@pytest.mark.parametrize("toml, says", [
    ("[planner]\ndefault_budget = 0\n", "planner.default_budget: must be greater than 0, got 0"),
    ("[planner]\ndefault_budget = -100\n", "planner.default_budget: must be greater than 0, got -100"),
    ("[embedding]\nbatch_size = 0\n", "embedding.batch_size: must be greater than 0, got 0"),
    ("[llm]\nmax_tool_rounds = 0\n", "llm.max_tool_rounds: must be greater than 0, got 0"),
    ("[llm]\nreply_deadline_s = 0\n", "llm.reply_deadline_s: must be greater than 0, got 0"),
    ("[llm]\nquery_db_max_rows = -1\n", "llm.query_db_max_rows: must be greater than 0, got -1"),
    ("[retrieval]\ndefault_k = 0\n", "retrieval.default_k: must be greater than 0, got 0"),
    ("[proxy]\nport = 0\n", "proxy.port: must be at least 1, got 0"),
    ("[serve]\nport = 70000\n", "serve.port: must be at most 65535, got 70000"),
    # a number with no declared constraint: not negative, and finite
    ("[planner.pins]\ndefault_lease_ttl = -3\n", "planner.pins.default_lease_ttl: must not be negative, got -3"),
    ("[planner.truncation]\ninactive_chars = -1\n", "planner.truncation.inactive_chars: must not be negative"),
    ("[llm]\ntimeout_s = inf\n", "llm.timeout_s: must be a finite number, got inf"),
    ("[retrieval.kind_weights]\nmodule = -0.5\n", "retrieval.kind_weights.module: must not be negative, got -0.5"),
    ("[planner.activation]\ndecay = 1.5\n", "planner.activation.decay: must be at most 1, got 1.5"),
], ids=lambda v: v.split("\n")[1] if "\n" in v else None)
def test_negative_and_zero_limits_are_refused(tmp_path, toml, says):
    result, config = _run(tmp_path, toml)
    _refused(result, config, says)


@pytest.mark.parametrize("toml, says", [
    ("[proxy]\nrecent_conversations = 0\n", "proxy.recent_conversations: must be greater than 0, got 0"),
    ("[mcp]\ndefault_k = 80\n", "mcp.default_k: 80 is more than mcp.max_k (50)"),
    ("[mcp]\nmax_k = 5\n", "mcp.default_k: 8 is more than mcp.max_k (5)"),
    ('[proxy.truncate_tiers]\nlight = "active_recent,inactiv"\n',
     "proxy.truncate_tiers.light: unknown truncation tier 'inactiv'; known: active_recent, active_older, inactive"),
    ('[proxy.truncate_tiers]\nhevy = "inactive"\n', "proxy.truncate_tiers.hevy: unknown context mode 'hevy'"),
    ("[planner]\ndefault_budget = 1e23\n", "planner.default_budget: must be at most 100000000, got 1e+23"),
    ("[planner]\ndefault_budget = 100000000000000000000000\n", "planner.default_budget: must be at most 100000000"),
    ("[llm]\ncontext_limit = 200000000\n", "llm.context_limit: must be at most 100000000"),
    ("[planner.truncation]\ninactive_chars = 99999999999999999999\n",
     "planner.truncation.inactive_chars: must be at most 9,223,372,036,854,775,807 in size"),
], ids=lambda v: v.split("\n")[1] if "\n" in v else None)
def test_values_that_break_things_later_are_refused_at_load_naming_the_key(tmp_path, toml, says):
    result, config = _run(tmp_path, toml)
    _refused(result, config, says)
    assert len(result.stderr.splitlines()) == 1, result.stderr


def test_patterns_that_break_once_joined_are_refused(tmp_path):
    """Each pattern compiles alone, but the strategy joins them: a global flag in the middle fails every plan."""
    result, config = _run(tmp_path, "[planner.fused]\ntemporal_query_patterns = ['how long ago', '(?i)^when\\\\b']\n")
    _refused(result, config, "planner.fused.temporal_query_patterns: the patterns do not join into one expression")


def test_a_pattern_that_is_no_regular_expression_is_refused_naming_it(tmp_path):
    result, config = _run(tmp_path, "[planner.fused]\ntemporal_text_patterns = ['ago', '(unclosed']\n")
    _refused(result, config, "planner.fused.temporal_text_patterns[1]: not a regular expression", "(unclosed")


def test_a_negative_timeout_fails_before_anything_is_stored_or_sent(tmp_path):
    with LLMServer([text("never asked")]) as server:
        result, config = _run(tmp_path, "[llm]\ntimeout_s = -5\n", "chat", "hello",
                              "--base-url", server.base_url, "--model", "m")
        received = list(server.received)
    _refused(result, config, "llm.timeout_s: must be greater than 0, got -5")
    assert received == []
    db = tmp_path / "ctx.db"
    if db.exists():
        with Workbench(db, Config()) as wb:
            assert wb.sessions.list() == []


@pytest.mark.parametrize("keymap, says", [
    ('"ctxbench.overlay" = "ctrl+x"\n"ctxbench.payload" = "ctrl+x"\n',
     "ui.keymap.ctxbench.overlay: ctrl+x is bound twice on the main screen: also to ctxbench.payload"),
    ('"ctxbench.overlay" = "ctrl+t"\n',
     "ui.keymap.ctxbench.overlay: ctrl+t is bound twice on the main screen: also to ctxbench.mode_cycle "
     "(its default key)"),
    ('"ctxbench.mode_cycle" = "m"\n',
     "ui.keymap.ctxbench.mode_cycle: m types a character, and on the main screen you type"),
    ('"overlay.drop" = "space"\n', "ui.keymap.overlay.drop: space types a character, and on the context overlay"),
    ('"ctxbench.overlay" = "ctrl+q"\n', "ui.keymap.ctxbench.overlay: ctrl+q is the app's own key (Quit)"),
    ('"ctxbench.ovrlay" = "ctrl+x"\n', "ui.keymap.ctxbench.ovrlay: unknown binding id; did you mean ctxbench.overlay?"),
    ('"ctxbench.overlay" = "Ctrl+X"\n', "ui.keymap.ctxbench.overlay: 'Ctrl+X' is not a key name"),
    ('"ctxbench.overlay" = 5\n', "ui.keymap.ctxbench.overlay: expected a string, got a whole number (5)"),
    ('ctxbench.overlay = "ctrl+x"\n', 'ui.keymap.ctxbench: expected a string, got a table (a name with a dot in it '
                                     'is quoted: "ctxbench.overlay" = ...)'),
], ids=["twice", "twice-with-a-default", "printable-main", "printable-overlay", "app-key", "unknown-id", "not-a-key",
        "not-a-string", "unquoted-id"])
def test_a_keymap_that_cannot_work_is_refused(tmp_path, keymap, says):
    result, config = _run(tmp_path, "[ui.keymap]\n" + keymap)
    _refused(result, config, says)


def test_a_keymap_that_works_is_accepted_and_its_keys_are_cleaned(tmp_path):
    from ctxbench.tui.keymap import keymap_from_config

    toml = '[ui.keymap]\n"ctxbench.overlay" = "ctrl+x, f2"\n"viewer.copy" = "y"\n"ctxbench.mode_cycle" = "f3"\n'
    result, config = _run(tmp_path, toml)
    assert result.exit_code == 0, result.output
    keymap, unknown = keymap_from_config(load_config(config).ui.keymap)
    assert unknown == [] and keymap["ctxbench.overlay"] == "ctrl+x,f2"  # Textual would bind " f2", never pressed


def test_the_default_keys_pass_their_own_check():
    from ctxbench.tui.keymap import ALL_KEYS, keymap_problems

    assert keymap_problems(tuple((spec.id, spec.keys) for spec in ALL_KEYS)) == []


@pytest.mark.parametrize("toml, says", [
    ("[planner]\ndefualt_budget = 5\n", "planner.defualt_budget: unknown key; did you mean default_budget?"),
    ("[planer]\ndefault_budget = 5\n", "planer: unknown key; did you mean planner?"),
    ("[llm]\ntimeout = 5\n", "llm.timeout: unknown key; did you mean timeout_s?"),
    ("[[planner.modes]]\nname = \"light\"\nmax_card = 4\n", "planner.modes[light].max_card: unknown key; did you "
                                                           "mean max_cards?"),
    ("[serve]\nzzz = 1\n", "serve.zzz: unknown key; known: host, port, max_sessions"),
])
def test_an_unknown_key_is_named_with_the_closest_known_one(tmp_path, toml, says):
    result, config = _run(tmp_path, toml)
    _refused(result, config, says)


def test_every_problem_gets_a_line_and_the_first_line_says_the_first(tmp_path):
    result, config = _run(tmp_path, '[index]\nskip_dirs = 5\nsecret_file_globs = "*.pem"\n'
                                    "[llm]\ntimeout_s = -5\nmax_retries = 1.5\n[ui]\ntheme = 1979-05-27\n")
    _refused(result, config)
    lines = result.stderr.splitlines()
    assert len(lines) == 5 and all(line.startswith(("error: ", f"{config}: ")) for line in lines)
    joined = "\n".join(lines)
    for key in ("index.skip_dirs", "index.secret_file_globs", "llm.timeout_s", "llm.max_retries", "ui.theme"):
        assert key in joined
    assert "llm.max_retries: expected a whole number, got a number (1.5)" in joined
    assert "ui.theme: expected a string, got a date or time (1979-05-27)" in joined


@pytest.mark.parametrize("toml, says", [
    ("[planner]\nmax_cards = 4\n", "planner.max_cards: unknown key"),
    ("[planner]\ndefault_mode = \"turbo\"\n", "planner.default_mode: unknown context mode 'turbo'; known: off, "
                                            "light, heavy"),
    ("[planner]\ndefault_strategy = \"newest\"\n", "planner.default_strategy: unknown strategy 'newest'"),
    ("[planner]\nmodes = \"light\"\n", "planner.modes: expected a list of tables, got a string"),
    ("[[planner.modes]]\nmax_cards = 4\n", "planner.modes[0]: each entry needs a name (a string)"),
    ("[tokenizer]\nname = \"o200k_base\"\n", "tokenizer.name:"),
    ("[planner]\nsystem_prompt = 5\n", "planner.system_prompt: expected a string, got a whole number (5)"),
    ("[ui]\nlive_preview = 1\n", "ui.live_preview: expected true or false, got a whole number (1)"),
    ("[planner]\ndefault_budget = \"16000\"\n", "planner.default_budget: expected a whole number or one of 'auto', "
                                              "got a string (\"16000\")"),
    ("[planner]\nhybrid = 3\n", "planner.hybrid: expected a table, got a whole number (3)"),
], ids=["misplaced", "mode", "strategy", "modes-not-a-list", "mode-without-name", "tokenizer", "str", "bool",
        "quoted-number", "section-not-a-table"])
def test_other_wrong_values_name_their_key(tmp_path, toml, says):
    result, config = _run(tmp_path, toml)
    _refused(result, config, says)


# -- [[planner.modes]] merges by name ------------------------------------------------------------------------

def test_redefining_one_mode_keeps_the_others(tmp_path):
    """The configuration guide's own example used to remove every other mode (`--mode heavy`: unknown mode)."""
    result, config = _run(tmp_path, '[[planner.modes]]\nname = "light"\nmax_cards = 4\n', "chat", "hello",
                          "--mode", "heavy")
    assert result.exit_code == 0, result.output
    planner = load_config(config).planner
    assert planner.mode_names == ("off", "light", "heavy")
    assert planner.mode("light").max_cards == 4
    assert planner.mode("light").retrieval_share == Config().planner.mode("light").retrieval_share
    assert planner.mode("heavy") == Config().planner.mode("heavy")


def test_a_new_mode_is_added_after_the_built_in_ones_and_can_be_chosen(tmp_path):
    toml = ('[[planner.modes]]\nname = "deep"\nmax_cards = 20\nexcerpts = true\n'
            '[[planner.modes]]\nname = "off"\nauto_retrieve = false\n')
    result, config = _run(tmp_path, toml, "chat", "hello", "--mode", "deep")
    assert result.exit_code == 0, result.output
    planner = load_config(config).planner
    assert planner.mode_names == ("off", "light", "heavy", "deep")
    deep = planner.mode("deep")
    assert (deep.max_cards, deep.excerpts, deep.auto_retrieve) == (20, True, True)


def test_open_and_demo_take_a_mode_defined_in_the_config(tmp_path):
    from ctxbench.cli.open_cmd import check_model
    from ctxbench.service.options import LaunchOptions

    config = config_from({"planner": {"modes": [{"name": "deep", "max_cards": 20}]}})
    check_model(config, LaunchOptions(mode="deep"))  # accepted
    with pytest.raises(SystemExit) as exited:
        check_model(config, LaunchOptions(mode="turbo"))
    assert exited.value.code == 2


def test_the_guides_config_examples_are_valid_configs(tmp_path):
    example = re.search(r"```toml\n(.*?)```", (DOCS / "configuration.md").read_text(encoding="utf-8"), re.S).group(1)
    result, config = _run(tmp_path, example)
    assert result.exit_code == 0, result.output
    planner = load_config(config).planner
    assert planner.mode_names == ("off", "light", "heavy", "deep") and planner.mode("light").max_cards == 4
    keymap = re.search(r"```toml\n(\[ui\.keymap\].*?)```", (DOCS / "workbench.md").read_text(encoding="utf-8"),
                       re.S).group(1)
    result, config = _run(tmp_path, keymap)
    assert result.exit_code == 0, result.output


# -- derived from the dataclasses, so new sections need nothing here -----------------------------------------

def test_the_defaults_satisfy_their_own_constraints():
    """A default that breaks a declared constraint (or is negative) fails here, for every section."""
    assert validate(Config, dataclasses.asdict(Config())) == Config()
    assert config_from({}) == Config()


@dataclass(frozen=True)
class _Limits:
    rounds: Annotated[int, Range(gt=0)] = 3
    weight: float = 0.5
    names: tuple[str, ...] = ("a",)


@dataclass(frozen=True)
class _NewSection:
    limits: _Limits = field(default_factory=_Limits)
    label: str = "x"


@dataclass(frozen=True)
class _Root:
    new: _NewSection = field(default_factory=_NewSection)


def test_a_section_nobody_listed_is_validated_from_its_annotations():
    assert validate(_Root, {"new": {"limits": {"rounds": 5, "names": ["b"]}}}) == \
        _Root(_NewSection(_Limits(5, 0.5, ("b",))))
    with pytest.raises(TableError) as caught:
        validate(_Root, {"new": {"limits": {"rounds": 0, "weight": -1, "names": "b", "round": 1}, "labl": "y"}})
    assert [str(p) for p in caught.value.problems] == [  # in the order of the document
        "new.limits.rounds: must be greater than 0, got 0",
        "new.limits.weight: must not be negative, got -1",
        "new.limits.names: expected a list of strings, got a string (\"b\")",
        "new.limits.round: unknown key; did you mean rounds?",
        "new.labl: unknown key; did you mean label?",
    ]


def test_load_config_raises_config_error_with_the_file_and_key(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("[llm]\ntimeout_s = -5\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == f"{path}: llm.timeout_s: must be greater than 0, got -5"
    assert os.fspath(path) in str(caught.value)


@pytest.mark.parametrize("args", [
    ("plan", "what next", "--budget", "100000001"),
    ("chat", "hello", "--budget", "100000000000000000000000"),
    ("chat", "hello", "--context-limit", "100000001"),
    ("replay", "s1", "--budget", "100000001"),
])
def test_a_budget_on_the_command_line_past_what_the_config_accepts_is_refused(tmp_path, args):
    """The config file refuses a budget above MAX_TOKENS; the same number given as a flag is refused too,
    in one line naming the flag, before anything is planned or stored."""
    from ctxbench.config import MAX_TOKENS

    db = tmp_path / "c.db"
    result = CliRunner().invoke(main, [*args, "--db", str(db)], env={"CTXBENCH_CONFIG": os.devnull})
    assert result.exit_code == 2, result.output
    flag = args[args.index("--budget") if "--budget" in args else args.index("--context-limit")]
    assert flag in result.output and (f"{MAX_TOKENS:,}" in result.output or str(MAX_TOKENS) in result.output)
    assert "Traceback" not in result.output
