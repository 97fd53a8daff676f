import dataclasses

import pytest

from ctxbench.config import Config, ConfigError, load_config


def test_missing_default_file_gives_defaults(tmp_path, monkeypatch):
    monkeypatch.delenv("CTXBENCH_CONFIG", raising=False)
    monkeypatch.setattr("platformdirs.user_config_dir", lambda app: str(tmp_path / "nowhere"))
    assert not (tmp_path / "nowhere" / "config.toml").exists()
    assert load_config() == Config()


def test_an_explicit_config_path_that_does_not_exist_is_an_error(tmp_path, monkeypatch):
    monkeypatch.delenv("CTXBENCH_CONFIG", raising=False)
    with pytest.raises(ConfigError, match=r"config file .*nope\.toml does not exist \(given by --config\)"):
        load_config(tmp_path / "nope.toml")
    monkeypatch.setenv("CTXBENCH_CONFIG", str(tmp_path / "env.toml"))
    with pytest.raises(ConfigError, match=r"env\.toml does not exist \(given by \$CTXBENCH_CONFIG\)"):
        load_config()


def test_cli_refuses_a_config_flag_naming_a_missing_file(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from ctxbench.cli import main

    monkeypatch.delenv("CTXBENCH_CONFIG", raising=False)
    result = CliRunner().invoke(main, ["sessions", "--db", str(tmp_path / "x.db"), "--config", "/nonexistent.toml"])
    assert result.exit_code == 2
    assert "config file /nonexistent.toml does not exist" in result.output


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
