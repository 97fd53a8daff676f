"""all-MiniLM-L6-v2 in numpy: the query encoder of one-shot commands, without importing torch.

Importing torch and sentence-transformers takes most of the ~9 s a one-shot command (``retrieve``,
``plan --repo``) used to wait for before it could embed a single question. A query is a few dozen
tokens, so the same BERT forward pass in numpy (weights read from the same verified
``model.safetensors``, the fast tokenizer from the model's ``tokenizer.json``) answers it in
milliseconds after a load of a fraction of a second. Mean pooling over the attention mask and
unit length, as the sentence-transformers pipeline of this model does (``modules.json``: Transformer,
Pooling, Normalize). Vectors agree with the torch path to float32 rounding (checked in the tests).

Bulk encoding (cards at indexing) stays on torch: batched, it is several times faster there.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

_SQRT_HALF = np.float32(0.7071067811865476)


def _erf(x: np.ndarray) -> np.ndarray:
    """erf (numpy has none): Abramowitz & Stegun 7.1.26, absolute error below 1.5e-7, in float64."""
    t64 = x.astype(np.float64)
    sign = np.sign(t64)
    a = np.abs(t64)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return (sign * (1.0 - poly * np.exp(-a * a))).astype(np.float32)


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x * _SQRT_HALF))


def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


class NumpyMiniLM:
    """A BERT encoder (the all-MiniLM-L6-v2 architecture) with mean pooling, in numpy float32."""

    def __init__(self, model_dir: Path):
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        model_dir = Path(model_dir)
        cfg = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        self.layers = int(cfg["num_hidden_layers"])
        self.heads = int(cfg["num_attention_heads"])
        self.hidden = int(cfg["hidden_size"])
        self.eps = float(cfg.get("layer_norm_eps", 1e-12))
        self.max_positions = int(cfg.get("max_position_embeddings", 512))
        if cfg.get("hidden_act", "gelu") != "gelu" or cfg.get("model_type", "bert") != "bert":
            raise ValueError("only BERT models with gelu are supported by the numpy encoder")
        weights = load_file(str(model_dir / "model.safetensors"))
        self.w = {k.removeprefix("bert."): v.astype(np.float32, copy=False) for k, v in weights.items()}
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.no_padding()
        self._truncation = 0

    def _tokens(self, text: str, max_seq_length: int) -> tuple[np.ndarray, np.ndarray]:
        if self._truncation != max_seq_length:
            self.tokenizer.enable_truncation(max_seq_length)
            self._truncation = max_seq_length
        enc = self.tokenizer.encode(text)
        return np.asarray(enc.ids, dtype=np.int64), np.asarray(enc.type_ids, dtype=np.int64)

    def encode(self, texts: Sequence[str], max_seq_length: int = 256) -> np.ndarray:
        """Unit-length float32 vectors, one row per text (texts run one at a time: no padding)."""
        limit = min(max_seq_length, self.max_positions)
        out = np.zeros((len(texts), self.hidden), dtype=np.float32)
        for row, text in enumerate(texts):
            ids, types = self._tokens(text, limit)
            vec = self._forward(ids, types).mean(0)
            norm = float(np.linalg.norm(vec))
            out[row] = vec / max(norm, 1e-12)
        return out

    def _forward(self, ids: np.ndarray, types: np.ndarray) -> np.ndarray:
        w, eps = self.w, self.eps
        n = len(ids)
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n]
             + w["embeddings.token_type_embeddings.weight"][types])
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
        d = self.hidden // self.heads
        scale = np.float32(1.0 / np.sqrt(d))
        for i in range(self.layers):
            p = f"encoder.layer.{i}."

            def dense(v: np.ndarray, name: str) -> np.ndarray:
                return v @ w[p + name + ".weight"].T + w[p + name + ".bias"]

            q = dense(x, "attention.self.query").reshape(n, self.heads, d).transpose(1, 0, 2)
            k = dense(x, "attention.self.key").reshape(n, self.heads, d).transpose(1, 2, 0)
            v = dense(x, "attention.self.value").reshape(n, self.heads, d).transpose(1, 0, 2)
            scores = (q @ k) * scale
            scores -= scores.max(-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(-1, keepdims=True)
            ctx = (probs @ v).transpose(1, 0, 2).reshape(n, self.hidden)
            x = _layer_norm(dense(ctx, "attention.output.dense") + x, w[p + "attention.output.LayerNorm.weight"],
                            w[p + "attention.output.LayerNorm.bias"], eps)
            h = _gelu(dense(x, "intermediate.dense"))
            x = _layer_norm(dense(h, "output.dense") + x, w[p + "output.LayerNorm.weight"],
                            w[p + "output.LayerNorm.bias"], eps)
        return x
