"""A streaming chat-completions client for any OpenAI-compatible endpoint.

``stream(request, cancel)`` yields :class:`TextDelta`, :class:`ToolCallStarted` and
:class:`RetryScheduled` events and ends with one :class:`Completed`. Failures raise
:class:`LLMError` (one-line ``reason``, the text received so far in ``partial``);
cancellation raises :class:`LLMCancelled`. Requests are retried with exponential backoff
(tenacity) on 429, 5xx, timeouts and connection errors, but only until the first token
arrives: a stream that breaks after that is reported as dropped with its partial text, never
replayed, so nothing the user saw is silently duplicated. The HTTP read runs on a daemon thread
(:class:`_Pump`), so a cancel takes effect within ``CANCEL_POLL_S`` even while the endpoint is
silent.
"""
from __future__ import annotations

import json
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Protocol, Union

from ctxbench.config import LLMConfig
from ctxbench.records.messages import ToolCall

CANCEL_POLL_S = 0.05  # how often a blocked read checks the cancel token


@dataclass(frozen=True)
class Usage:
    """Token usage as the provider reported it (None when it reported nothing)."""

    prompt_tokens: int | None = None  # the whole prompt, cache reads and writes included
    completion_tokens: int | None = None
    total_tokens: int | None = None
    # of the prompt, the tokens the provider read from its prompt cache (Anthropic ``cache_read_input_tokens``,
    # OpenAI ``prompt_tokens_details.cached_tokens``) and wrote to it (Anthropic ``cache_creation_input_tokens``)
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None


@dataclass(frozen=True)
class Completion:
    content: str
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str
    usage: Usage
    model: str


@dataclass(frozen=True)
class ChatRequest:
    """One model call: the exact ``messages`` payload, the tool schemas, and the plan it came from."""

    messages: tuple[dict[str, Any], ...]
    tools: tuple[dict[str, Any], ...] = ()
    plan: Any = None  # the ContextPlan (the offline model describes it); never sent over the wire
    max_tokens: int | None = None  # the reply-token cap sent as ``max_tokens`` (None: the endpoint's default)
    # the session's previous request that got a reply (an ``anthropic_wire.PreviousRequest``): where this one's
    # prompt-cache breakpoints go; never sent over the wire
    previous: Any = None


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ToolCallStarted:
    index: int
    name: str


@dataclass(frozen=True)
class RetryScheduled:
    attempt: int  # the attempt that failed, 1-based
    wait_s: float
    reason: str


@dataclass(frozen=True)
class Completed:
    completion: Completion


StreamEvent = Union[TextDelta, ToolCallStarted, RetryScheduled, Completed]


