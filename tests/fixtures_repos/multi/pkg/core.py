"""Core classes of the fixture package."""
from __future__ import annotations

from typing import Optional

from pkg import util


class Base:
    """Base of every engine."""

    def start(self) -> None:
        """Start the engine."""
        self.prepare()

    def prepare(self) -> None:
        pass


class Plugin:
    """A plugin the engine runs."""

    def run(self, engine: Engine) -> int:
        return engine.speed


class Engine(Base):
    """Runs plugins.

    More words.
    """

    speed: int = 3

    def __init__(self, plugin: Optional[Plugin] = None) -> None:
        self.plugin = plugin or Plugin()
        self.helper = util.Helper()

    @property
    def name(self) -> str:
        """The engine's name."""
        return "engine"

    @name.setter
    def name(self, value: str) -> None:
        pass

    @staticmethod
    def create(speed: int = 1) -> "Engine":
        engine = Engine()
        engine.start()
        return engine

    def tick(self, count: int) -> int:
        total = self.plugin.run(self)
        self.helper.assist()
        self.start()

        def inner(x):
            return util.double(x)

        return inner(total) + count
