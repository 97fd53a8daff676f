"""The benches' section (``[bench]``) and the prompt-cache price their cost columns assume."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from ctxbench.config.constraints import PositiveFloat
from ctxbench.validation import Range


@dataclass(frozen=True)
class CachePrice:
    """The price assumption of a prompt cache, as the benches' cost columns use it: a cached prefix is read at
    ``read`` times the input price, the rest of the prompt is written to the cache at ``write`` times it (a
    breakpoint at the prompt's end, so the next turn can read it)."""

    name: str = "anthropic 5-minute cache, $3/Mtok input"
    """said beside every cost figure"""
    input_per_mtok: PositiveFloat = 3.00
    """USD per million uncached input tokens"""
    read: Annotated[float, Range(ge=0)] = 0.1
    """a cache read, as a multiple of the input price"""
    write: Annotated[float, Range(ge=0)] = 1.25
    """a cache write (5-minute), as a multiple of the input price"""


@dataclass(frozen=True)
class BenchConfig:
    results_dir: str = "benchmarks/results"
    """where `ctxbench bench locomo` / `bench perf` write their results and /bench reads them (relative paths: from the
    current directory)"""
    cache_price: CachePrice = field(default_factory=CachePrice)
    """the prompt-cache price the benches' cost-per-turn columns assume"""
