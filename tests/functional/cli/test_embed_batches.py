"""Card vectors are saved batch by batch during an index run: a run killed (SIGKILL) midway keeps every
batch it saved, and the next run embeds only the rest."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from ctxbench.store.db import connect

ROOT = Path(__file__).resolve().parent

SCRIPT = textwrap.dedent('''
    import sys, time
    from dataclasses import replace
    from ctxbench.codegraph.index import build_index
    from ctxbench.config import Config, EmbeddingConfig
    from ctxbench.retrieval.embedder import HashingEmbedder
    from ctxbench.retrieval.vectors import embed_cards
    from ctxbench.store.db import connect
    from ctxbench.store.schema import components
    from ctxbench.store.db import migrate

    repo, db, delay = sys.argv[1], sys.argv[2], float(sys.argv[3])

    class Slow(HashingEmbedder):
        config = EmbeddingConfig(save_every=10)

        def encode(self, texts, progress=None, **kw):
            time.sleep(delay)
            return super().encode(texts, progress, **kw)

    conn = connect(db)
    for name, steps in components():
        migrate(conn, name, steps)
    emb = Slow()
    stats = {}
    def embed(cards, progress):
        stats["s"] = embed_cards(cards, conn, emb, progress)
        return stats["s"]
    result = build_index(repo, conn, Config().index, embed=embed)
    print(result.cards, stats["s"].embedded, stats["s"].reused)
''')


def _repo(root: Path, files: int = 12) -> Path:
    for n in range(files):
        (root / f"m{n}.py").parent.mkdir(parents=True, exist_ok=True)
        (root / f"m{n}.py").write_text("".join(f"def f{n}_{k}(x):\n    return x + {k}\n\n" for k in range(9)))
    return root


def _vectors(db: Path) -> int:
    conn = connect(db)
    try:
        return conn.execute("SELECT COUNT(*) FROM card_vectors").fetchone()[0]
    except Exception:
        return 0
    finally:
        conn.close()


def _run(repo, db, delay):
    return subprocess.Popen([sys.executable, "-c", SCRIPT, str(repo), str(db), str(delay)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})


def test_a_killed_index_run_keeps_the_batches_it_saved(tmp_path):
    repo = _repo(tmp_path / "repo")
    db = tmp_path / "ctx.db"
    proc = _run(repo, db, 0.4)  # 10 cards per batch, 0.4 s each: 120 cards take about 5 s
    deadline = time.monotonic() + 120
    while _vectors(db) < 20 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    kept = _vectors(db)
    assert 20 <= kept < 120  # saved batches survived the kill; the run had not finished
    again = _run(repo, db, 0.0)
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    cards, embedded, reused = map(int, out.split())
    assert cards == 120 and reused == kept and embedded == cards - kept
    assert _vectors(db) == 120
