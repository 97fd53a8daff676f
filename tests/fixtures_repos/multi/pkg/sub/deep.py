from ..util import double as twice
from ..core import Engine
from . import leaf


def deep_call() -> int:
    engine = Engine.create(2)
    return twice(engine.tick(1)) + leaf.leaf_value()
