"""Replies are Markdown, but the identifiers they name keep their underscores outside code spans."""
from __future__ import annotations

from textual.app import App
from textual.widgets import Markdown

from ctxbench.tui.markdown_parser import reply_parser
from ctxbench.tui.widgets.bubbles import AssistantBubble

REPLY = ("Override `__init__` or __attrs_post_init__ on the _private helper in snake_case_module; "
         "**bold** and *italic* still work.")


def inline_tokens(text: str):
    return reply_parser().parseInline(text)[0].children


def test_identifiers_keep_their_underscores_outside_code_spans():
    tokens = inline_tokens(REPLY)
    text = "".join(t.content for t in tokens if t.type in ("text", "code_inline"))
    assert "__attrs_post_init__" in text and "_private" in text and "snake_case_module" in text
    assert "__init__" in [t.content for t in tokens if t.type == "code_inline"]
    kinds = [t.type for t in tokens]
    assert kinds.count("strong_open") == 1 and kinds.count("em_open") == 1  # only the ** and * emphasis


def test_underscores_alone_are_still_markdown():
    assert [t.type for t in inline_tokens("a _ b __ c")] == ["text"]
    assert "em_open" in [t.type for t in inline_tokens("say *this*")]


class OneBubble(App[None]):
    def compose(self):
        yield AssistantBubble(REPLY)


async def test_an_assistant_reply_shows_a_dunder_as_written():
    app = OneBubble()
    async with app.run_test() as pilot:
        await pilot.pause()
        markdown = app.query_one(Markdown)
        shown = " ".join(str(block._content) if hasattr(block, "_content") else str(block.render())
                         for block in markdown.query("MarkdownParagraph"))
        assert "__attrs_post_init__" in shown and "snake_case_module" in shown
