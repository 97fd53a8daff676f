"""The embedder's safety checks and laziness, and the hashing stand-in (no model load here)."""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

from ctxbench.config import EmbeddingConfig
from ctxbench.retrieval import model_dir as model_dir_mod
from ctxbench.retrieval.embedder import Embedder, EmbedderError, HashingEmbedder
from ctxbench.retrieval.model_dir import BUNDLED_MODEL_SHA256, bundled_model_path, file_sha256, verify_model_dir


@pytest.fixture
def fake_model(tmp_path):
    """A copy of the bundled model's small files with weights that are not the real ones."""
    src = bundled_model_path()
    dst = tmp_path / "model"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("model.safetensors"))
    (dst / "model.safetensors").write_bytes(b"not the weights you are looking for")
    return dst


def test_bundled_weights_have_the_known_hash():
    weights = bundled_model_path() / "model.safetensors"
    assert file_sha256(weights) == BUNDLED_MODEL_SHA256
    verify_model_dir(bundled_model_path())  # does not raise


def test_file_sha256(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"abc" * 1_000_000)
    assert file_sha256(p) == hashlib.sha256(b"abc" * 1_000_000).hexdigest()


def test_tampered_bundled_weights_are_refused_before_loading(fake_model, monkeypatch):
    monkeypatch.setattr(model_dir_mod, "bundled_model_path", lambda: fake_model)
    loaded = []
    monkeypatch.setattr(Embedder, "_construct", lambda self, path: loaded.append(path))
    emb = Embedder(EmbeddingConfig())
    with pytest.raises(EmbedderError, match="sha256"):
        emb.wait(timeout=60)
    assert not emb.ready and isinstance(emb.error, EmbedderError)
    assert loaded == []
    with pytest.raises(EmbedderError):
        emb.encode(["x"])


def test_verify_model_dir_missing_weights(tmp_path):
    with pytest.raises(EmbedderError, match="not found"):
        verify_model_dir(tmp_path)


def test_configured_model_path_must_exist_locally(tmp_path):
    emb = Embedder(EmbeddingConfig(model_path=str(tmp_path / "nowhere")))
    with pytest.raises(EmbedderError, match="not a local directory"):
        emb.wait(timeout=60)


def test_configured_model_skips_the_bundled_hash_check(fake_model):
    """A user's own model is not the bundled one: no sha256 refusal (this fake then fails to load, clearly)."""
    emb = Embedder(EmbeddingConfig(model_path=str(fake_model)))
    with pytest.raises(EmbedderError) as info:
        emb.wait(timeout=120)
    assert "sha256" not in str(info.value)
    assert "failed to load" in str(info.value)


def test_key_names_what_shapes_a_vector():
    a = Embedder(EmbeddingConfig()).key
    assert a != Embedder(EmbeddingConfig(max_seq_length=32)).key
    assert a != Embedder(EmbeddingConfig(precision="qint8")).key
    assert a != Embedder(EmbeddingConfig(model_path="/x/y")).key


