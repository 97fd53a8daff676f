"""ctxbench: see and steer what goes into an LLM context window."""
__version__ = "0.1.0"
