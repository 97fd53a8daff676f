import dataclasses

import pytest

from ctxbench.config import Config, ConfigError, load_config


def test_missing_file_gives_defaults(tmp_path):
    config = load_config(tmp_path / "nope.toml")
    assert config == Config()


def test_file_overrides_nested_values(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text(
        '[planner]\ndefault_budget = 16000\ndefault_mode = "heavy"\n'
        "[planner.hybrid]\nkeyword_weight = 2\n"
        '[ui.keymap]\ncycle_mode = "f2"\n'
    )
    config = load_config(path)
    assert config.planner.default_budget == 16000
    assert config.planner.default_mode == "heavy"
    assert config.planner.hybrid.keyword_weight == 2.0
    assert config.planner.hybrid.rrf_k == 60
    assert config.ui.keymap == (("cycle_mode", "f2"),)


def test_modes_can_be_redefined(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('[[planner.modes]]\nname = "light"\nmax_cards = 3\n')
    config = load_config(path)
    assert config.planner.mode("light").max_cards == 3
    # a redefined mode keeps the other fields of its default profile
    assert config.planner.mode("light").retrieval_share == Config().planner.mode("light").retrieval_share


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("[planner]\ndefault_budget = 'big'\n", "default_budget"),
        ("[planner]\nnot_a_key = 1\n", "not_a_key"),
        ("[planner\n", "cannot read"),
    ],
)
def test_bad_config_says_where(tmp_path, text, fragment):
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=fragment):
        load_config(path)


def test_config_is_hashable_and_canonical():
    config = Config()
    hash(config)
    assert dataclasses.asdict(config) == config.canonical()


def test_unknown_mode_is_a_clear_error():
    with pytest.raises(ConfigError, match="unknown context mode"):
        Config().planner.mode("turbo")
