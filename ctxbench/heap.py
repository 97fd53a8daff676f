"""Keeping the cyclic garbage collector off the long-lived heap of a running workbench.

A session's history, the planner's per-session caches and the loaded code index live as long as
the app does. Full collections walk all of them and pause planning for 15-20 ms on a 1,000-turn
session (measured by ``ctxbench bench plan-latency``). After a big load the app calls ``settle()``:
one collection, then everything alive is moved to the permanent generation, so later full
collections only walk what was allocated since. Reference counting still frees those objects.

It also lets the young generation grow to ``YOUNG_THRESHOLD`` objects before a collection (Python's
default is 700). A plan at a 32k budget keeps ~830 items alive until the next plan replaces them:
with 700, every plan ran ~4 young and ~0.4 middle collections that walked the items it had just made
(~1.3 ms per plan at 1,000 turns); with 10,000 most of them are freed by reference counting before any
collection sees them. Measured on the default plan at 32k, 300 plans per threshold interleaved in one
process: p50 / p95 13.9 / 18.9 ms with 700, 13.0 / 16.7 ms with 10,000 (50,000: 13.0 / 17.6).

Then it hands the C heap's free pages back to the system (glibc's ``malloc_trim``): embedding a history
frees its batches' activations, but the allocator kept the pages, and the workbench on the demo stayed at
~790 MB after its warm-up instead of ~500 MB. Elsewhere (no glibc) nothing happens.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import gc
from contextlib import contextmanager
from typing import Iterator

YOUNG_THRESHOLD = 10_000  # tracked objects allocated (net) before a young collection; Python's default: 700


def settle() -> None:
    """Collect once, then freeze what is alive (call after loading a session or an index), and let the young
    generation grow to ``YOUNG_THRESHOLD`` (the older generations' thresholds are kept)."""
    gc.collect()
    gc.freeze()
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(YOUNG_THRESHOLD, young), middle, old)
    release_free_memory()


def release_free_memory() -> bool:
    """Give the C heap's free pages back to the system (glibc ``malloc_trim(0)``); False where there is none."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        trim = getattr(libc, "malloc_trim", None)
    except OSError:
        return False
    if trim is None:
        return False
    trim(0)
    return True


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic collector paused for the block (it is one per process: keep the block to work that makes many
    objects and no cyclic garbage worth collecting, e.g. parsing, or loading what then lives on), on again after
    unless it was off before."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
