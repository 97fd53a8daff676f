"""One check, every entry: a folder that is no repository to index (the home folder, the root of the disk, a
folder inside /proc, /sys or /dev) is refused by every command that takes a repository, with one line and
exit 2, before anything is opened or indexed; the attach path refuses it too."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxbench.cli import main
from ctxbench.codegraph.index import indexed_roots
from ctxbench.config import Config
from ctxbench.records.errors import RefusedRepository
from ctxbench.service.attach import attach_repository, index_repository, root_refusal
from ctxbench.service.workbench import Workbench

ROOT = Path(__file__).resolve().parents[3]
LOCAL_MODEL = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m"]  # never reached: refused before any call
# the commands that take a repository, run in this process (each exits before it would index)
IN_PROCESS = {
    "retrieve": lambda repo, db: ["retrieve", "where is f", "--repo", repo, "--db", db, "--no-semantic"],
    "plan": lambda repo, db: ["plan", "where is f", "--repo", repo, "--db", db, "--no-semantic"],
    "chat": lambda repo, db: ["chat", "where is f", "--repo", repo, "--db", db, "--no-semantic", *LOCAL_MODEL],
    "index": lambda repo, db: ["index", repo, "--db", db, "--no-embed"],
    "bench perf": lambda repo, db: ["bench", "perf", "--repo", repo, "--no-save"],
    "bench ui": lambda repo, db: ["bench", "ui", "--repo", repo, "--skip-paint"],
}
# the long-running ones (a workbench, a server) run as processes: were the check missing they would start
AS_PROCESS = {
    "open": lambda repo, db: ["open", "--repo", repo, "--db", db, "--no-index"],
    "serve": lambda repo, db: ["serve", "--repo", repo, "--db", db, "--no-index", "--port", "1"],
    "mcp": lambda repo, db: ["mcp", "--repo", repo, "--db", db],
}


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A home folder holding source files (indexing it would find something) and the environment pointing at it."""
    home = tmp_path / "home" / "someone"
    (home / ".config" / "othertool").mkdir(parents=True)
    (home / ".config" / "othertool" / "settings.py").write_text("API_TOKEN = 'not for ctxbench'\n")
    (home / "project.py").write_text("def f():\n    return 1\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CTXBENCH_CONFIG", os.devnull)
    monkeypatch.setenv("CTXBENCH_DB", str(tmp_path / "default.db"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return home


def nothing_indexed(db: Path) -> bool:
    if not db.exists():
        return True
    with Workbench(db, Config()) as wb, wb.connection() as conn:
        return indexed_roots(conn) == []


def refused_line(stderr: str, folder: Path, says: str) -> None:
    (line,) = stderr.strip().splitlines()
    assert line.startswith(f"error: {folder.resolve()} is ") and says in line, line


CASES = [("home", "is your home folder"), ("root", "is the root of the disk")]


def folder_of(case: str, home: Path) -> Path:
    return home if case == "home" else Path("/")


@pytest.mark.parametrize("entry", list(IN_PROCESS))
@pytest.mark.parametrize("case,says", CASES)
def test_every_command_refuses_the_home_folder_and_the_root_of_the_disk(home, tmp_path, entry, case, says):
    folder, db = folder_of(case, home), tmp_path / "store.db"
    result = CliRunner().invoke(main, IN_PROCESS[entry](str(folder), str(db)))
    assert result.exit_code == 2, result.output
    refused_line(result.stderr, folder, says)
    assert result.stdout == ""
    assert not db.exists() and not (tmp_path / "default.db").exists()  # refused before the store was opened


@pytest.mark.parametrize("entry", list(AS_PROCESS))
@pytest.mark.parametrize("case,says", CASES)
def test_the_workbench_the_server_and_the_mcp_server_refuse_them_before_they_start(home, tmp_path, entry, case, says):
    folder, db = folder_of(case, home), tmp_path / "store.db"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "ctxbench", *AS_PROCESS[entry](str(folder), str(db))], env=env,
                          cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    refused_line(done.stderr, folder, says)
    assert not db.exists()  # refused before the store was opened


@pytest.mark.parametrize("entry", ["open", "serve", "mcp", "index"])
def test_run_inside_the_home_folder_the_default_repository_is_refused_too(home, tmp_path, entry):
    """Without --repo the repository is the current folder's: started in the home folder, that is refused."""
    db = tmp_path / "store.db"
    args = {"open": ["open", "--db", str(db), "--no-index"], "serve": ["serve", "--db", str(db), "--port", "1"],
            "mcp": ["mcp", "--db", str(db)], "index": ["index", "--db", str(db), "--no-embed"]}[entry]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "ctxbench", *args], env=env, cwd=home, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    refused_line(done.stderr, home, "is your home folder")
    assert nothing_indexed(db)


def test_a_folder_of_the_system_is_refused(home, tmp_path):
    for folder in ("/proc", "/proc/self", "/sys/kernel", "/dev", "/dev/shm"):
        refusal = root_refusal(Path(folder))
        system = "/" + Path(os.path.realpath(folder)).parts[1]
        assert refusal.startswith(f"{os.path.realpath(folder)} is inside {system}, the system's own files"), folder
    db = tmp_path / "store.db"
    for args in (["index", "/proc/self", "--db", str(db), "--no-embed"],
                 ["retrieve", "where is f", "--repo", "/proc/self", "--db", str(db), "--no-semantic"]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2, result.output
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith("error: /proc/") and "is inside /proc" in line
    assert nothing_indexed(db)


def test_a_project_inside_the_home_folder_is_not_refused(home):
    assert root_refusal(home / ".config" / "othertool") == ""
    assert root_refusal(Path(__file__).parent) == ""


def test_the_attach_path_refuses_them_whatever_called_it(home, tmp_path):
    with Workbench(tmp_path / "store.db", Config()) as wb:
        for folder in (home, Path("/"), Path("/proc/self")):
            with pytest.raises(RefusedRepository, match="is your home folder|is the root of the disk|inside /proc"):
                attach_repository(wb, folder, semantic=False)
            with pytest.raises(RefusedRepository):
                index_repository(wb, folder, embed=False)
        with wb.connection() as conn:
            assert indexed_roots(conn) == []
