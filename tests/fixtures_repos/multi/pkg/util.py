"""Helpers."""


def double(x: int) -> int:
    """Twice x."""
    return x * 2


class Helper:
    def assist(self) -> int:
        return double(2)
