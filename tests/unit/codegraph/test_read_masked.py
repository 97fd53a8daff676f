"""A repository file read for an excerpt comes back masked exactly as free text is masked, and its masking is
remembered by the file's content: read again, or in a fresh process handed what a session's store kept, it is not
scanned again."""
from __future__ import annotations

from ctxbench.codegraph.code_context import read_masked
from ctxbench.records.derived import deriving_for
from ctxbench.redaction import MASK, forget_masks, mask_text, remember_masks, scanner, take_fresh_masks

TOKEN = "gh" + "p_" + "Zq8Xw2Lm4Rt6Yu1Io9Pa3Sd5Fg7Hj0Kl2Nb4"
WITH_SECRET = f'"""Deploys."""\nGITHUB_TOKEN = "{TOKEN}"\n\n\ndef deploy():\n    return GITHUB_TOKEN\n'
CLEAN = '"""Money."""\n\n\ndef add(a, b):\n    return a + b\n'


def _repo(tmp_path):
    (tmp_path / "deploy.py").write_text(WITH_SECRET)
    (tmp_path / "money.py").write_text(CLEAN)
    return tmp_path.resolve()


def _counting(monkeypatch) -> list[str]:
    scanned: list[str] = []
    real = scanner.mask_text
    monkeypatch.setattr(scanner, "mask_text", lambda text, filename="": scanned.append(text) or real(text, filename))
    return scanned


def test_a_file_reads_masked_as_free_text_is_masked_and_is_scanned_once(tmp_path, monkeypatch):
    root = _repo(tmp_path)
    forget_masks()
    scanned = _counting(monkeypatch)
    first = read_masked(root, "deploy.py", ())
    assert first == mask_text(WITH_SECRET).text and TOKEN not in first and MASK in first
    assert read_masked(root, "money.py", ()) == CLEAN
    assert scanned == [WITH_SECRET, CLEAN]
    assert read_masked(root, "deploy.py", ()) == first and read_masked(root, "money.py", ()) == CLEAN
    assert scanned == [WITH_SECRET, CLEAN]  # read again: not scanned again


def test_a_changed_file_is_scanned_again(tmp_path, monkeypatch):
    root = _repo(tmp_path)
    forget_masks()
    scanned = _counting(monkeypatch)
    read_masked(root, "money.py", ())
    (root / "money.py").write_text(CLEAN + f"KEY = '{TOKEN}'\n")
    again = read_masked(root, "money.py", ())
    assert TOKEN not in again and len(scanned) == 2


def test_a_fresh_process_handed_a_sessions_kept_masking_scans_no_file(tmp_path, monkeypatch):
    root = _repo(tmp_path)
    forget_masks()
    with deriving_for("s1"):
        before = {rel: read_masked(root, rel, ()) for rel in ("deploy.py", "money.py")}
    kept = take_fresh_masks("s1")  # what the session's store keeps (``store.derived_texts``)
    assert len(kept) == 2 and all(masked is None for masked, count in kept.values() if count == 0)
    assert not any(masked is not None and TOKEN in masked for masked, _ in kept.values())

    forget_masks()  # a fresh process
    remember_masks(kept)
    scanned = _counting(monkeypatch)
    assert {rel: read_masked(root, rel, ()) for rel in ("deploy.py", "money.py")} == before
    assert scanned == []
