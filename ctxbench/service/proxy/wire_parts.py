"""What every wire format's reader shares: the part reader (texts and attached files, images counted as their
provider bills them, media, anything else, tool definitions), the hash a message is known by, the text of a
content value, and the error for a body that cannot be read.

A message's hash ignores Anthropic's ``cache_control`` markers: assistants move the cache breakpoint to
the newest message on every request, and the conversation must still be recognised by its prefix.
"""
from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from ctxbench.records.proxy import WirePart, WireTool
from ctxbench.service.proxy.images import data_url_base64, image_count
from ctxbench.tokens import Tokenizer

HASH_HEX = 24
# a text that starts with a file's path on its own line and then a code fence is an attached file (aider,
# Continue and most chat front ends attach files like that)
_ATTACHED_FILE = re.compile(r"\A\s*([\w./\\-]+\.[A-Za-z0-9]{1,10})\s*\n```")


class WireError(ValueError):
    """The body is not a request the proxy can read (it is forwarded unchanged all the same)."""


def _strip_cache_marks(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_cache_marks(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip_cache_marks(v) for v in value]
    return value


def message_hash(message: Any) -> str:
    text = json.dumps(_strip_cache_marks(message), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_HEX]


def text_of(content: Any) -> str:
    """The text of a content value: a string, or the text blocks of a list joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def only_text(content: Any) -> bool:
    if isinstance(content, str):
        return True
    return isinstance(content, list) and all(isinstance(b, dict) and b.get("type") == "text" for b in content)


def _file_label(text: str) -> str:
    match = _ATTACHED_FILE.match(text)
    return match.group(1) if match else ""


class PartReader:
    """The parts every wire format's reader makes (texts and attached files, images, media, anything else, tool
    definitions), counted with ``tokenizer``; images as ``provider`` bills them."""

    def __init__(self, tokenizer: Tokenizer, provider: str = "openai") -> None:
        self.tok = tokenizer
        self.provider = provider

    def text_part(self, text: str, location: tuple[Any, ...]) -> WirePart:
        label = _file_label(text)
        return WirePart("file" if label else "text", text, self.tok.count(text), location, label=label)

    def media_part(self, block: dict[str, Any], location: tuple[Any, ...]) -> WirePart:
        kind = str(block.get("type", "file"))
        source = block.get("source") if isinstance(block.get("source"), dict) else {}
        label = str(block.get("title") or (block.get("file") or {}).get("filename") or source.get("media_type")
                    or kind)
        text = str(source.get("data", "")) if source.get("type") == "text" else ""
        size = len(json.dumps(block, ensure_ascii=False))
        shown = text or f"[{kind} {label}, {size:,} bytes of JSON]"
        return WirePart("file", shown, self.tok.count(shown), location, label=label, replaceable=False)

    def image_part(self, data: Any, detail: Any, location: tuple[Any, ...], media_type: Any = "") -> WirePart:
        """An image, counted as the provider bills it from its base64 ``data`` (None: a URL or a file reference,
        whose size is not in the request: an estimate), never as text."""
        count = image_count(self.provider, data if isinstance(data, str) else None,
                            detail if isinstance(detail, str) else "")
        kind = f", {media_type}" if isinstance(media_type, str) and media_type else ""
        return WirePart("image", f"[{count.label()}{kind}]", count.tokens, location, label=count.label(),
                        replaceable=False)

    def openai_image(self, block: dict[str, Any], location: tuple[Any, ...]) -> WirePart:
        """A Chat Completions ``image_url`` part or a Responses ``input_image``."""
        value = block.get("image_url")
        url = value.get("url") if isinstance(value, dict) else value
        detail = value.get("detail") if isinstance(value, dict) else block.get("detail")
        return self.image_part(data_url_base64(url) if isinstance(url, str) else None, detail, location)

    def result_images(self, content: Any) -> tuple[int, str]:
        """The tokens and labels of the images among a tool result's blocks (Claude Code's Read of a screenshot,
        Codex's view_image): counted as the provider bills them, they are part of the tool's atom."""
        images = [self.image_part(b.get("source", {}).get("data") if b.get("source", {}).get("type") == "base64"
                                  else None, "", ())
                  if b.get("type") == "image" else self.openai_image(b, ())
                  for b in content if isinstance(b, dict) and b.get("type") in ("image", "input_image")] \
            if isinstance(content, list) else []
        return sum(p.tokens for p in images), "; ".join(p.label for p in images)

    def other_part(self, block: Any, location: tuple[Any, ...]) -> WirePart:
        text = block.get("thinking") or block.get("text") or "" if isinstance(block, dict) else ""
        text = str(text) or json.dumps(block, ensure_ascii=False)
        return WirePart("other", text, self.tok.count(text), location)

    def tools(self, body: dict[str, Any]) -> tuple[WireTool, ...]:
        found = []
        for i, tool in enumerate(body.get("tools") or ()):
            if not isinstance(tool, dict):
                continue
            name = str(tool.get("name") or (tool.get("function") or {}).get("name") or tool.get("type")
                       or f"tool {i + 1}")
            found.append(WireTool(name, self.tok.count(json.dumps(tool, ensure_ascii=False)), i))
        return tuple(found)
