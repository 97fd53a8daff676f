"""``ctxbench.heap.settle``: what the workbench does to the collector after loading."""
from __future__ import annotations

import subprocess
import sys


def test_settle_freezes_the_loaded_heap_and_lets_the_young_generation_grow():
    code = (
        "import gc\n"
        "from ctxbench.heap import YOUNG_THRESHOLD, settle\n"
        "gc.set_threshold(700, 10, 10)\n"
        "kept = [[i] for i in range(5000)]\n"
        "settle()\n"
        "print(gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10), gc.get_freeze_count() >= 5000)\n"
        "gc.set_threshold(50000, 5, 5)\n"
        "settle()\n"
        "print(gc.get_threshold())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    # a larger threshold set by someone else is kept, and so are the older generations' thresholds
    assert out.stdout.split("\n")[:2] == ["True True", "(50000, 5, 5)"]


def test_settle_hands_the_c_heaps_free_pages_back_where_glibc_is_the_allocator():
    """After a warm-up, freed activations of embedding batches go back to the system (glibc's malloc_trim)."""
    import platform

    from ctxbench.heap import release_free_memory

    assert release_free_memory() is (platform.system() == "Linux" and platform.libc_ver()[0] == "glibc")
