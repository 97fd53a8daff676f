"""What a policy drop matches, and the policy's budget for tool results: pure, item facts in, a verdict out.

A drop set once for every proxied conversation names items by what they are, not by where one request holds
them (an item's id carries its message's index, which differs from client to client and request to request):

- ``tool:NAME`` — a tool definition (``*`` matches any characters: ``tool:mcp__*``, ``tool:*`` slims the list);
  one the request's conversation calls is kept;
- ``result:NAME`` — every tool call named NAME with its result (``result:Bash``, ``result:mcp__*``), in the
  turns before the one in progress (the model is still working with those);
- ``kind:KIND`` — every item of an anatomy kind (:data:`service.proxy.anatomy.SCAFFOLD_KINDS`: ``kind:skill_list``,
  ``kind:todo_list``, ``kind:memory_file``, ``kind:environment``, … — a reminder block inside a user's message,
  a section of a system message among the messages, or a whole scaffolding message), wherever it is, in the
  turn in progress too: it is the assistant's text, never the user's words;
- ``system:N`` — a system block by its number from 0 (``system:0``: Claude Code's first block, Codex's
  instructions, aider's system message where it has one), ``system`` every system block.

:func:`result_budget_drops` keeps the tool results of a request within the policy's ``results`` budget by
leaving out whole tool calls with their results, oldest first, never one of the turn in progress or a pinned one.
"""
from __future__ import annotations

import fnmatch
import re
from typing import Iterable, Sequence

from ctxbench.records.proxy import WireMessage, WirePart
from ctxbench.service.proxy.anatomy import SCAFFOLD_KINDS
from ctxbench.service.proxy.edits import Edits

DROP_TARGETS = "tool:NAME | result:TOOL | kind:KIND | system:N (NAME and TOOL take * for any characters)"
_SYSTEM = re.compile(r"system(:\d+)?")


def check_drop_target(target: str) -> str:
    """``target`` if a policy can drop it, else ValueError with a one-line reason."""
    prefix, _sep, rest = target.partition(":")
    if prefix in ("tool", "result") and rest:
        return target
    if prefix == "kind":
        if rest not in SCAFFOLD_KINDS:
            raise ValueError(f"unknown kind {rest!r}; a policy drops these kinds: {', '.join(SCAFFOLD_KINDS)}")
        return target
    if _SYSTEM.fullmatch(target):
        return target
    raise ValueError(f"a policy drops {DROP_TARGETS}; got {target!r}")


def item_rule(rules: Iterable[str], item_id: str, kind: str, tool_name: str) -> str:
    """The first of ``rules`` (drop targets other than ``tool:``) that matches the item, or ``""``."""
    for rule in rules:
        prefix, _sep, rest = rule.partition(":")
        if prefix == "kind" and kind == rest:
            return rule
        if prefix == "result" and kind == "tool_atom" and tool_name and fnmatch.fnmatchcase(tool_name, rest):
            return rule
        if prefix == "system" and kind == "system_prompt" and (
                rule in ("system", item_id) or (item_id == "system" and rule == "system:0")):
            return rule
    return ""


def result_budget_drops(atoms: Sequence[tuple[str, int, bool]], budget: int) -> tuple[list[str], int]:
    """The tool calls (with their results) to leave out so that the request's tool results come to at most
    ``budget`` tokens, and the tokens they then come to. ``atoms``: each tool call's id, tokens and whether it
    may go (not pinned, not in the turn in progress), oldest first."""
    total = sum(tokens for _id, tokens, _may in atoms)
    out: list[str] = []
    for atom_id, tokens, may in atoms:
        if total <= budget:
            break
        if may:
            out.append(atom_id)
            total -= tokens
    return out, total


def called_tool(parts: Sequence[tuple[WireMessage | None, WirePart]]) -> str:
    """The tool a tool call with its result (an item's ``parts``) calls, or ``""``."""
    return next((p.tool_name for _m, p in parts if p.kind in ("tool_call", "tool_result") and p.tool_name), "")


def remove_parts(parts: Sequence[tuple[WireMessage | None, WirePart]], edits: Edits) -> None:
    """Take an item's ``parts`` out of the request: a part whole, and of a text it shares with other items (a
    reminder block beside the user's words) only its own characters."""
    for _m, part in parts:
        if part.segment is None:
            edits.remove.add(part.location)
        else:
            edits.cut.setdefault(part.location, []).append(part.segment)
