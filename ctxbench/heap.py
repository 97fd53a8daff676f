"""Keeping the cyclic garbage collector off the long-lived heap of a running workbench.

A session's history, the planner's per-session caches and the loaded code index live as long as
the app does. Full collections walk all of them and pause planning for 15-20 ms on a 1,000-turn
session (measured by ``ctxbench bench plan-latency``). After a big load the app calls ``settle()``:
one collection, then everything alive is moved to the permanent generation, so later full
collections only walk what was allocated since. Reference counting still frees those objects.
"""
from __future__ import annotations

import gc


def settle() -> None:
    """Collect once, then freeze what is alive (call after loading a session or an index)."""
    gc.collect()
    gc.freeze()
