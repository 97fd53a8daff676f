"""The tools offered to the model, as OpenAI function schemas, and their executors.

- ``request_code_context(symbol)``: a symbol card expanded to its body, from the code index;
- ``query_db(sql)``: read-only SQL over this session's messages (see :mod:`ctxbench.store.querydb`);
- ``manage_scratchpad(action, content)``: read, replace or append to the session's scratchpad;
- ``save_memo(content, tags)`` / ``retrieve_memos(query, tags)``: global memos;
- ``suggest_pins(items, reason)``: the model proposes pins; the user decides (never sticky by itself).

Executors never raise for a bad call: the model gets an ``error: ...`` result and can try again.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from ctxbench.config import LLMConfig
from ctxbench.records.messages import ToolCall
from ctxbench.tokens import Tokenizer
from ctxbench.llm.ports import UnitOfWork

SCRATCHPAD_ACTIONS = ("read", "update", "append")

TOOL_SCHEMAS: tuple[dict[str, Any], ...] = (
    {
        "type": "function",
        "function": {
            "name": "request_code_context",
            "description": "Expand a symbol card to the symbol's full source body. Pass the symbol id shown on a "
                           "card (e.g. pkg.module.Class.method) or a file path.",
            "parameters": {
                "type": "object",
                "properties": {"symbol": {"type": "string", "description": "symbol id, name, or file path"}},
                "required": ["symbol"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "query_db",
            "description": "Run one read-only SQL SELECT over this session's history in the table `messages` "
                           "(id, branch_id, group_id, role, content, tool_calls, tool_call_id, tool_name, "
                           "parsing_strategy, status, created_at, tokens, partial). Ignore rows with "
                           "status = 'dropped'; prefer ORDER BY id DESC LIMIT n. Truncated results name their "
                           "message id: SELECT content FROM messages WHERE id = <ID>.",
            "parameters": {
                "type": "object",
                "properties": {"sql": {"type": "string", "description": "one SELECT statement"}},
                "required": ["sql"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "manage_scratchpad",
            "description": "Read, replace (update) or append to the session scratchpad: your persistent plan and "
                           "notes, kept in context across turns.",
            "parameters": {
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": list(SCRATCHPAD_ACTIONS)},
                    "content": {"type": "string", "description": "text for update/append"},
                },
                "required": ["action"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "save_memo",
            "description": "Save durable knowledge that is not easy to find in the code (the why behind a "
                           "design, a gotcha) with a few semantic tags. Memos outlive this session.",
            "parameters": {
                "type": "object",
                "properties": {
                    "content": {"type": "string"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["content"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "retrieve_memos",
            "description": "Find memos by keywords and/or tags.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                },
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "suggest_pins",
            "description": "Suggest context items the user may want to pin because they look foundational: symbol "
                           "ids, file paths, or message groups as group:<id>. The user decides.",
            "parameters": {
                "type": "object",
                "properties": {
                    "items": {"type": "array", "items": {"type": "string"}},
                    "reason": {"type": "string"},
                },
                "required": ["items", "reason"],
            },
        },
    },
)

TOOL_NAMES: tuple[str, ...] = tuple(t["function"]["name"] for t in TOOL_SCHEMAS)


def tools_tokens(tools: tuple[dict[str, Any], ...] | list[dict[str, Any]], tokenizer: Tokenizer) -> int:
    """What the tool schemas add to a request's prompt tokens (their JSON, as providers count it roughly)."""
    if not tools:
        return 0
    return tokenizer.count(json.dumps(list(tools), sort_keys=True, ensure_ascii=False))


def offered_tools(config: LLMConfig, round_no: int, offer: bool = True) -> tuple[dict[str, Any], ...]:
    """The tool schemas the call of round ``round_no`` offers: all of them before the round cap, none
    on the call after it (the model has to answer)."""
    return TOOL_SCHEMAS if offer and round_no < config.max_tool_rounds else ()


@dataclass(frozen=True)
class PinSuggestion:
    """A pin proposed by the model (``suggest_pins``) or by activation; only the user accepts it."""

    target: str  # card:<symbol id> | path:<file> | group:<id> | text:<label>
    reason: str
    source: str  # model | activation
    score: float = 0.0


@dataclass(frozen=True)
class ToolOutcome:
    call: ToolCall
    content: str  # what the model reads as the tool result
    ok: bool
    suggestions: tuple[PinSuggestion, ...] = ()


class CodeContext(Protocol):
    def expand(self, symbol: str) -> str | None:
        """The full body of ``symbol`` (or a file), or None when the index does not know it."""


def normalise_pin_target(item: str) -> str:
    """A model's pin suggestion as a pin target: ``group:12``, ``path:src/x.py`` or ``card:pkg.mod.f``."""
    item = item.strip().strip("`'\"")
    for prefix in ("group:", "card:", "path:", "text:"):
        if item.startswith(prefix):
            return item
    if item.isdigit():
        return f"group:{item}"
    if "/" in item or item.endswith((".py", ".js", ".ts", ".go", ".rs", ".java", ".md", ".toml")):
        return f"path:{item}"
    return f"card:{item}"


