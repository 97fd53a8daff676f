"""`ctxbench bench code` with questions encoded by another (query-only) sentence-transformers model, float32 by
torch; cards keep today's vectors. The asymmetric-pair experiment of the code encoder (training/train_query.py):

    python benchmarks/query_tower_eval.py QUERY_MODEL_DIR bench code --manifest benchmarks/codebases.toml \
        --role tune --db gate.db --no-plans --no-pinned --json

Run it once with the bundled MiniLM's folder as QUERY_MODEL_DIR for the baseline (the same float32 query path)."""
import os, sys
os.environ.setdefault("HF_HUB_OFFLINE", "1")
import numpy as np
from ctxbench.retrieval import embedder as emb_mod

qpath = sys.argv[1]
_model = {}

def encode_query(self, text, *, max_seq_length=None):
    self.wait()
    if "m" not in _model:
        from sentence_transformers import SentenceTransformer
        import torch
        torch.set_num_threads(1)
        m = SentenceTransformer(qpath, device="cpu", local_files_only=True)
        _model["m"] = m
    m = _model["m"]
    m.max_seq_length = max_seq_length or 256
    return m.encode([text], normalize_embeddings=True, convert_to_numpy=True)[0].astype(np.float32)

emb_mod.Embedder.encode_query = encode_query
from ctxbench.cli import main
sys.argv = ["ctxbench"] + sys.argv[2:]
main()
