"""Training of ctxbench's own code-aware encoder (issue 28): never imported by the product.

``training.mine`` fetches permissively licensed packages from PyPI and npm at pinned versions (``packages.toml``)
and builds (description -> code) pairs from them with ctxbench's own indexer; ``training.train`` fine-tunes the
installed all-MiniLM-L6-v2 on those pairs;
``training.interpolate`` mixes the fine-tune with that base in weight space (WiSE-FT); ``training.pack`` packs a model
folder as int8 rows into ``ctxbench/models``. No benchmark codebase is ever mined (``training.mine.excluded_names``).
"""