def test_importing_retrieval_does_not_import_torch_or_sentence_transformers():
    code = ("import sys, ctxbench.retrieval.embedder, ctxbench.retrieval.retriever, ctxbench.retrieval.vectors, "
            "ctxbench.retrieval.keyword\n"
            "bad = [m for m in ('sentence_transformers', 'torch', 'transformers') if m in sys.modules]\n"
            "print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_hashing_embedder_is_deterministic_and_normalized():
    emb = HashingEmbedder(dimension=64)
    a = emb.encode(["render a table line", "fetch a url", ""])
    b = emb.encode(["render a table line", "fetch a url", ""])
    assert a.dtype == np.float32 and a.shape == (3, 64)
    assert np.array_equal(a, b)
    assert np.linalg.norm(a[0]) == pytest.approx(1.0) and np.linalg.norm(a[2]) == 0.0
    same_words = emb.encode(["TableRenderer render_line"])[0]
    assert float(same_words @ emb.encode(["table renderer render line"])[0]) == pytest.approx(1.0)
    assert emb.ready and emb.wait() and emb.key == "hashing-64"


QUERY_TEXTS = ["How does pressing Tab decide which widget gets focus next?", "ok",
               "Where is the check that a file path given on the command line exists and is readable?"]


@pytest.mark.model
@pytest.mark.parametrize("runtime", ["onnx", "numpy"])
def test_query_encoders_match_the_torch_model(runtime):
    """The onnxruntime graph and the numpy copy of all-MiniLM-L6-v2 give the torch model's vectors (float32
    rounding apart), at the query length and at the cards' length."""
    light = Embedder(EmbeddingConfig(query_runtime=runtime, bulk_precision="float32"))
    light.wait()
    assert type(light._query_model).__name__ == {"onnx": "OnnxMiniLM", "numpy": "NumpyMiniLM"}[runtime]
    torch_side = Embedder(EmbeddingConfig(query_runtime="torch"))
    for length in (256, 64):
        mine = light.encode(QUERY_TEXTS, max_seq_length=length)
        theirs = torch_side.encode(QUERY_TEXTS, max_seq_length=length)
        assert mine.shape == theirs.shape == (3, 384)
        assert np.abs(mine - theirs).max() < 1e-5
        assert np.allclose(np.linalg.norm(mine, axis=1), 1.0, atol=1e-5)


@pytest.mark.slow
@pytest.mark.model
def test_the_workbench_embeds_without_torch_and_the_torch_bulk_path_loads_it():
    """Queries and, by default, bulk work (cards, a history) run by the onnx graph: the process never imports torch
    (the workbench held 1.4-1.8 GB with it). ``bulk_runtime = "torch"`` keeps sentence-transformers for bulk work."""
    code = (
        "import sys\n"
        "from ctxbench.config import EmbeddingConfig\n"
        "from ctxbench.retrieval.embedder import Embedder\n"
        "e = Embedder(EmbeddingConfig())\n"
        "e.wait()\n"
        "assert e.ready\n"
        "e.encode(['where is focus moved'], max_seq_length=256)\n"
        "e.encode(['card %d' % i for i in range(20)])\n"
        "print('torch' in sys.modules)\n"
        "t = Embedder(EmbeddingConfig(bulk_runtime='torch'))\n"
        "t.wait()\n"
        "t.encode(['where is focus moved'], max_seq_length=256)\n"
        "print('torch' in sys.modules)\n"
        "t.encode(['card %d' % i for i in range(20)])\n"
        "print('torch' in sys.modules)\n"
        "f = Embedder(EmbeddingConfig())\n"
        "f.wait()\n"
        "print('bulk loaded' if f.load_bulk_model() > 0 and f.load_bulk_model() < 0.5 else 'bulk not loaded')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    # a benchmark loads the bulk (torch) model before it times bulk encoding; a second call loads nothing
    assert out.stdout.split("\n")[:4] == ["False", "False", "True", "bulk loaded"]


@pytest.mark.model
def test_bulk_vectors_by_the_onnx_graph_match_sentence_transformers():
    """Many texts at once (more than a query call) by the onnx float32 graph give sentence-transformers' vectors,
    float32 rounding apart (3.2e-7 at most over the demo's 430 history texts), at the cards' and the history's
    lengths: vectors cached by one path are the vectors the other would make."""
    texts = [f"{t} (variant {n})" for n in range(4) for t in QUERY_TEXTS] + ["x", "def f(): pass"]
    onnx = Embedder(EmbeddingConfig(bulk_precision="float32"))
    torch_side = Embedder(EmbeddingConfig(bulk_runtime="torch"))
    for length in (64, 256):
        mine, theirs = onnx.encode(texts, max_seq_length=length), torch_side.encode(texts, max_seq_length=length)
        assert mine.shape == theirs.shape == (len(texts), 384)
        assert np.abs(mine - theirs).max() < 1e-5


@pytest.mark.model
def test_a_bulk_run_reports_its_progress_batch_by_batch():
    """Cards and a history report how far they are after each batch the graph runs (16 texts by the calibrated
    graph), not once per ``progress_every`` texts: a warm-up gives way to the UI at each report, so a key waits for
    one batch (~0.1 s), not for 256 texts (~1.5 s)."""
    emb = Embedder(EmbeddingConfig(progress_every=256))
    texts = [f"{t} (variant {n})" for n in range(12) for t in QUERY_TEXTS]  # 36 texts: three batches of 16 or fewer
    seen: list[tuple[int, int]] = []
    emb.encode(texts, lambda done, total: seen.append((done, total)))
    assert len(seen) >= 3
    assert [d for d, _ in seen] == sorted(d for d, _ in seen) and seen[-1] == (len(texts), len(texts))
    assert {t for _, t in seen} == {len(texts)}


@pytest.mark.model
def test_a_query_runs_beside_a_bulk_run_instead_of_after_it():
    """A plan's query is embedded while cards or a history are being embedded: it takes neither lock a bulk run or
    another call holds (with them held, it still answers)."""
    import threading

    emb = Embedder(EmbeddingConfig())
    emb.wait()
    answered: list = []
    with emb._bulk_lock, emb._encode_lock:
        worker = threading.Thread(target=lambda: answered.append(emb.encode_query("where is focus moved")))
        worker.start()
        worker.join(120)  # a deadlock detector, not a timing: it answers in milliseconds
    assert len(answered) == 1 and answered[0].shape == (384,)


@pytest.mark.model
def test_onnx_encoder_pads_batches_without_changing_a_vector():
    """Several texts run in batches padded to the longest: a padded text gets the vector it gets alone (the mask
    keeps padding out of attention and out of the mean), and the order of the rows is the order of the texts."""
    from ctxbench.retrieval.minilm_onnx import OnnxMiniLM

    model = OnnxMiniLM(bundled_model_path(), threads=1, batch_size=2)
    texts = QUERY_TEXTS + ["def render_line(self, y: int) -> Strip: return self._cache[y]"]
    seen: list[tuple[int, int]] = []
    together = model.encode(texts, 64, progress=lambda done, total: seen.append((done, total)))
    alone = np.vstack([model.encode([t], 64) for t in texts])
    assert together.shape == (4, 384) and together.dtype == np.float32
    assert np.abs(together - alone).max() < 1e-5
    assert float(together[1] @ alone[1]) > 0.9999 and float(together[1] @ alone[0]) < 0.9
    assert seen == [(2, 4), (4, 4)]
    assert model.encode([], 64).shape == (0, 384)


@pytest.mark.model
def test_onnx_encoder_gives_the_same_bits_on_any_thread_count():
    """``embedding.query_threads`` may differ between two processes of one session: a plan's id hashes the
    similarities, so the query vectors must not depend on it (onnxruntime splits no sum across threads)."""
    from ctxbench.retrieval.minilm_onnx import OnnxMiniLM

    texts = QUERY_TEXTS + ["why does the modal screen keep the focus " * 12, "x"]
    one = OnnxMiniLM(bundled_model_path(), threads=1)
    two = OnnxMiniLM(bundled_model_path(), threads=2)
    for text in texts:
        assert np.array_equal(one.encode([text], 256), two.encode([text], 256))
    assert np.array_equal(one.encode(texts, 64), two.encode(texts, 64))


@pytest.mark.model
def test_int8_query_graph_is_close_to_float32_and_used_for_queries_only():
    """``query_int8``: queries (``query=True``) run by the int8 graph, near the float32 vector but not it; every other
    text still by the float32 graph, bit for bit, so a stored message's vector does not depend on the call; and the
    int8 vectors, too, are the same bits on one thread or two (plan ids hash the similarities)."""
    from ctxbench.retrieval.minilm_onnx import OnnxMiniLM

    plain = OnnxMiniLM(bundled_model_path(), threads=1)
    one = OnnxMiniLM(bundled_model_path(), threads=1, query_int8=True)
    two = OnnxMiniLM(bundled_model_path(), threads=2, query_int8=True)
    assert one.query_session is not one.session and plain.query_session is plain.session
    for text in QUERY_TEXTS:
        exact = plain.encode([text], 256)[0]
        quick = one.encode([text], 256, query=True)[0]
        assert np.array_equal(one.encode([text], 256)[0], exact)  # not a query: float32
        assert np.array_equal(plain.encode([text], 256, query=True)[0], exact)  # no int8 graph asked for
        assert not np.array_equal(quick, exact)
        assert 0.95 < float(quick @ exact) < 0.99999  # 0.986-0.998 over the 433 bench questions; "ok": 0.970
        assert float(np.linalg.norm(quick)) == pytest.approx(1.0, abs=1e-5)
        assert np.array_equal(two.encode([text], 256, query=True)[0], quick)
    # several queries in one call: each as it is alone (the int8 graph's activation scale is per batch)
    assert np.array_equal(one.encode(QUERY_TEXTS, 256, query=True),
                          np.vstack([one.encode([t], 256, query=True) for t in QUERY_TEXTS]))


def test_quantize_columns_keeps_each_column_within_half_a_step():
    from ctxbench.retrieval.minilm_onnx import quantize_columns

    rng = np.random.default_rng(7)
    weight = rng.normal(size=(64, 5)).astype(np.float32) * np.array([1.0, 0.01, 3.0, 0.5, 0.0], dtype=np.float32)
    values, scale = quantize_columns(weight)
    assert values.dtype == np.int8 and scale.dtype == np.float32 and scale.shape == (5,)
    assert np.abs(values).max() == 127 and (np.abs(values).max(axis=0)[:4] == 127).all()
    assert (values[:, 4] == 0).all() and scale[4] == 1.0  # an all-zero column: no division by zero
    assert (np.abs(values * scale - weight) <= scale / 2 + 1e-7).all()


@pytest.mark.model
@pytest.mark.parametrize("precision", ["int8", "float32"])
def test_embedder_encodes_queries_by_the_configured_precision(precision):
    from ctxbench.retrieval.query_vector import encode_query

    emb = Embedder(EmbeddingConfig(query_precision=precision, bulk_precision="float32"))
    text = QUERY_TEXTS[0]
    as_text = emb.encode([text], max_seq_length=256)[0]
    as_query = encode_query(emb, text, 256)
    assert np.array_equal(as_query, emb.encode_query(text, max_seq_length=256))
    assert np.array_equal(as_query, as_text) == (precision == "float32")
    assert emb.query_key == (emb.key + "|query-int8" if precision == "int8" else emb.key)


def test_unknown_query_precision_is_a_clear_error():
    emb = Embedder(EmbeddingConfig(query_precision="int4"))
    with pytest.raises(EmbedderError, match="query_precision 'int4'.*int8, float32"):
        emb.wait(timeout=60)


def test_encode_query_falls_back_to_encode_for_embedders_without_a_query_path():
    from ctxbench.retrieval.query_vector import encode_query

    emb = HashingEmbedder(64)
    assert np.array_equal(encode_query(emb, "render the table", 64), emb.encode(["render the table"])[0])


def test_query_threads_are_capped_by_the_cores(monkeypatch):
    from ctxbench.retrieval import embedding_runtime

    monkeypatch.setattr(embedding_runtime.os, "cpu_count", lambda: 2)
    assert [embedding_runtime.query_thread_count(n) for n in (0, -1, 1, 2, 8)] == [0, 0, 1, 2, 2]
    monkeypatch.setattr(embedding_runtime.os, "cpu_count", lambda: None)
    assert embedding_runtime.query_thread_count(4) == 1
    assert EmbeddingConfig().query_threads == 2


def test_numpy_encoder_only_for_models_it_computes_exactly(tmp_path):
    from ctxbench.retrieval.model_dir import numpy_compatible

    src = bundled_model_path()
    assert numpy_compatible(src)
    other = tmp_path / "cls"
    shutil.copytree(src, other, ignore=shutil.ignore_patterns("model.safetensors"))
    pooling = other / "1_Pooling" / "config.json"
    pooling.write_text(pooling.read_text().replace('"pooling_mode_cls_token": false', '"pooling_mode_cls_token": true'))
    assert not numpy_compatible(other)
    assert not numpy_compatible(tmp_path / "missing")
    with pytest.raises(EmbedderError, match="query_runtime"):
        Embedder(EmbeddingConfig(query_runtime="tensorrt")).wait(timeout=60)


def test_an_unknown_bulk_runtime_is_refused_in_one_line():
    emb = Embedder(EmbeddingConfig(bulk_runtime="gpu"))
    with pytest.raises(EmbedderError, match=r"embedding.bulk_runtime 'gpu': expected one of onnx, torch"):
        emb.wait()


INT8_COSINE_FLOOR = 0.97  # an int8 vector against the float32 one of the same text (queries: 0.970 at worst)
CARD_TEXTS = [
    "textual widget DataTable class DataTable(ScrollView) A widget to display text in a table.",
    "textual app App run def run(self, *, headless: bool = False) -> ReturnType | None Run the app.",
    "ctxbench planner plan def plan(request: PlanRequest) -> Plan Choose what fits the budget.",
    "x",
]


def test_bulk_precision_is_part_of_the_vector_key():
    base = Embedder(EmbeddingConfig(bulk_precision="float32"))
    int8 = Embedder(EmbeddingConfig(bulk_precision="int8"))
    assert base.key == "all-MiniLM-L6-v2|seq64|float32"  # float32 caches of earlier versions stay valid
    assert int8.key != base.key and int8.key.endswith("|bulk-int8")
    assert EmbeddingConfig().bulk_precision == "int8-calibrated"
    assert Embedder(EmbeddingConfig()).key.startswith(base.key + "|bulk-int8c-")


def test_unknown_bulk_precision_is_a_clear_error():
    emb = Embedder(EmbeddingConfig(bulk_precision="int4"))
    with pytest.raises(EmbedderError,
                       match=r"^embedding.bulk_precision 'int4': expected one of int8-calibrated, float32, int8$"):
        emb.wait(timeout=60)


def test_int8_bulk_precision_without_the_onnx_graph_is_refused():
    emb = Embedder(EmbeddingConfig(bulk_precision="int8", bulk_runtime="torch"))
    with pytest.raises(EmbedderError, match="bulk_precision 'int8' runs by the onnx graph"):
        emb.wait(timeout=60)


@pytest.mark.model
def test_int8_stored_vectors_are_near_float32_and_independent_of_their_batch():
    """``bulk_precision = "int8"``: cards and messages run by the int8 graph, each alone (one activation scale per
    run), so a text's vector is the same in a batch of many or on its own, and near its float32 vector."""
    plain = Embedder(EmbeddingConfig(bulk_precision="float32"))
    int8 = Embedder(EmbeddingConfig(bulk_precision="int8", numpy_max_texts=1))
    texts = CARD_TEXTS + QUERY_TEXTS
    exact = plain.encode(texts)
    quick = int8.encode(texts)
    assert int8.bulk_onnx and not np.array_equal(quick, exact)
    cosines = np.sum(quick * exact, axis=1)
    assert cosines.min() >= INT8_COSINE_FLOOR, cosines  # 0.985 min, 0.995 mean over textual's 1,500 card texts
    assert np.allclose(np.linalg.norm(quick, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(quick, np.vstack([int8.encode([t]) for t in texts]))  # few texts: same graph, same bits
    assert np.array_equal(int8.encode_query(texts[0], max_seq_length=64), quick[0])  # int8 queries: the same graph


@pytest.mark.model
@pytest.mark.parametrize("precision", ["int8", "int8-calibrated"])
def test_switching_bulk_precision_re_embeds_the_cards_and_never_mixes_vectors(tmp_path, precision):
    from ctxbench.codegraph.index import build_index, load_index
    from ctxbench.retrieval.vectors import embed_cards, embed_text, load_vectors, model_key
    from ctxbench.store.database import Database

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "shop.py").write_text(
        'def price(item):\n    """The price of an item in cents."""\n    return item.cents\n\n\n'
        'class Basket:\n    """Items a customer holds."""\n\n    def total(self):\n        return 0\n')
    conn = Database(tmp_path / "db.sqlite").dedicated_connection()
    build_index(repo, conn)
    cards = list(load_index(repo, conn).cards.values())
    plain, int8 = Embedder(EmbeddingConfig(bulk_precision="float32")), Embedder(EmbeddingConfig(bulk_precision=precision))
    first = embed_cards(cards, conn, plain)
    switched = embed_cards(cards, conn, int8)
    back = embed_cards(cards, conn, plain)
    assert first.embedded == switched.embedded == len({c.card_hash for c in cards}) > 0 and switched.reused == 0
    assert back.embedded == 0 and back.reused == first.embedded  # both sets kept, each under its own key
    by_hash = {c.card_hash: c for c in cards}
    stored_f32 = load_vectors(conn, by_hash, model_key(plain.key))
    stored_int8 = load_vectors(conn, by_hash, model_key(int8.key))
    for h, card in by_hash.items():
        assert np.allclose(stored_int8[h], int8.encode([embed_text(card)])[0], atol=1e-5)
        assert np.allclose(stored_f32[h], plain.encode([embed_text(card)])[0], atol=1e-5)  # batched: float rounding
        assert not np.allclose(stored_int8[h], stored_f32[h], atol=1e-5)
