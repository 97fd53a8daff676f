"""The Markdown parser of replies: GitHub-flavoured, except that an underscore touching a letter or digit is a
character, not emphasis.

Replies name code: ``__attrs_post_init__`` outside a code span was read as ``__`` strong ``__`` and shown as a
bold ``attrs_post_init``. Here a run of underscores next to a word character stays text, so identifiers keep
their underscores (``_private``, ``snake_case``, ``__init__``); emphasis by ``*`` and ``**`` is untouched, and so
are code spans and blocks (their rules run first). The cost: ``_italic_`` written with underscores shows as
typed.
"""
from __future__ import annotations

from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline


def _identifier_underscores(state: StateInline, silent: bool) -> bool:
    src, pos = state.src, state.pos
    if src[pos] != "_":
        return False
    end = pos
    while end < state.posMax and src[end] == "_":
        end += 1
    before = src[pos - 1] if pos > 0 else ""
    after = src[end] if end < state.posMax else ""
    if not (before.isalnum() or after.isalnum()):
        return False  # underscores on their own: Markdown's as usual
    if not silent:
        state.push("text", "", 0).content = src[pos:end]
    state.pos = end
    return True


def reply_parser() -> MarkdownIt:
    """A ``gfm-like`` MarkdownIt (Textual's default) whose underscores next to a word character are text."""
    parser = MarkdownIt("gfm-like")
    parser.inline.ruler.before("emphasis", "identifier_underscores", _identifier_underscores)
    return parser
