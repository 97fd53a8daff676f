"""``ctxbench open --watch``: the main screen following a proxied conversation live.

A :class:`WatchController` asks the session (a ``ProxyWatchSession``) every ``proxy.watch_interval_s``
for a new exchange, in a thread worker; what it finds comes back through ``call_from_thread``: the
history in the chat pane, the request's plan in the meter and the overlay, and a note with the plan diff
from the previous request, what steering changed, the reply and the reported usage beside the estimate.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.timer import Timer

from ctxbench.records.proxy import CacheReport, DiffEntry, PlanDiff, ProxyExchange
from ctxbench.records.proxy_cost import Finding
from ctxbench.records.views import PlanView, Progress
from ctxbench.tui.host import WatchHost
from ctxbench.tui.present import proxied_label, tok

if TYPE_CHECKING:
    from ctxbench.service.proxy.session import WatchPoll

DIFF_LINES = 4  # entries listed per kind (entered, left, changed) in a request's note
REPLY_CHARS = 160  # characters of the reply quoted in a request's note
NOTES_KEPT = 6  # the latest requests' notes shown again under the history when it is redrawn


class WatchController:
    def __init__(self, host: WatchHost) -> None:
        self.host = host
        self._timer: Timer | None = None
        self._busy = False
        self._notes: list[tuple[Text, bool]] = []
        self._history_size = -1
        self._sent: dict[int, str] | None = None

    def start(self) -> None:
        if self._timer is None:
            self._timer = self.host.set_interval(self.host.config.proxy.watch_interval_s, self.poll)
            self.poll()

    def poll(self) -> None:
        session = self.host.link.session
        if session is None or self._busy:
            return
        self._busy = True

        def work() -> None:
            try:
                found: Any = session.poll()
            except Exception as exc:  # noqa: BLE001 - shown, and the next poll tries again
                found = exc
            self.host.app.call_from_thread(self.apply, found)

        self.host.run_worker(work, thread=True, group="watch", name="watch proxy", exit_on_error=False)

    async def apply(self, found: "WatchPoll | Exception | None") -> None:
        self._busy = False
        if found is None:
            return
        if isinstance(found, Exception):
            self.host.status.set_slot(Progress("proxy", f"watch: {type(found).__name__}: {found}", "error"))
            return
        exchange = found.update.exchange
        label = proxied_label(exchange.model, exchange.provider, self.host.config.proxy.upstream)
        if label != getattr(self.host, "model_label", ""):
            self.host.show_status(model=label)
        if exchange.outcome != "pending":
            self._notes = [*self._notes, (exchange_note(exchange, found.update.diff, found.view, found.cache,
                                                        found.cost, found.counts, found.findings,
                                                        found.cached),
                                          exchange.outcome != "ok")][-NOTES_KEPT:]
        history = found.snapshot.history
        if len(history) != self._history_size or found.sent != self._sent:
            self._history_size, self._sent = len(history), found.sent
            await self.host.chat.show_history(history, found.snapshot.dropped, found.sent)
            for note, error in self._notes:
                await self.host.chat.add_note(note, error=error)
        elif exchange.outcome != "pending":
            note, error = self._notes[-1]
            await self.host.chat.add_note(note, error=error)
        await self.host.show_plan(found.view)
        state = "busy" if exchange.outcome == "pending" else "ready" if exchange.outcome == "ok" else "error"
        self.host.status.set_slot(Progress("proxy", f"proxy request #{exchange.id}: {exchange.outcome} · "
                                                    f"{found.steering}", state))

    def toggle(self) -> None:
        self.host.link.act(lambda session: session.toggle_passthrough())  # type: ignore[attr-defined]


def toggle_steer(host: Any) -> None:
    """The steering key: switch a followed proxied conversation between steering and pass-through."""
    watcher = getattr(host, "watcher", None)
    if watcher is None:
        host.notify("steering applies to proxied conversations: ctxbench open --watch", severity="warning")
    else:
        watcher.toggle()


def exchange_note(exchange: ProxyExchange, diff: PlanDiff, view: PlanView, cache: CacheReport | None = None,
                  cost: str = "", counts: str = "", findings: tuple[Finding, ...] = (), cached: str = "") -> Text:
    """What one proxied request did: outcome, tokens, the prompt cache (estimated and reported), its price, the
    plan diff, steering's changes and the reply."""
    plan = view.plan
    reported = f" · reported {tok(exchange.reported_prompt)}" if exchange.reported_prompt is not None else ""
    text = Text(f"request #{exchange.id} · {exchange.model or exchange.provider} · {exchange.status or '-'} "
                f"{exchange.outcome} · est {tok(plan.used_tokens)}{reported} prompt tok\n", style="bold")
    if cache is not None:
        text.append(f"{cache.summary()}\n")
    if cached:
        text.append(f"{cached}\n")
    if cost:
        text.append(f"{cost}\n")
    if counts:
        text.append(f"{counts}\n")
    for finding in findings:
        text.append(f"  finding ({finding.kind}): {finding.message}\n    → {finding.steer}\n", style="bold")
    text.append(f"plan diff: {diff.summary()}\n")
    for sign, entries, pick in (("+", diff.entered, lambda e: e.after), ("-", diff.left, lambda e: e.before),
                                ("~", diff.changed, lambda e: e.after - e.before)):
        for entry in entries[:DIFF_LINES]:
            text.append(f"  {sign} {_entry(entry)} {pick(entry):+,} tok\n" if sign == "~"
                        else f"  {sign} {_entry(entry)} {tok(pick(entry))} tok\n")
        if len(entries) > DIFF_LINES:
            text.append(f"  {sign} … {len(entries) - DIFF_LINES} more\n")
    for change in exchange.changes:
        text.append(f"  steered: {change}\n", style="italic")
    if exchange.error:
        text.append(f"  {exchange.error[:REPLY_CHARS]}\n")
    if exchange.reply:
        reply = " ".join(exchange.reply.split())
        text.append(f"  reply: {reply[:REPLY_CHARS]}{'…' if len(reply) > REPLY_CHARS else ''}")
    return text


def _entry(entry: DiffEntry) -> str:
    return f"{entry.label or entry.item_id} [{entry.section}]"
