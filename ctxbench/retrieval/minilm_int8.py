"""The int8 weight products of MiniLM's onnx graphs (``minilm_onnx``): weights as int8 columns, and the calibrated
product that quantizes activations with fixed scales (``bulk_precision = "int8-calibrated"``).

A calibrated product ``x @ W + b`` (x: batch x length x K) runs as

- a few *outlier channels* of x (those with the largest calibrated range) in float32: ``Gather`` them and multiply by
  their rows of W; their rows are zero in the int8 weights, so clipping them in the int8 part loses nothing;
- the rest smoothed (SmoothQuant): channel k divided by ``f_k = range_k^alpha / max|W_k|^(1-alpha)`` and W's row k
  multiplied by it, which moves the activations' channel outliers into the weights, where per-column scales absorb
  them; then ``QuantizeLinear`` with one fixed scale (the largest smoothed range over 127, or over 255 with a zero
  point where the input is one-sided, as after GELU) and ``MatMulIntegerToFloat`` (uint8 x int8, integer sums, the
  per-column dequantization and the bias in one operator).

Every step is per token, so a text's vector does not depend on what it is batched with.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

INT8_PEAK = 127  # symmetric int8: -127..127, so a column's scale maps its largest magnitude to the end
CONTRIB = "com.microsoft"  # onnxruntime's own operators (DynamicQuantizeMatMul, MatMulIntegerToFloat, ...)

# How the calibrated graph quantizes, chosen by the cosine to float32 on 300-400 of textual's card texts (a tune set)
# and the time of a batch: per product kind, how many outlier channels stay float32 and whether its input is quantized
# one-sided (after GELU); the smoothing exponent (0.5 / 0.6 / 0.85 were further from float32). 1 - mean cosine:
# 2.2e-3 with no float channels, 8.7e-4 with 8 in the FFN's down product, 7.0e-4 with 8 in the up product too (this),
# 6.7e-4 with 8 in the query/key/value product as well (each float channel set costs a Gather, a MatMul and an Add:
# 1.73x float32's speed with all three, 1.90x without the query/key/value one). The weights alone as int8: 3.6e-4.
# Without the up product's float channels (8.7e-4) the tune pool's semantic-only R@10 moved by +0.017, outside the
# 0.005 the default asks. Attention: onnxruntime's MultiHeadAttention (the operator-by-operator form gave the same
# vectors to 2e-7 and was no faster). Part of the calibrated vectors' key (``minilm_calibration.calibration_tag``).
CALIBRATED_SCHEME = {"alpha": 0.75, "float_channels": {"qkv": 0, "o1": 0, "u": 8, "d1": 8}, "one_sided": ("d1",),
                     "attention": "MultiHeadAttention"}


def quantize_columns(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``weight`` (in x out) as int8 with one float32 scale per output column, symmetric (zero point 0): each
    column's largest magnitude maps to 127. What onnxruntime's per-channel dynamic quantization writes."""
    peak = np.abs(weight).max(axis=0)
    scale = np.where(peak > 0, peak / np.float32(INT8_PEAK), np.float32(1.0)).astype(np.float32)
    values = np.clip(np.rint(weight / scale), -INT8_PEAK, INT8_PEAK).astype(np.int8)
    return values, scale


def calibrated_product(node: Callable[..., str], const: Callable[[str, object], str], x: str, weight: np.ndarray,
                       bias: np.ndarray, name: str, high: np.ndarray, low: np.ndarray) -> str:
    """Add the nodes of ``x @ weight + bias`` with fixed activation scales from the calibrated per-channel ``high``
    and ``low`` values of ``x``; the output's name. ``node(op, inputs, output, domain=..., **attrs)`` adds a node,
    ``const(name, array)`` a constant (module docstring)."""
    scheme = CALIBRATED_SCHEME  # what the vectors' key names (minilm_calibration.calibration_tag)
    kind = name.split("_", 1)[1]
    weight = np.array(weight, dtype=np.float32)
    peak = np.maximum(np.asarray(high, dtype=np.float32), -np.asarray(low, dtype=np.float32))
    high, low = np.array(high, dtype=np.float32), np.array(low, dtype=np.float32)
    extra = None
    kept = int(scheme["float_channels"].get(kind, 0))
    if kept:
        outliers = np.sort(np.argsort(peak, kind="stable")[len(peak) - kept:]).astype(np.int64)
        picked = node("Gather", [x, const(name + "_oi", outliers)], name + "_o0", axis=-1)
        extra = node("MatMul", [picked, const(name + "_ow", weight[outliers])], name + "_o1")
        weight[outliers] = 0.0
        peak[outliers] = high[outliers] = low[outliers] = 0.0
    alpha = float(scheme["alpha"])
    w_peak = np.maximum(np.abs(weight).max(axis=1), np.float32(1e-8))
    factor = (np.maximum(peak, np.float32(1e-5)) ** alpha / w_peak ** (1 - alpha)).astype(np.float32)
    hi, lo = float((high / factor).max()), float((low / factor).min())
    if kind in scheme["one_sided"]:
        step = np.float32(max(hi - lo, 1e-8) / 255.0)
        zero = np.uint8(np.clip(np.rint(-lo / step), 0, 255))
    else:
        step, zero = np.float32(max(hi, -lo, 1e-8) / INT8_PEAK), np.uint8(128)
    smoothed = node("Mul", [x, const(name + "_sm", (np.float32(1.0) / factor).astype(np.float32))], name + "_s")
    q = node("QuantizeLinear", [smoothed, const(name + "_as", step), const(name + "_az", zero)], name + "_q")
    values, scale = quantize_columns((factor[:, None] * weight).astype(np.float32))
    out = name if extra is None else name + "_i8"
    node("MatMulIntegerToFloat", [q, const(name + "_wq", values), name + "_as", const(name + "_ws", scale),
                                  name + "_az", "", const(name + "_b", bias)], out, domain=CONTRIB)
    return out if extra is None else node("Add", [out, extra], name)
