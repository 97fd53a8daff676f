"""The top-level ``ctxbench`` group: lazy commands, workbench flags without a command."""
from click.testing import CliRunner

from ctxbench import cli


def test_bare_ctxbench_forwards_workbench_flags_to_open(monkeypatch, tmp_path):
    seen = {}

    def fake_run(options, config):
        seen["options"] = options

    monkeypatch.setattr("ctxbench.cli.open_cmd.run_workbench", fake_run)
    result = CliRunner().invoke(cli.main, ["--db", str(tmp_path / "w.db"), "--mode", "heavy", "--budget", "1234",
                                           "--repo", str(tmp_path)])
    assert result.exit_code == 0, result.output
    options = seen["options"]
    assert options.mode == "heavy"
    assert options.budget == 1234


def test_workbench_flags_before_a_command_are_an_error(tmp_path):
    result = CliRunner().invoke(cli.main, ["--db", str(tmp_path / "w.db"), "sessions"])
    assert result.exit_code == 2
    assert "--db before a command only apply to the workbench" in result.output


def test_unknown_command_is_a_usage_error():
    result = CliRunner().invoke(cli.main, ["nope"])
    assert result.exit_code == 2
    assert "No such command" in result.output


def test_help_lists_every_registered_command():
    result = CliRunner().invoke(cli.main, ["--help"])
    assert result.exit_code == 0
    for name in ("import", "sessions", "plan", "show", "index", "retrieve", "bench", "demo", "chat", "replay"):
        assert name in result.output
