"""A proxied request's items before they are planned: one per system block, tool definition, block of the assistant's
scaffolding, turn, tool call with its result, attached file and image, and the request's options, each with its
parts, tokens, bytes and label; and an item as the PlanItem it becomes."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ctxbench.records.item_refs import atom_call_id
from ctxbench.records.plans import PlanItem
from ctxbench.records.proxy import WireMessage, WirePart, WireRequest
from ctxbench.tokens import Tokenizer

LABEL_CHARS = 60


@dataclass
class RequestItem:
    id: str
    kind: str
    section: str
    label: str
    order: int
    group: int = 0
    parts: list[tuple[WireMessage | None, WirePart]] = field(default_factory=list)  # None: a system block
    message_ids: set[int] = field(default_factory=set)
    tokens: int = 0
    bytes: int = 0


def _short(text: str, limit: int = LABEL_CHARS) -> str:
    # from the text's start when that gives enough words (splitting a pasted 30 MB log took ten times its size)
    head = text[: limit * 16]
    line = " ".join(head.split())
    if len(line) <= limit and len(head) < len(text):
        line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


_MEMORY_PATH = re.compile(r"Contents of (\S+)|([\w./-]*(?:CLAUDE|AGENTS|GEMINI)\.md)")
SCAFFOLD_LABELS = {"memory_file": "memory file", "skill_list": "skills list", "todo_list": "todo reminder",
                   "environment": "environment", "reminder": "reminder", "few_shot": "few-shot examples",
                   "repo_map": "repository map", "chat_files": "files in the chat",
                   "deferred_tools": "deferred tools", "agent_types": "agent types"}


def _scaffold_label(kind: str, text: str) -> str:
    name = SCAFFOLD_LABELS.get(kind, kind)
    if kind == "memory_file":
        match = _MEMORY_PATH.search(text)
        if match:
            return f"{name} {match.group(1) or match.group(2)}"
    body = re.sub(r"</?[\w -]+>", " ", text)
    return f"{name}: {_short(body, 40)}"


class ItemBuilder:
    def __init__(self, request: WireRequest, groups: tuple[int, ...], message_ids: tuple[tuple[int, ...], ...],
                 tokenizer: Tokenizer) -> None:
        self.request = request
        self.tok = tokenizer
        self.items: dict[str, RequestItem] = {}
        self.owner: dict[tuple[object, ...], RequestItem] = {}  # (location, segment) -> the item holding that part
        history = request.history
        self.last_group = groups[-1] if groups else 0
        self.group_of = {m.index: g for m, g in zip(history, groups)}
        self.ids_of = {m.index: ids for m, ids in zip(history, message_ids)}
        for n, part in enumerate(request.system):
            self._add(f"system:{n}" if len(request.system) > 1 else "system", "system_prompt", "system",
                      f"system prompt{f' block {n + 1}' if len(request.system) > 1 else ''}: {_short(part.text)}",
                      n, None, part)
        self.tool_locations: dict[str, tuple[object, ...]] = {}
        for n, tool in enumerate(request.tools):
            item = self._item(f"tool:{tool.name}", "tool_definitions", "tools", f"tool {tool.name}", 10_000 + n)
            item.tokens += tool.tokens
            item.bytes += tool.bytes
            self.tool_locations[item.id] = tool.location or ("tools", tool.index)
        self._scaffold_before: RequestItem | None = None  # the item of the scaffolding message just before
        for m in request.messages:
            if m.scaffold:
                self._scaffold_message(m)
                continue
            self._scaffold_before = None
            if m.index in self.group_of:
                self._message(m)
        self._overheads()
        if request.envelope_bytes:
            keys = [k for k in request.body if k not in (request.list_key, "system", "tools", "instructions")]
            self._item("request", "request_options", "system", f"request options: {', '.join(keys) or 'none'}",
                       -1).bytes += request.envelope_bytes

    def _item(self, item_id: str, kind: str, section: str, label: str, order: int, group: int = 0) -> RequestItem:
        item = self.items.get(item_id)
        if item is None:
            item = self.items[item_id] = RequestItem(item_id, kind, section, label, order, group)
        return item

    def _add(self, item_id: str, kind: str, section: str, label: str, order: int, message: WireMessage | None,
             part: WirePart, group: int = 0) -> RequestItem:
        item = self._item(item_id, kind, section, label, order, group)
        item.parts.append((message, part))
        if message is not None:
            item.message_ids.update(self.ids_of.get(message.index, ()))
        item.tokens += part.tokens
        item.bytes += part.bytes
        self.owner[(part.location, part.segment)] = item
        return item

    def _scaffold_message(self, m: WireMessage) -> None:
        """A message that is the assistant's scaffolding: few-shot examples make one item, any other one each."""
        order = 100_000 + m.index * 1000
        text = "\n".join(p.text for p in m.parts)
        before = self._scaffold_before
        if m.role in ("system", "developer"):  # a system message among the messages: an item per section
            for j, part in enumerate(m.parts):
                kind = part.scaffold or m.scaffold
                self._add(f"{kind}:{m.index}:{j}", kind, "scaffold", _scaffold_label(kind, part.text), order + j,
                          m, part)
            self._scaffold_before = None
            return
        if m.scaffold == "few_shot":
            item_id, label = "few_shot", "few-shot examples"
        elif m.role == "assistant" and before is not None and before.kind == m.scaffold:
            item_id, label = before.id, before.label  # the assistant's "Ok." goes with what it acknowledges
        else:
            item_id, label = f"{m.scaffold}:{m.index}", _scaffold_label(m.scaffold, text)
        for part in m.parts:
            self._add(item_id, m.scaffold, "scaffold", label, order, m, part)
        self._scaffold_before = self.items.get(item_id)

    def _message(self, m: WireMessage) -> None:
        g = self.group_of[m.index]
        order = 100_000 + m.index * 1000
        group_item = self._item(f"group:{g}", "current_turn" if g == self.last_group else "history_atom", "history",
                                f"turn {g}", order, g)
        for j, part in enumerate(m.parts):
            if part.kind in ("tool_call", "tool_result") and part.tool_call_id:
                self._add(f"atom:{g}:{part.tool_call_id}", "tool_atom", "tool_results", "", order + j, m, part, g)
            elif part.kind == "file":
                self._add(f"file:{m.index}:{j}", "attached_file", "files", f"file {part.label}", order + j, m, part, g)
            elif part.kind == "image":  # droppable as a file is; counted by the provider's image rule
                self._add(f"file:{m.index}:{j}", "image", "files", part.label, order + j, m, part, g)
            elif part.scaffold:
                self._add(f"{part.scaffold}:{m.index}:{j}", part.scaffold, "scaffold",
                          _scaffold_label(part.scaffold, part.text), order + j, m, part, g)
            else:
                item = self._add(f"group:{g}", group_item.kind, "history", "", order, m, part, g)
                if m.role == "user" and part.kind == "text" and item.label == f"turn {g}":
                    item.label = f"turn {g}: {_short(part.text)}"

    def _overheads(self) -> None:
        """Each message's own tokens and bytes (its role, its keys, its braces) go to the item that holds all of
        its parts, or to its turn when its parts went to several items (a system message's to its first)."""
        for m in self.request.messages:
            owners = {id(self.owner[(p.location, p.segment)]): self.owner[(p.location, p.segment)]
                      for p in m.parts if (p.location, p.segment) in self.owner}
            if len(owners) == 1:
                item = next(iter(owners.values()))
            elif m.index in self.group_of:
                item = self.items[f"group:{self.group_of[m.index]}"]
            elif owners:
                item = next(iter(owners.values()))
            else:
                item = self._item("request", "request_options", "system", "request options", -1)
            item.tokens += m.tokens - sum(p.tokens for p in m.parts)
            item.bytes += m.bytes
            if m.index in self.ids_of:
                item.message_ids.update(self.ids_of[m.index])

    def finish_labels(self) -> None:
        calls = {p.tool_call_id: p for m in self.request.history for p in m.parts if p.kind == "tool_call"}
        for item in self.items.values():
            if item.kind != "tool_atom":
                continue
            call = calls.get(atom_call_id(item.id))
            result = next((p for _m, p in item.parts if p.kind == "tool_result"), None)
            name = call.tool_name if call is not None else "tool"
            args = _short(call.text, 40) if call is not None else ""
            size = f" → {len(result.text):,} chars" if result is not None else " (no result yet)"
            images = f" + {result.label}" if result is not None and result.label else ""  # images in the result
            item.label = f"{name}({args}){size}{images}"