@dataclass
class ToolBox:
    """Runs the model's tool calls for one session."""

    workbench: UnitOfWork
    session_id: str
    config: LLMConfig
    code: CodeContext | None = None
    on_scratchpad: Callable[[str], None] | None = None
    _handlers: dict[str, Callable[[dict[str, Any]], tuple[str, bool, tuple[PinSuggestion, ...]]]] = field(
        default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self._handlers = {
            "request_code_context": self._code,
            "query_db": self._query,
            "manage_scratchpad": self._scratchpad,
            "save_memo": self._save_memo,
            "retrieve_memos": self._retrieve_memos,
            "suggest_pins": self._suggest,
        }

    @property
    def schemas(self) -> tuple[dict[str, Any], ...]:
        return TOOL_SCHEMAS

    def run(self, call: ToolCall) -> ToolOutcome:
        handler = self._handlers.get(call.name)
        if handler is None:
            return ToolOutcome(call, f"error: unknown tool {call.name!r}; available: {', '.join(TOOL_NAMES)}", False)
        try:
            args = json.loads(call.arguments or "{}")
        except json.JSONDecodeError as exc:
            return ToolOutcome(call, f"error: arguments are not valid JSON ({exc.msg})", False)
        if not isinstance(args, dict):
            return ToolOutcome(call, "error: arguments must be a JSON object", False)
        try:
            content, ok, suggestions = handler(args)
        except Exception as exc:  # a tool failure is the model's information, not the turn's end
            return ToolOutcome(call, f"error: {call.name} failed: {type(exc).__name__}: {exc}", False)
        return ToolOutcome(call, content, ok, suggestions)

    # -- handlers -------------------------------------------------------------------------

    def _code(self, args: dict[str, Any]) -> tuple[str, bool, tuple[PinSuggestion, ...]]:
        symbol = str(args.get("symbol") or "").strip()
        if not symbol:
            return "error: request_code_context needs a symbol", False, ()
        if self.code is None:
            return "error: no code index for this session (open it on a repository or run `ctxbench index`)", False, ()
        body = self.code.expand(symbol)
        if body is None:
            return f"error: unknown symbol {symbol!r}; use an id shown on a symbol card", False, ()
        return body, True, ()

    def _query(self, args: dict[str, Any]) -> tuple[str, bool, tuple[PinSuggestion, ...]]:
        import sqlite3

        from ctxbench.store.querydb import QueryRefused, run_query

        sql = str(args.get("sql") or "").strip()
        if not sql:
            return "error: query_db needs sql", False, ()
        try:
            result = run_query(self.workbench.db_path, self.session_id, sql,
                               max_rows=self.config.query_db_max_rows, max_steps=self.config.query_db_max_steps,
                               max_chars=self.config.query_db_max_chars,
                               length_factor=self.config.query_db_length_factor,
                               progress_steps=self.config.query_db_progress_steps)
        except QueryRefused as exc:
            return f"error: {exc}", False, ()
        except sqlite3.Error as exc:
            return f"error: SQL failed: {exc}", False, ()
        from ctxbench.redaction import redact

        # stored messages typed or pasted in a chat may hold secrets: they reach the model masked
        return redact(result.render(self.config.query_db_max_chars))[0], True, ()

    def _scratchpad(self, args: dict[str, Any]) -> tuple[str, bool, tuple[PinSuggestion, ...]]:
        action = str(args.get("action") or "read")
        content = args.get("content")
        if action not in SCRATCHPAD_ACTIONS:
            return f"error: action must be one of {', '.join(SCRATCHPAD_ACTIONS)}", False, ()
        current = self.workbench.memory.scratchpad(self.session_id)
        if action == "read":
            return current or "(the scratchpad is empty)", True, ()
        if not isinstance(content, str):
            return f"error: {action} needs content (a string)", False, ()
        new = content if action == "update" else (current.rstrip("\n") + "\n" + content if current else content)
        self.workbench.memory.set_scratchpad(self.session_id, new)
        if self.on_scratchpad is not None:
            self.on_scratchpad(new)
        return f"scratchpad {'replaced' if action == 'update' else 'appended'} ({len(new)} chars)", True, ()

    def _save_memo(self, args: dict[str, Any]) -> tuple[str, bool, tuple[PinSuggestion, ...]]:
        content = args.get("content")
        tags = args.get("tags") or []
        if not isinstance(content, str) or not content.strip():
            return "error: save_memo needs content", False, ()
        if not isinstance(tags, list):
            return "error: tags must be a list of strings", False, ()
        memo = self.workbench.memory.add_memo(content, [str(t) for t in tags])
        return f"memo {memo.id} saved with tags {', '.join(memo.tags) or '(none)'}", True, ()

    def _retrieve_memos(self, args: dict[str, Any]) -> tuple[str, bool, tuple[PinSuggestion, ...]]:
        query = str(args.get("query") or "")
        tags = [str(t) for t in (args.get("tags") or []) if str(t).strip()]
        if not query.strip() and not tags:
            return "error: retrieve_memos needs a query or tags", False, ()
        limit = self.config.retrieve_memos_max
        found = list(self.workbench.memory.search_memos(" ".join([query, *tags]).strip(), limit))
        if tags:
            wanted = {t.lower() for t in tags}
            tagged = [m for m in self.workbench.memory.memos() if wanted & {t.lower() for t in m.tags}]
            found = list({m.id: m for m in [*tagged, *found]}.values())[:limit]
        if not found:
            return "(no memos found)", True, ()
        return "\n".join(f"memo {m.id} [{', '.join(m.tags)}]: {m.content}" for m in found), True, ()

    def _suggest(self, args: dict[str, Any]) -> tuple[str, bool, tuple[PinSuggestion, ...]]:
        items = args.get("items")
        reason = str(args.get("reason") or "").strip()
        if isinstance(items, str):
            items = [items]
        if not isinstance(items, list) or not items:
            return "error: suggest_pins needs items (a list of symbol ids, paths or group:<id>)", False, ()
        targets = list(dict.fromkeys(normalise_pin_target(str(i)) for i in items if str(i).strip()))
        suggestions = tuple(PinSuggestion(t, reason or "suggested by the model", "model") for t in targets)
        return (f"suggested {len(targets)} pin(s) to the user: {', '.join(targets)}; the user decides",
                True, suggestions)