class LLMError(RuntimeError):
    """The endpoint failed. ``reason`` is one line; ``partial`` is the reply text received before it."""

    def __init__(self, reason: str, *, kind: str, partial: str = "", status: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind  # rate_limit | server | timeout | deadline | connection | auth | request | dropped | cancelled
        self.partial = partial
        self.status = status
        self.retry_after: float | None = None  # seconds the server asked us to wait (Retry-After)


class DeadlinePassed(Exception):
    """The call's total deadline (``llm.reply_deadline_s``) passed while waiting for the endpoint."""


class LLMCancelled(LLMError):
    def __init__(self, partial: str = "") -> None:
        super().__init__("cancelled by the user", kind="cancelled", partial=partial)


class CancelToken:
    """Set by the UI (Esc) from any thread; the client stops reading and closes the stream."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []

    def cancel(self) -> None:
        with self._lock:
            self._event.set()
            callbacks = list(self._callbacks)
        for callback in callbacks:
            try:
                callback()
            except Exception:  # closing an already closed stream is fine
                pass

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True when cancelled meanwhile."""
        return self._event.wait(max(0.0, seconds))

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Register ``callback`` (called at once if already cancelled); returns an unregister function."""
        with self._lock:
            already = self._event.is_set()
            if not already:
                self._callbacks.append(callback)
        if already:
            callback()

        def remove() -> None:
            with self._lock:
                if callback in self._callbacks:
                    self._callbacks.remove(callback)

        return remove


class ChatClient(Protocol):
    provider: str
    model: str
    parsing_strategy: str

    def stream(self, request: ChatRequest, cancel: CancelToken | None = None) -> Iterator[StreamEvent]: ...


@dataclass
class _Assembly:
    """Accumulates streamed deltas into a completion."""

    content: list[str] = field(default_factory=list)
    calls: dict[int, dict[str, str]] = field(default_factory=dict)
    finish_reason: str = ""
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    reported: dict[str, int] = field(default_factory=dict)  # usage counts as the provider named them, so far

    @property
    def text(self) -> str:
        return "".join(self.content)

    @property
    def started(self) -> bool:
        return bool(self.content) or bool(self.calls)

    def tool_calls(self) -> tuple[ToolCall, ...]:
        out = []
        for index in sorted(self.calls):
            call = self.calls[index]
            out.append(ToolCall(id=call["id"] or f"call_{index}", name=call["name"], arguments=call["arguments"] or "{}"))
        return tuple(out)


class _Pump:
    """Reads a blocking stream on a daemon thread, so the caller can stop waiting the moment it is cancelled.

    ``start()`` opens the stream (the HTTP request); its chunks, its end or its error arrive through a
    queue. Cancelling closes the stream; a read that is still blocked ends with the request's timeout.
    """

    def __init__(self, start: Callable[[], Any]) -> None:
        self._start = start
        self._queue: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._stream: Any = None
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="llm-stream", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._stream = self._start()
            if self._closed.is_set():
                _close(self._stream)
                return
            for chunk in self._stream:
                self._queue.put(("chunk", chunk))
                if self._closed.is_set():
                    return
            self._queue.put(("end", None))
        except BaseException as exc:  # delivered to the reader
            self._queue.put(("error", exc))

    def next(self, cancel: CancelToken, deadline: float | None = None) -> Any:
        """The next chunk; StopIteration at the end; the stream's error; LLMCancelled once cancelled;
        ``DeadlinePassed`` once ``time.monotonic()`` reaches ``deadline``."""
        while True:
            if cancel.cancelled:
                self.close()
                raise LLMCancelled()
            if deadline is not None and time.monotonic() >= deadline:
                self.close()
                raise DeadlinePassed()
            try:
                kind, value = self._queue.get(timeout=CANCEL_POLL_S)
            except queue.Empty:
                continue
            if kind == "chunk":
                return value
            if kind == "end":
                raise StopIteration
            raise value

    def close(self) -> None:
        self._closed.set()
        if self._stream is not None:
            _close(self._stream)


class OpenAIChatClient:
    """Streams from an OpenAI-compatible ``/chat/completions`` endpoint with the ``openai`` SDK."""

    provider = "openai"
    parsing_strategy = "openai"
    sdk_module = "openai"  # the SDK: its module (whose exception classes _classify knows) and its client class
    sdk_client = "OpenAI"

    def __init__(self, config: LLMConfig, api_key: str | None) -> None:
        import importlib

        sdk = importlib.import_module(self.sdk_module)
        self._openai = sdk
        self.config = config
        self.model = config.model
        self._secret = api_key or ""
        # The SDK's own retries are off: ours know when a stream has started and must not be replayed.
        self._sdk = getattr(sdk, self.sdk_client)(
            base_url=config.base_url or None,
            api_key=api_key or "unset",
            timeout=config.timeout_s,
            max_retries=0,
        )

    # -- errors -----------------------------------------------------------------------

    def _redact(self, text: str) -> str:
        return text.replace(self._secret, "***") if self._secret else text

    @property
    def _where(self) -> str:
        return self.config.base_url or "the OpenAI API"

    def _create(self, payload: dict[str, Any]) -> Any:
        """Open the streamed call (the SDK's request)."""
        return self._sdk.chat.completions.create(**payload)

    def _classify(self, exc: BaseException, partial: str) -> LLMError:
        o = self._openai  # the SDK module whose exception classes the client raises
        where = self._where
        if isinstance(exc, LLMError):
            return exc
        if isinstance(exc, o.APITimeoutError):
            return LLMError(f"timed out after {self.config.timeout_s:g}s waiting for {where}", kind="timeout",
                            partial=partial)
        if isinstance(exc, o.APIConnectionError):
            cause = exc.__cause__ or exc
            if not partial and _refused(exc):
                return LLMError(f"cannot reach {where}: connection refused (nothing is listening there)",
                                kind="connection", partial=partial)
            detail = self._redact(" ".join(str(cause).split()))[: self.config.error_excerpt_chars]
            if partial:
                return LLMError(f"the stream from {where} broke mid-reply: {detail}", kind="dropped", partial=partial)
            return LLMError(f"cannot reach {where}: {detail}", kind="connection", partial=partial)
        if isinstance(exc, o.APIStatusError):
            status = exc.status_code
            message = _error_message(exc, self.config.error_excerpt_chars)
            kind = ("rate_limit" if status == 429 else "server" if status >= 500
                    else "auth" if status in (401, 403) else "request")
            hint = f" (is ${self.config.api_key_env} set?)" if kind == "auth" else ""
            return LLMError(self._redact(f"HTTP {status} from {where}: {message}{hint}"), kind=kind,
                            partial=partial, status=status)
        detail = self._redact(" ".join(str(exc).split()))[: self.config.error_excerpt_chars]
        return LLMError(f"{type(exc).__name__} from {where}: {detail}", kind="connection", partial=partial)

    @staticmethod
    def _retryable(error: LLMError) -> bool:
        return error.kind in ("rate_limit", "server", "timeout", "connection")

    # -- streaming --------------------------------------------------------------------

    def _payload(self, request: ChatRequest) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in request.messages],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            payload["tools"] = [dict(t) for t in request.tools]
        if request.max_tokens is not None:
            payload["max_tokens"] = request.max_tokens
        return payload

    def _deadline_error(self, partial: str, last_error: str = "") -> LLMError:
        """The deadline passed; when it passed between tries that each failed (``last_error``: the last one's
        reason), that failure is what the line says first."""
        if last_error and not partial:
            return LLMError(f"{last_error}; tried again until the deadline of {self.config.reply_deadline_s:g}s "
                            "(llm.reply_deadline_s / --deadline)", kind="deadline")
        kept = "; the reply so far is kept" if partial else ""
        return LLMError(f"no complete reply within the deadline of {self.config.reply_deadline_s:g}s "
                        f"(llm.reply_deadline_s / --deadline){kept}", kind="deadline", partial=partial)

    def stream(self, request: ChatRequest, cancel: CancelToken | None = None) -> Iterator[StreamEvent]:
        from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

        cancel = cancel or CancelToken()
        payload = self._payload(request)
        deadline = time.monotonic() + self.config.reply_deadline_s
        pending: dict[str, float] = {}
        retry_after: dict[str, float] = {}

        def record_wait(seconds: float) -> None:  # tenacity's sleep: we sleep ourselves, cancellably
            pending["wait"] = max(seconds, retry_after.pop("s", 0.0))

        retrying = Retrying(
            stop=stop_after_attempt(self.config.max_retries + 1),
            wait=wait_exponential_jitter(multiplier=self.config.retry_backoff_s, max=self.config.retry_backoff_max_s,
                                         jitter=self.config.retry_backoff_s / 2),
            retry=retry_if_exception(lambda e: isinstance(e, LLMError) and self._retryable(e)),
            sleep=record_wait,
            reraise=True,
        )
        last_error = ""
        opened: tuple[_Pump, _Assembly, list[StreamEvent]] | None = None
        for attempt in retrying:
            if "wait" in pending:
                wait = min(pending.pop("wait"), self.config.retry_backoff_max_s)
                if time.monotonic() + wait >= deadline:
                    raise self._deadline_error("", last_error)
                yield RetryScheduled(attempt.retry_state.attempt_number - 1, wait, last_error)
                if cancel.wait(wait):
                    raise LLMCancelled()
            with attempt:
                try:
                    opened = self._open(payload, cancel, deadline)
                except DeadlinePassed:
                    raise self._deadline_error("", last_error) from None
                except LLMError as error:
                    last_error = error.reason
                    if error.retry_after is not None:
                        retry_after["s"] = error.retry_after
                    raise
        assert opened is not None
        pump, assembly, first_events = opened
        try:
            yield from first_events
            while True:
                try:
                    chunk = pump.next(cancel, deadline)
                except StopIteration:
                    break
                except LLMCancelled:
                    raise LLMCancelled(assembly.text) from None
                except DeadlinePassed:
                    raise self._deadline_error(assembly.text) from None
                except Exception as exc:
                    error = self._classify(exc, assembly.text)
                    if error.kind != "dropped":
                        error = LLMError(f"the stream broke mid-reply: {error.reason}", kind="dropped",
                                         partial=assembly.text, status=error.status)
                    raise error from exc
                yield from self._absorb(chunk, assembly)
            if not assembly.finish_reason:
                raise LLMError("the stream ended before the model finished its reply", kind="dropped",
                               partial=assembly.text)
        finally:
            pump.close()
        yield Completed(Completion(
            content=assembly.text,
            tool_calls=assembly.tool_calls(),
            finish_reason=assembly.finish_reason,
            usage=assembly.usage,
            model=assembly.model or self.model,
        ))

    def _open(self, payload: dict[str, Any], cancel: CancelToken,
              deadline: float | None = None) -> "tuple[_Pump, _Assembly, list[StreamEvent]]":
        """Send the request and read up to the first token (or the end): everything a retry may redo."""
        if cancel.cancelled:
            raise LLMCancelled()
        pump = _Pump(lambda: self._create(payload))
        assembly = _Assembly()
        events: list[StreamEvent] = []
        try:
            while not assembly.started and not assembly.finish_reason:
                events.extend(self._absorb(pump.next(cancel, deadline), assembly))
        except StopIteration:
            pass  # ended before a token: the checks after the stream report it
        except (LLMCancelled, DeadlinePassed):
            pump.close()
            raise
        except Exception as exc:
            pump.close()
            error = self._classify(exc, "")
            error.retry_after = _retry_after_s(exc)
            raise error from exc
        return pump, assembly, events

    @staticmethod
    def _absorb(chunk: Any, assembly: _Assembly) -> Iterator[StreamEvent]:
        if getattr(chunk, "model", None):
            assembly.model = chunk.model
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            details = getattr(usage, "prompt_tokens_details", None)
            assembly.usage = Usage(usage.prompt_tokens, usage.completion_tokens, usage.total_tokens,
                                   cache_read_tokens=getattr(details, "cached_tokens", None))
        for choice in chunk.choices or ():
            delta = choice.delta
            if delta is not None:
                if delta.content:
                    assembly.content.append(delta.content)
                    yield TextDelta(delta.content)
                for call in delta.tool_calls or ():
                    slot = assembly.calls.get(call.index)
                    if slot is None:
                        slot = assembly.calls[call.index] = {"id": "", "name": "", "arguments": ""}
                    if call.id:
                        slot["id"] = call.id
                    function = call.function
                    if function is not None:
                        if function.name and not slot["name"]:
                            slot["name"] = function.name
                            yield ToolCallStarted(call.index, function.name)
                        if function.arguments:
                            slot["arguments"] += function.arguments
            if choice.finish_reason:
                assembly.finish_reason = choice.finish_reason


def _close(stream: Any) -> None:
    try:
        stream.close()
    except Exception:  # closing an already broken stream
        pass


def _error_message(exc: Any, limit: int) -> str:
    """The provider's error text on one line, at most ``limit`` characters."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return " ".join(str(inner["message"]).split())[:limit]
        if isinstance(body.get("message"), str):
            return " ".join(body["message"].split())[:limit]
    text = getattr(exc, "message", "") or str(exc)
    return " ".join(str(text).split())[:limit]


def _retry_after_s(exc: Any) -> float | None:
    response = getattr(exc, "response", None)
    if response is None:
        return None
    value = response.headers.get("retry-after") if hasattr(response, "headers") else None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def tool_call_json(call: ToolCall) -> dict[str, Any]:
    """The arguments of a tool call as a dict ({} when the model sent something that is not an object)."""
    try:
        data = json.loads(call.arguments or "{}")
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def _refused(exc: BaseException) -> bool:
    """Whether a connection error was a refused connection (nothing listens at the address)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError) or "Connection refused" in str(current):
            return True
        current = current.__cause__ or current.__context__
    return False
