"""all-MiniLM-L6-v2 run by onnxruntime: the encoder of queries, history messages and cards.

The numpy encoder (``minilm_numpy``) answers a query without importing torch, but its small matrix
products are slow: OpenBLAS packs every weight matrix again on each product of a few rows, so a
ten-token query took 13-15 ms on this machine (idle) — most of the default plan's 20 ms budget.
onnxruntime keeps its weights packed once and runs the same forward pass in ~5 ms.

No exported file is downloaded or shipped: the graph is written here, node by node, from the same
verified ``model.safetensors`` the numpy encoder reads (its weights, its tokenizer), and handed to
onnxruntime in memory when the model loads (~0.2 s). It takes a batch of token ids with an attention
mask, so one graph serves a single query (no padding: the mask adds nothing) and batches of cards
(padded to the longest in the batch, padded keys masked out of attention and out of the mean), as
sentence-transformers computes them (Transformer, mean Pooling, Normalize). Vectors agree with the numpy
and torch paths to float32 rounding (checked in the tests).
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ctxbench.retrieval.minilm_int8 import CONTRIB, calibrated_product, quantize_columns
from ctxbench.retrieval.minilm_numpy import NumpyMiniLM

__all__ = ["BATCH_TOKENS", "OnnxMiniLM", "build_graph", "quantize_columns"]

_MASKED = np.float32(np.finfo(np.float32).min)  # what a padded key adds to an attention score (as BERT does)
_OPSET = 17  # LayerNormalization is an operator from opset 17 on
_EMBEDDED_MAX = 4096  # constants with fewer values are written into the graph, larger ones handed over as arrays


def build_graph(model: NumpyMiniLM, *, int8: bool = False, ranges: dict[str, np.ndarray] | None = None
                ) -> tuple[bytes, dict[str, np.ndarray]]:
    """The serialized ONNX model of ``model``'s embeddings, encoder layers and masked mean pooling, and its
    weights by name. ``int8``: the 24 weight products of the encoder layers run as onnxruntime's
    ``DynamicQuantizeMatMul`` (weights int8 per output column, the activations of a run quantized to uint8 with
    one scale as they come, so a batched text's vector depends on its batch-mates), and each layer's attention
    runs as one ``MultiHeadAttention`` (the same values as the dozen operators of the float32 form, bit for bit
    on the bench questions): a quarter of the bytes to read per query and integer products, 2.8 against 5.5 ms on a ten-token query here (two threads, p50); the vectors differ from float32 ones
    by ~0.006 in cosine (``EmbeddingConfig.query_precision``). The weights are not in the serialized bytes (writing 90 MB into a protobuf took a second):
    the graph names them as external data, and the session is given the arrays themselves
    (``SessionOptions.add_external_initializers``).

    ``ranges`` (``minilm_calibration``): the calibrated int8 graph instead, every weight product with fixed activation
    scales from these calibrated ranges (``minilm_int8.calibrated_product``) and the fused attention, so texts run
    in padded batches without changing each other's vectors (``bulk_precision = "int8-calibrated"``).

    Inputs: ``input_ids`` and ``token_type_ids`` (int64, batch x length), ``position_ids`` (int64, length),
    ``mask`` (float32, batch x length: 1 for a token, 0 for padding) and ``mask_bias`` (float32,
    batch x 1 x 1 x length: 0 for a token, the float32 minimum for padding). Output ``pooled`` (float32,
    batch x hidden): the masked mean of the last layer, not yet of unit length.
    """
    from onnx import TensorProto, helper, numpy_helper

    hidden, heads = model.hidden, model.heads
    head = hidden // heads
    w = model.w
    nodes: list = []
    inits: list = []
    weights: dict[str, np.ndarray] = {}

    def const(name: str, value) -> str:
        array = np.asarray(value)
        if array.size < _EMBEDDED_MAX:
            inits.append(numpy_helper.from_array(array, name))
            return name
        tensor = TensorProto(name=name, data_type=helper.np_dtype_to_tensor_dtype(array.dtype),
                             dims=list(array.shape), data_location=TensorProto.EXTERNAL)
        entry = tensor.external_data.add()
        entry.key, entry.value = "location", "given-by-ctxbench"  # never read: the session is handed the array
        inits.append(tensor)
        weights[name] = np.ascontiguousarray(array)
        return name

    def node(op: str, inputs: list[str], output: str, **attrs) -> str:
        nodes.append(helper.make_node(op, inputs, [output], **attrs))
        return output

    fused = int8 or ranges is not None  # MultiHeadAttention, an onnxruntime operator

    def linear(x: str, weight: np.ndarray, bias: np.ndarray, name: str) -> str:
        """``x @ weight + bias``, in float32 or (``int8``) as one quantized product with its bias."""
        if ranges is not None:
            return calibrated_product(node, const, x, weight, bias, name, ranges[name], ranges[name + "_min"])
        if not int8:
            return node("Add", [node("MatMul", [x, const(name + "_w", weight)], name + "0"), const(name + "_b", bias)],
                        name)
        values, scale = quantize_columns(np.asarray(weight, dtype=np.float32))
        nodes.append(helper.make_node(
            "DynamicQuantizeMatMul", [x, const(name + "_wq", values), const(name + "_ws", scale), "",
                                      const(name + "_b", bias)], [name], domain=CONTRIB))
        return name

    const("heads_shape", np.array([0, 0, heads, head], dtype=np.int64))  # 0: keep that dimension
    const("hidden_shape", np.array([0, 0, hidden], dtype=np.int64))
    const("scale", np.float32(1.0 / np.sqrt(head)))
    const("sqrt_two", np.float32(1.4142135623730951))
    const("one", np.float32(1.0))
    const("half", np.float32(0.5))
    const("qkv_split", np.array([hidden, hidden, hidden], dtype=np.int64))
    const("last_axis", np.array([-1], dtype=np.int64))
    const("token_axis", np.array([1], dtype=np.int64))

    words = node("Gather", [const("word_emb", w["embeddings.word_embeddings.weight"]), "input_ids"], "words")
    positions = node("Gather", [const("pos_emb", w["embeddings.position_embeddings.weight"]), "position_ids"],
                     "positions")
    types = node("Gather", [const("type_emb", w["embeddings.token_type_embeddings.weight"]), "token_type_ids"],
                 "types")
    x = node("Add", [node("Add", [words, positions], "emb0"), types], "emb1")
    x = node("LayerNormalization", [x, const("emb_ln_w", w["embeddings.LayerNorm.weight"]),
                                    const("emb_ln_b", w["embeddings.LayerNorm.bias"])], "emb", axis=-1,
             epsilon=model.eps)

    if fused:
        node("Cast", ["mask"], "key_mask", to=TensorProto.INT32)  # MultiHeadAttention's key padding mask: 1 a token

    for i, (qkv_w, qkv_b, out_w, out_b, norm1_w, norm1_b, up_w, up_b, down_w, down_b, norm2_w,
            norm2_b) in enumerate(model._layers):
        p = f"l{i}_"
        qkv = linear(x, qkv_w, qkv_b, p + "qkv")
        nodes.append(helper.make_node("Split", [qkv, "qkv_split"], [p + "q0", p + "k0", p + "v0"], axis=2))
        if fused:  # one fused operator: the dozen small ones of the float32 form cost more than their arithmetic
            nodes.append(helper.make_node("MultiHeadAttention", [p + "q0", p + "k0", p + "v0", "", "key_mask"],
                                          [p + "c"], domain=CONTRIB, num_heads=heads))
        else:  # operator by operator (BERT's masked softmax): the form the stored vectors were checked against
            q = node("Transpose", [node("Reshape", [p + "q0", "heads_shape"], p + "q1")], p + "q", perm=[0, 2, 1, 3])
            k = node("Transpose", [node("Reshape", [p + "k0", "heads_shape"], p + "k1")], p + "k", perm=[0, 2, 3, 1])
            v = node("Transpose", [node("Reshape", [p + "v0", "heads_shape"], p + "v1")], p + "v", perm=[0, 2, 1, 3])
            scores = node("Add", [node("Mul", [node("MatMul", [q, k], p + "s0"), "scale"], p + "s1"), "mask_bias"],
                          p + "s")
            probs = node("Softmax", [scores], p + "probs", axis=-1)
            ctx = node("Transpose", [node("MatMul", [probs, v], p + "c0")], p + "c1", perm=[0, 2, 1, 3])
            node("Reshape", [ctx, "hidden_shape"], p + "c")
        attn = linear(p + "c", out_w, out_b, p + "o1")
        x1 = node("LayerNormalization", [node("Add", [attn, x], p + "o2"), const(p + "n1_w", norm1_w),
                                         const(p + "n1_b", norm1_b)], p + "x1", axis=-1, epsilon=model.eps)
        up = linear(x1, up_w, up_b, p + "u")
        erf = node("Erf", [node("Div", [up, "sqrt_two"], p + "g0")], p + "g1")  # the form onnxruntime fuses
        gelu = node("Mul", [node("Mul", [up, node("Add", [erf, "one"], p + "g2")], p + "g3"), "half"], p + "g")
        down = linear(gelu, down_w, down_b, p + "d1")
        x = node("LayerNormalization", [node("Add", [down, x1], p + "d2"), const(p + "n2_w", norm2_w),
                                        const(p + "n2_b", norm2_b)], p + "x2", axis=-1, epsilon=model.eps)

    mask3 = node("Unsqueeze", ["mask", "last_axis"], "mask3")
    summed = node("ReduceSum", [node("Mul", [x, mask3], "masked"), "token_axis"], "summed", keepdims=0)
    count = node("ReduceSum", ["mask", "token_axis"], "count", keepdims=1)
    node("Div", [summed, count], "pooled")

    def tensor(name: str, kind: int, shape: list) -> object:
        return helper.make_tensor_value_info(name, kind, shape)

    graph = helper.make_graph(
        nodes, "all-MiniLM-L6-v2",
        [tensor("input_ids", TensorProto.INT64, ["batch", "length"]),
         tensor("token_type_ids", TensorProto.INT64, ["batch", "length"]),
         tensor("position_ids", TensorProto.INT64, ["length"]),
         tensor("mask", TensorProto.FLOAT, ["batch", "length"]),
         tensor("mask_bias", TensorProto.FLOAT, ["batch", 1, 1, "length"])],
        [tensor("pooled", TensorProto.FLOAT, ["batch", hidden])], inits)
    opsets = [helper.make_opsetid("", _OPSET)] + ([helper.make_opsetid(CONTRIB, 1)] if fused else [])
    onnx_model = helper.make_model(graph, opset_imports=opsets)
    onnx_model.ir_version = min(onnx_model.ir_version, 9)  # what onnxruntime 1.2x reads
    return onnx_model.SerializeToString(), weights


BATCH_TOKENS = 4096  # tokens (padded) of one batch at most: long texts run in smaller batches, so a batch's
# activations stay bounded (attention alone is batch x 12 x length^2 floats: 100 MB for 32 texts of 256 tokens)


def _batches(order: list[int], lengths: list[int], size: int) -> list[list[int]]:
    """``order`` (longest first) cut into batches of at most ``size`` texts and ``BATCH_TOKENS`` padded tokens."""
    out: list[list[int]] = []
    for i in order:
        if out and len(out[-1]) < size and lengths[out[-1][0]] * (len(out[-1]) + 1) <= BATCH_TOKENS:
            out[-1].append(i)
        else:
            out.append([i])
    return out


class OnnxMiniLM:
    """A BERT encoder (the all-MiniLM-L6-v2 architecture) with mean pooling and unit length, by onnxruntime."""

    def __init__(self, model_dir: Path, threads: int = 1, batch_size: int = 32, *, query_int8: bool = False,
                 stored_int8: bool = False, stored_ranges: Callable[[], dict[str, np.ndarray]] | None = None,
                 calibrated_batch_size: int = 16):
        reference = NumpyMiniLM(model_dir)
        self.hidden = reference.hidden
        self.max_positions = reference.max_positions
        self.batch_size = max(1, batch_size)
        self.threads = max(0, threads)
        self._reference = reference  # its tokenizer; its weight arrays are the session's (not copied)
        # one tokenizer per truncation length, so calls at different lengths (a query at 256 while cards run at 64)
        # never change each other's cut: with onnxruntime's sessions safe to run from several threads, so is encode
        self._tokenizers: dict[int, object] = {}
        self._tokenizer_lock = threading.Lock()
        self._weights: list = []  # every array handed to a session, kept alive: the sessions do not copy them
        # ``stored_ranges``: stored texts by the calibrated int8 graph (``EmbeddingConfig.bulk_precision``), whose
        # activation ranges it returns (``minilm_calibration.shipped_ranges``), made on first use like the float32
        # one, run in batches of its own size
        self._stored_ranges = stored_ranges
        self._stored_calibrated = stored_ranges is not None
        stored_calibrated = self._stored_calibrated
        self.calibrated_batch_size = max(1, calibrated_batch_size)
        # texts that are stored, and queries unless int8; without onnxruntime's memory arena, which kept the largest
        # batch's activations for the life of the process (the workbench stayed at 1.2 GB after embedding a history)
        # ``stored_int8``: stored texts by the int8 graph instead (``EmbeddingConfig.bulk_precision``), one text per run
        int8 = self._session(*build_graph(reference, int8=True), arena=not stored_int8) \
            if query_int8 or stored_int8 else None
        self._stored_lock = threading.Lock()
        # the stored texts' session is made when a text is first stored, unless queries need it too: a start whose
        # texts all have vectors (the demo's second start, a reopened session) never builds it (~half the load)
        self._stored = int8 if stored_int8 else (
            None if query_int8 or stored_calibrated else self._session(*build_graph(reference), arena=False))
        # queries (``encode(..., query=True)``) by an int8 graph when asked; other texts always by the stored texts'
        # graph, so a message's cached vector is the same whichever call embedded it
        self.query_session = int8 if query_int8 else (
            self._stored if not (stored_int8 or stored_calibrated) else self._session(*build_graph(reference),
                                                                                     arena=False))
        self._int8_sessions = tuple(s for s in (int8,) if s is not None)

    @property
    def session(self):
        """The session that embeds stored texts (cards, messages), made on first use."""
        if self._stored is None:
            with self._stored_lock:
                if self._stored is None:
                    self._stored = self._session(*self._stored_graph(), arena=False)
        return self._stored

    def _stored_graph(self) -> tuple[bytes, dict[str, np.ndarray]]:
        if self._stored_ranges is None:
            return build_graph(self._reference)
        return build_graph(self._reference, ranges=self._stored_ranges())

    @property
    def stored_session_built(self) -> bool:
        """Whether the stored texts' session has been made (a start that embeds nothing never makes it)."""
        return self._stored is not None

    def _session(self, graph: bytes, weights: dict[str, np.ndarray], *, arena: bool = True):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.enable_cpu_mem_arena = arena
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3  # warnings of the optimizer are not the user's business
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # idle threads leave the core
        names = list(weights)
        values = [ort.OrtValue.ortvalue_from_numpy(weights[name]) for name in names]
        self._weights.extend(values)
        options.add_external_initializers(names, values)
        return ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])

    def _run(self, session, ids: np.ndarray, types: np.ndarray, mask: np.ndarray) -> np.ndarray:
        bias = ((np.float32(1.0) - mask) * _MASKED)[:, None, None, :].astype(np.float32)
        feeds = {"input_ids": ids, "token_type_ids": types, "position_ids": np.arange(ids.shape[1], dtype=np.int64),
                 "mask": mask, "mask_bias": bias}
        pooled = session.run(["pooled"], feeds)[0]
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, np.float32(1e-12))).astype(np.float32, copy=False)

    def tokenizer(self, length: int):
        """The model's tokenizer cutting texts at ``length`` tokens (made once per length)."""
        with self._tokenizer_lock:
            found = self._tokenizers.get(length)
            if found is None:
                from tokenizers import Tokenizer

                found = Tokenizer.from_str(self._reference.tokenizer.to_str())
                found.no_padding()
                found.enable_truncation(length)
                self._tokenizers[length] = found
            return found

    def encode(self, texts: Sequence[str], max_seq_length: int = 256,
               progress: Callable[[int, int], None] | None = None, *, query: bool = False) -> np.ndarray:
        """Unit-length float32 vectors, one row per text. A single text runs alone (no padding); more run in
        batches of similar length (sorted, as sentence-transformers does), padded to the longest of each.
        ``query``: the texts are queries, run by the query graph (int8 when the model was made with
        ``query_int8``; then one at a time)."""
        session = self.query_session if query else self.session
        out = np.zeros((len(texts), self.hidden), dtype=np.float32)
        if not texts:
            return out
        tokenizer = self.tokenizer(min(max_seq_length, self.max_positions))
        encodings = tokenizer.encode_batch(list(texts)) if len(texts) > 1 else [tokenizer.encode(texts[0])]
        order = sorted(range(len(texts)), key=lambda i: -len(encodings[i].ids))
        done = 0
        # the int8 graph quantizes a whole batch's activations with one scale: each text run by it (a query, or a card
        # with ``stored_int8``) runs alone, so its vector does not depend on what it was batched with (the calibrated
        # graph's scales are fixed: its texts run in batches)
        size = 1 if any(session is s for s in self._int8_sessions) else (
            self.calibrated_batch_size if self._stored_calibrated and session is self._stored else self.batch_size)
        for rows in _batches(order, [len(e.ids) for e in encodings], size):
            length = max(len(encodings[i].ids) for i in rows)
            ids = np.zeros((len(rows), length), dtype=np.int64)
            types = np.zeros((len(rows), length), dtype=np.int64)
            mask = np.zeros((len(rows), length), dtype=np.float32)
            for r, i in enumerate(rows):
                enc = encodings[i]
                n = len(enc.ids)
                ids[r, :n], types[r, :n], mask[r, :n] = enc.ids, enc.type_ids, 1.0
            out[rows] = self._run(session, ids, types, mask)
            done += len(rows)
            if progress is not None:
                progress(done, len(texts))
        return out