def plan_item(item: RequestItem, *, included: bool, reason: str, pin: str | None, detail: str = "",
              tokens: int | None = None, replaced: dict | None = None) -> PlanItem:
    messages = _render(item, replaced or {}) if included else ()
    return PlanItem(id=item.id, kind=item.kind, section=item.section, label=item.label,
                    tokens=item.tokens if tokens is None else tokens, included=included, reason=reason,
                    pin=pin or "", order=item.order if included else -1, message_ids=tuple(sorted(item.message_ids)),
                    messages=messages, detail=detail, bytes=item.bytes)


def _render(item: RequestItem, replaced: dict) -> tuple[dict[str, object], ...]:
    """The item as OpenAI-style messages as they went upstream (a cut tool result cut), for the payload view
    and the preview; the exact bodies are stored with the exchange."""
    if item.section == "tools":
        return ()
    out: list[dict[str, object]] = []
    for m, part in item.parts:
        role = "system" if m is None else {"developer": "system"}.get(m.role, m.role)
        if part.kind == "tool_call":
            out.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": part.tool_call_id, "type": "function",
                 "function": {"name": part.tool_name, "arguments": part.text}}]})
        elif part.kind == "tool_result":
            out.append({"role": "tool", "tool_call_id": part.tool_call_id,
                        "content": replaced.get(part.location, part.text)})
        else:
            out.append({"role": role if role in ("system", "user", "assistant") else "user", "content": part.text})
    return tuple(out)
