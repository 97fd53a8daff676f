"""Kept: the nested .gitignore names another file."""


def kept():
    return 1
