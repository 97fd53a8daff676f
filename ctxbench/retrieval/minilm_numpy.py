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
_ONE, _HALF, _AS_P = np.float32(1.0), np.float32(0.5), np.float32(0.3275911)
_AS = tuple(np.float32(c) for c in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429))


def _gelu(x: np.ndarray) -> np.ndarray:
    """GELU with erf (numpy has none) by Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7), in float32
    throughout: four times faster than in float64, and as close to the exact erf at float32 precision."""
    a = np.abs(x) * _SQRT_HALF
    t = _ONE / (_ONE + _AS_P * a)
    poly = t * (_AS[0] + t * (_AS[1] + t * (_AS[2] + t * (_AS[3] + t * _AS[4]))))
    erf_abs = _ONE - poly * np.exp(-a * a)
    return _HALF * x * (_ONE + np.copysign(erf_abs, x))


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
        self._layers = [self._layer(i) for i in range(self.layers)]
        self.w = {k: v for k, v in self.w.items() if not k.startswith("encoder.layer.")}  # now in ``_layers``
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.no_padding()
        self._truncation = 0

    def truncate(self, max_seq_length: int) -> None:
        """Have the tokenizer cut texts at ``max_seq_length`` tokens (set again only when it changes)."""
        if self._truncation != max_seq_length:
            self.tokenizer.enable_truncation(max_seq_length)
            self._truncation = max_seq_length

    def _tokens(self, text: str, max_seq_length: int) -> tuple[np.ndarray, np.ndarray]:
        self.truncate(max_seq_length)
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

    def _layer(self, i: int) -> tuple[np.ndarray, ...]:
        """Layer ``i``'s weights as the forward pass uses them: (in, out) and contiguous (a product with a transposed
        view ran at half speed), query, key and value in one matrix (one product instead of three)."""
        w, p = self.w, f"encoder.layer.{i}."

        def t(name: str) -> np.ndarray:
            return np.ascontiguousarray(w[p + name + ".weight"].T)

        parts = ("attention.self.query", "attention.self.key", "attention.self.value")
        return (np.ascontiguousarray(np.concatenate([w[p + n + ".weight"] for n in parts]).T),
                np.concatenate([w[p + n + ".bias"] for n in parts]),
                t("attention.output.dense"), w[p + "attention.output.dense.bias"],
                w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"],
                t("intermediate.dense"), w[p + "intermediate.dense.bias"],
                t("output.dense"), w[p + "output.dense.bias"],
                w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])

    def _forward(self, ids: np.ndarray, types: np.ndarray) -> np.ndarray:
        w, eps, hidden, heads = self.w, self.eps, self.hidden, self.heads
        n = len(ids)
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n]
             + w["embeddings.token_type_embeddings.weight"][types])
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
        d = hidden // heads
        scale = np.float32(1.0 / np.sqrt(d))
        for (qkv_w, qkv_b, out_w, out_b, norm1_w, norm1_b, up_w, up_b, down_w, down_b, norm2_w,
             norm2_b) in self._layers:
            qkv = x @ qkv_w + qkv_b
            q = qkv[:, :hidden].reshape(n, heads, d).transpose(1, 0, 2)
            k = qkv[:, hidden:2 * hidden].reshape(n, heads, d).transpose(1, 2, 0)
            v = qkv[:, 2 * hidden:].reshape(n, heads, d).transpose(1, 0, 2)
            scores = (q @ k) * scale
            scores -= scores.max(-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(-1, keepdims=True)
            ctx = (probs @ v).transpose(1, 0, 2).reshape(n, hidden)
            x = _layer_norm(ctx @ out_w + out_b + x, norm1_w, norm1_b, eps)
            x = _layer_norm(_gelu(x @ up_w + up_b) @ down_w + down_b + x, norm2_w, norm2_b, eps)
        return x
