"""The fixture package: an engine with plugins.

Second paragraph is not part of the card doc.
"""
from .core import Engine

__all__ = ["Engine"]
