"""Capsules of code (``[capsules]``)."""
from __future__ import annotations

from dataclasses import dataclass

from ctxbench.config.constraints import PositiveInt, Share


@dataclass(frozen=True)
class CapsuleConfig:
    """Capsules of code (seed 002): summaries of modules and processes, a retrieval aid and the scaffold's anchors.

    ``ctxbench capsules --build`` writes them (extractive from docstrings and signatures by default, or by the
    configured model with ``--model``); the code index marks one stale when a file it covers changes."""

    # -- in retrieval and plans
    max_hits: int = 2
    """capsules a RetrievalSet offers the planner (0: none); they fill the retrieval share after the cards"""
    include_stale: bool = True
    """offer stale capsules (marked, after every fresh one); false: withheld, reason ``stale``"""
    stale_weight: Share = 0.5
    """a stale capsule's score is multiplied by this when the offered capsules are chosen"""
    min_confidence: Share = 0.3
    """capsules less sure than this are never offered (undocumented code: mostly names)"""
    keyword_weight: float = 1.0
    """ranking capsules: BM25 of the query over their text, times this"""
    semantic_weight: float = 1.0
    """ranking capsules: cosine of the query to their text (when the embedder is ready), times this"""
    support_weight: float = 1.0
    """ranking capsules: how strongly the best symbol hits sit in the files they cover, times this"""
    support_hits: PositiveInt = 10
    """the first N symbol hits count as support"""
    retrieval_weight: float = 0.0
    """the symbol ranking: members of the best-matching capsules' files, in the order the other components ranked them,
    as one more fused component with this weight (0 = off: capsules stay out of the default symbol ranking; `bench code
    --capsules` measures them)"""
    seed_capsules: PositiveInt = 3
    """capsules whose members that component ranks"""
    embed_max_seq_length: PositiveInt = 128
    """model tokens of a capsule's text when it is embedded"""
    # -- extractive capsules (docstrings and signatures)
    max_symbols: int = 8
    """symbols a module capsule names, most central first"""
    doc_chars: PositiveInt = 160
    """characters of a docstring's first sentence quoted"""
    text_max_chars: PositiveInt = 1200
    """a capsule's text is cut here"""
    headline_chars: PositiveInt = 120
    """the first sentence shown in listings and beside the scaffold's anchors"""
    scaffold_modules: int = 3
    """the most central modules with a fresh capsule listed among the scaffold's anchors"""
    neighbour_modules: int = 4
    """modules named under "uses" and "used by\""""
    process_depth: int = 3
    """calls followed from an entry point for a process capsule"""
    process_steps: int = 8
    """steps a process capsule names"""
    extractive_base_confidence: Share = 0.2
    """an extractive capsule's confidence starts here; the module docstring and the share of its named symbols that have
    a docstring add to it (never above ``extractive_max_confidence``)"""
    module_doc_confidence: Share = 0.3
    """added to an extractive capsule's confidence when its module has a docstring"""
    documented_confidence: Share = 0.4
    """times the share of its named symbols that have a docstring, added to an extractive capsule's confidence"""
    extractive_max_confidence: Share = 0.9
    """the most confidence an extractive capsule may have"""
    # -- capsules written by the model (``--model``)
    model_confidence: Share = 0.7
    """the confidence of a capsule the model wrote"""
    model_input_chars: PositiveInt = 6000
    """the module's cards given to the model, cut here"""
    model_reply_tokens: PositiveInt = 300
    """max_tokens of the model's capsule call"""
    prompt: str = (
        "Write a capsule of the code below for a coding assistant that will navigate this repository: what "
        "{subject} is for, its main entry points and types, and how it fits with the modules it uses and that "
        "use it. Plain sentences, no preamble, no speculation beyond the code; at most {max_tokens} tokens.")
    """the instruction the model gets to write a capsule ({subject} and {max_tokens} are filled in)"""
