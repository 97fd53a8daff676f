"""One model call streamed into turn events (reply deltas, tool calls requested, retries), its outcome in a
:class:`CallResult`; in a turn, the reply saved as it arrives (:class:`StreamSaver`), so a process killed mid-reply
leaves its text."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Iterator

from ctxbench.config import LLMConfig
from ctxbench.llm.client import (
    CancelToken,
    ChatClient,
    ChatRequest,
    Completed,
    Completion,
    LLMCancelled,
    LLMError,
    RetryScheduled,
    TextDelta,
    ToolCallStarted,
)
from ctxbench.records.messages import Message
from ctxbench.records.turns import ReplyDelta, Retrying, ToolCallRequested, TurnEvent
from ctxbench.store.messages import Messages


@dataclass
class CallResult:
    completion: Completion | None = None
    text: str = ""
    error: LLMError | None = None
    cancelled: bool = False
    saver: "StreamSaver | None" = None  # the reply saved while it streamed (a turn's calls)


class StreamSaver:
    """A streaming reply saved as it arrives: one assistant row in the turn's group, partial until
    :meth:`store` writes it whole (or as the partial reply a failure keeps)."""

    def __init__(self, messages: Any, session_id: str, group_id: int, parsing_strategy: str, llm: Any,
                 clock: Any = time.monotonic) -> None:
        self.messages, self.session_id, self.group_id = messages, session_id, group_id
        self.parsing_strategy = parsing_strategy
        self.every_s, self.every_chars = llm.stream_save_every_s, llm.stream_save_every_chars
        self.clock = clock
        self.message: Message | None = None
        self._unsaved = 0
        self._saved_at = 0.0

    def arrived(self, pieces: list[str], chars: int) -> None:
        """``chars`` more characters arrived (``pieces``: the reply so far); saved when enough time or text
        has come since the last save, the first piece at once."""
        self._unsaved += chars
        now = self.clock()
        if self.message is not None and self._unsaved < self.every_chars and now - self._saved_at < self.every_s:
            return
        text = "".join(pieces)
        pieces[:] = [text]  # joined once per save, not once per piece
        self.store(text, partial=True)
        self._unsaved, self._saved_at = 0, now

    def store(self, text: str, *, partial: bool = True, tool_calls: Any = None) -> Message:
        """Write the reply: the row saved so far rewritten, else a new one."""
        if self.message is None:
            self.message = self.messages.append(self.session_id, "assistant", text, group_id=self.group_id,
                                                tool_calls=tool_calls or (), parsing_strategy=self.parsing_strategy,
                                                partial=partial)
        else:
            self.message = self.messages.update(self.session_id, self.message.id, text, partial=partial,
                                                tool_calls=tool_calls)
        return self.message


def stream_call(client: ChatClient, messages: Messages, llm: LLMConfig, request: ChatRequest, cancel: CancelToken,
                result: CallResult, group_id: int | None = None) -> Iterator[TurnEvent]:
    """Stream one call into events; the outcome lands in ``result``.

    In a turn (``group_id`` given) the reply is saved as it arrives (``llm.stream_save_every_s`` /
    ``stream_save_every_chars``, the row partial until the turn stores it whole), so a process killed mid-reply
    leaves its text. If the consumer abandons the generator (closes it, or Ctrl-C) mid-reply, the text so far
    is stored as a partial reply in ``group_id`` before the exit propagates.
    """
    plan_id = request.plan.plan_id if request.plan is not None else ""
    pieces: list[str] = []
    saver = (StreamSaver(messages, request.plan.session_id, group_id, client.parsing_strategy, llm)
             if group_id is not None and request.plan is not None else None)
    result.saver = saver
    try:
        for event in client.stream(request, cancel):
            if isinstance(event, TextDelta):
                pieces.append(event.text)
                if saver is not None:
                    saver.arrived(pieces, len(event.text))
                yield ReplyDelta(plan_id, event.text)
            elif isinstance(event, ToolCallStarted):
                yield ToolCallRequested(plan_id, event.index, event.name)
            elif isinstance(event, RetryScheduled):
                yield Retrying(plan_id, event.attempt, event.wait_s, event.reason)
            elif isinstance(event, Completed):
                result.completion = event.completion
    except LLMCancelled as exc:
        result.cancelled = True
        result.text = exc.partial or "".join(pieces)
    except LLMError as exc:
        result.error = exc
        result.text = exc.partial or "".join(pieces)
    except (GeneratorExit, KeyboardInterrupt):
        result.cancelled = True
        result.text = "".join(pieces)
        if saver is not None and result.text:
            saver.store(result.text)
        raise
