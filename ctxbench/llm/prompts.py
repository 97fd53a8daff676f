"""Prompts ctxbench itself sends to the model (beside the user's turns)."""
from __future__ import annotations

# ``/context rebuild``: the model writes the ``### STATE`` afresh from what it can see
REBUILD_PROMPT = (
    "Rewrite the session state from the conversation in your context window only. Reply with nothing but a "
    "`### STATE` block with the lines Goal:, Context:, Resolved: and Technical Anchors:, accurate to the "
    "messages you can see now (earlier state may be out of date)."
)
