"""Walking a repository: what is indexed and why the rest is skipped."""
from __future__ import annotations

import dataclasses
import os

import pytest

from codegraph_helpers import copy_multi, small_config
from ctxbench.codegraph import walk as W


@pytest.fixture()
def walked(tmp_path):
    root = copy_multi(tmp_path)
    return root, W.walk(root, small_config())


def reasons(result) -> dict[str, str]:
    return {s.path: s.reason for s in result.skipped}


def test_each_skip_reason_is_reported(walked):
    _, result = walked
    got = reasons(result)
    assert got["generated.py"] == W.SKIP_GITIGNORE
    assert got["run.log"] == W.SKIP_GITIGNORE
    assert got["ignored_dir/"] == W.SKIP_GITIGNORE
    assert got["nested/local_only.py"] == W.SKIP_GITIGNORE  # nested .gitignore
    assert got["scratch/"] == W.SKIP_CTXBENCHIGNORE
    assert got["vendor/"] == W.SKIP_DIR
    assert got["node_modules/"] == W.SKIP_DIR
    assert got["big.py"] == W.SKIP_TOO_LARGE
    assert got["blob.py"] == W.SKIP_BINARY
    for secret in (".env", ".env.local", "deploy/id_rsa", "certs/server.pem"):
        assert got[secret] == W.SKIP_SECRET


def test_indexed_files_have_languages_and_exclude_skipped(walked):
    _, result = walked
    files = {f.path: f.language for f in result.files}
    assert files["pkg/core.py"] == "python"
    assert files["nested/kept.py"] == "python"
    assert files["web/app.js"] == "javascript"
    assert files["web/view.tsx"] == "typescript"
    assert files["go/server.go"] == "go"
    assert files["rust/src/lib.rs"] == "rust"
    assert files["java/src/main/java/com/example/App.java"] == "java"
    skipped = {s.path for s in result.skipped}
    assert not skipped & set(files)
    assert not any(p.startswith(("vendor/", "node_modules/", "scratch/", "ignored_dir/")) for p in files)


def test_symlinks_out_of_the_root_are_not_followed(walked):
    root, result = walked
    got = reasons(result)
    assert got["link_out/"] == W.SKIP_SYMLINK_OUTSIDE
    assert got["link_file.py"] == W.SKIP_SYMLINK_OUTSIDE
    assert all("leak" not in f.path for f in result.files)
    assert os.path.exists(root / "link_out" / "leak.py")  # the link works; the walk just does not follow it


def test_a_symlink_to_a_secret_file_is_skipped_whatever_its_own_name(walked):
    root, result = walked
    assert os.path.islink(root / "pkg" / "local_settings.py")  # fixture: pkg/local_settings.py -> ../.env
    got = reasons(result)
    assert got["pkg/local_settings.py"] == W.SKIP_SECRET
    assert "pkg/local_settings.py" not in {f.path for f in result.files}


def test_symlinked_folder_inside_the_root_is_walked_once(tmp_path):
    root = tmp_path / "repo"
    (root / "a").mkdir(parents=True)
    (root / "a" / "m.py").write_text("x = 1\n")
    (root / "again").symlink_to(root / "a")
    (root / "a" / "loop").symlink_to(root / "a")
    result = W.walk(root)
    paths = {f.path for f in result.files}
    assert "a/m.py" in paths
    assert reasons(result)["a/loop/"] == W.SKIP_SYMLINK_LOOP


def test_gitignore_negation_and_deeper_file_wins(tmp_path):
    root = tmp_path / "repo"
    (root / "sub").mkdir(parents=True)
    (root / ".gitignore").write_text("*.py\n!keep.py\n")
    (root / "sub" / ".gitignore").write_text("!wanted.py\n")
    for name in ("drop.py", "keep.py", "sub/wanted.py", "sub/other.py"):
        (root / name).write_text("x = 1\n")
    result = W.walk(root)
    assert {f.path for f in result.files} == {"keep.py", "sub/wanted.py"}
    assert reasons(result)["sub/other.py"] == W.SKIP_GITIGNORE


def test_secret_file_names():
    globs = small_config().secret_file_globs
    for name in (".env", ".env.production", "prod.env", "server.key", "ID_RSA", "id_ed25519.pub", "store.p12",
                 "cert.pfx", "ca.crt", "x.cer", "app.keystore"):
        assert W.is_secret_file(name, globs), name
    for name in ("environment.py", "keys.py", "settings.py", "envelope.js"):
        assert not W.is_secret_file(name, globs), name


def test_unsupported_files_are_reported(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    (root / "README.md").write_text("# hi\n")
    (root / "a.py").write_text("x = 1\n")
    result = W.walk(root, dataclasses.replace(small_config()))
    assert [f.path for f in result.files] == ["a.py"]
    assert reasons(result)["README.md"] == W.SKIP_UNSUPPORTED
