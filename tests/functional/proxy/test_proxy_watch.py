"""``ctxbench open --watch``: the workbench follows a proxied conversation live (App.run_test + Pilot, a real
proxy on loopback with the real openai client, a scripted upstream)."""
from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass
from typing import Any

from textual.widgets import DataTable
from sdk import openai
from upstream_server import Answer, Upstream

from ctxbench.proxy.server import ProxyServer, RunningProxy
from ctxbench.records.item_refs import atom_call_id
from ctxbench.service.options import LaunchOptions
from ctxbench.service.proxy.service import ProxyService
from ctxbench.service.workbench import Workbench
from ctxbench.tui.app import CtxbenchApp
from ctxbench.tui.screens.overlay import ContextOverlay
from ctxbench.tui.widgets.bubbles import SystemNote
from test_proxy import TOOLS, conversation
from tui_helpers import quiet_config, settle


def notes(main) -> list[str]:
    return [str(n.render()) for n in main.query(SystemNote)]


async def wait_for(pilot, predicate, rounds: int = 400) -> None:
    for _ in range(rounds):
        await pilot.pause(0.05)
        if predicate():
            return
    raise AssertionError("the watched workbench did not update")


@dataclass
class Watched:
    """A proxied conversation's first request sent through a steering proxy, and the workbench watching it."""

    up: Upstream
    wb: Workbench
    client: Any
    messages: list
    session: str
    app: CtxbenchApp
    pilot: Any

    @property
    def main(self) -> Any:
        return self.app.main_screen


@contextlib.asynccontextmanager
async def watching(tmp_path, answers: list[Answer], result_chars: int):
    """The scripted upstream, the steering proxy in front of it, the real openai client's first request (two tool
    results of ``result_chars``) and ``ctxbench open --watch`` on that conversation, once the workbench lists it."""
    db = tmp_path / "ctx.db"
    with Upstream(answers) as up:
        wb = Workbench(db, quiet_config())
        with RunningProxy(ProxyServer(ProxyService(wb, steer=True), up.url, wb.config.proxy), "127.0.0.1", 0) as proxy:
            client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0)
            messages = conversation(2, result_chars=result_chars)
            client.chat.completions.create(model="gpt-watch", messages=messages, tools=TOOLS)
            session = wb.proxy.latest_session()
            app = CtxbenchApp(LaunchOptions(db_path=db, session_id=session, watch=True, index_repo=False),
                              quiet_config())
            app._disable_notifications = True
            async with app.run_test(size=(130, 45)) as pilot:
                await wait_for(pilot, lambda: any("request #1" in n for n in notes(app.main_screen)))
                yield Watched(up, wb, client, messages, session, app, pilot)
        wb.close()


async def test_the_workbench_follows_and_steers_a_proxied_conversation(tmp_path):
    answers = [Answer(text="first reply", prompt_tokens=900), Answer(text="second reply")]
    async with watching(tmp_path, answers, result_chars=200) as w:
        up, wb, client, messages, session, app, pilot = w.up, w.wb, w.client, w.messages, w.session, w.app, w.pilot
        main = w.main
        sections = dict(main.meter.state.sections)
        assert sections["tools"] > 0 and sections["tool_results"] > 0 and sections["history"] > 0
        assert main.meter.state.used == main.view.plan.used_tokens
        first = next(n for n in notes(main) if "request #1" in n)
        assert "est" in first and "reported 900" in first and "reply: first reply" in first
        # the status line names the proxied conversation's model, not the workbench's own (offline) one
        assert "gpt-watch via proxy" in main.status.detail and "offline model" not in main.status.detail

        await pilot.press("ctrl+o")
        await settle(pilot)
        overlay = app.screen
        assert isinstance(overlay, ContextOverlay)
        rows = {r.target: r for r in overlay.shown_rows}
        assert {"tool:read_file", "atom:1:call_1", "atom:2:call_2", "group:1"} <= set(rows)
        index = next(n for n, r in enumerate(overlay.shown_rows) if r.target == "atom:1:call_1")
        overlay.query_one(DataTable).move_cursor(row=index, animate=False)
        await pilot.press("ctrl+d")
        await settle(pilot)
        assert "atom:1:call_1" in wb.proxy.drops(session)
        dropped = next(i for i in overlay.view.plan.items if i.id == "atom:1:call_1")
        assert not dropped.included and dropped.reason == "dropped_by_user"  # shown before the next request
        await pilot.press("escape")

        messages += [{"role": "assistant", "content": "first reply"}, {"role": "user", "content": "go on"}]
        await asyncio.to_thread(client.chat.completions.create, model="gpt-watch", messages=messages,
                                tools=TOOLS)
        await wait_for(pilot, lambda: any("request #2" in n for n in notes(main)))
        second = next(n for n in notes(main) if "request #2" in n)
        assert "plan diff:" in second and "steered: left out atom:1:call_1" in second
        assert any("request #1" in n for n in notes(main))  # earlier requests stay listed
        sent = json.loads(up.seen[1].body)
        assert "call_1" not in json.dumps(sent["messages"])
        # the note is shown first, the request's plan in the meter right after it (same update)
        await wait_for(pilot, lambda: main.view.plan.plan_id == wb.proxy.exchanges(session)[-1].plan_id)

        await pilot.press("ctrl+r")
        await settle(pilot)
        assert wb.proxy.conversation(session).passthrough
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert not wb.proxy.conversation(session).passthrough


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _shown_results(main) -> dict[str, str]:
    """The chat pane's tool result titles, by the stored message id they name."""
    from textual.widgets import Collapsible

    out = {}
    for c in main.query(Collapsible):
        if c.has_class("tool-result"):
            title = str(c.title)
            out[title.split(" · ")[1]] = title
    return out


async def test_what_the_watch_shows_is_what_the_upstream_received(tmp_path):
    async with watching(tmp_path, [Answer(text="first"), Answer(text="second")], result_chars=12_089) as w:
        up, wb, client, messages, session, pilot, main = w.up, w.wb, w.client, w.messages, w.session, w.pilot, w.main
        await wait_for(pilot, lambda: len(_shown_results(main)) == 2)
        forwarded = json.loads(up.seen[0].body)
        sent_results = {m["tool_call_id"]: m["content"] for m in forwarded["messages"] if m["role"] == "tool"}
        shown = _shown_results(main)
        for title in shown.values():
            assert "truncated" not in title and "tier" not in title
            assert f"{len('# module 1') + 1 + 12_089:,} chars · sent whole" in title
        assert all(len(text) == 12_100 for text in sent_results.values())
        # every item the plan shows: its text is in the forwarded body as it went, its tokens counted on it
        strings = set(_strings(forwarded))
        plan = main.view.plan
        for item in plan.included:
            for m in item.messages:
                if isinstance(m.get("content"), str) and m["content"]:
                    assert m["content"] in strings, item.id
            if item.kind == "tool_atom":
                call = atom_call_id(item.id)
                assert f"→ {len(sent_results[call]):,} chars" in item.label
                sent = next(m["content"] for m in item.messages if m.get("role") == "tool")
                assert sent == sent_results[call]
        await wait_for(pilot, lambda: main.status.slot("proxy") is not None)
        assert "steering on, nothing asked: requests go upstream as sent" in main.status.slot("proxy").text

        # the user sets Light: the next request's past results are cut, and the watch says by how much
        wb.update_settings(session, mode="light")
        messages += [{"role": "assistant", "content": "first"}, {"role": "user", "content": "go on"}]
        await asyncio.to_thread(client.chat.completions.create, model="gpt-watch", messages=messages,
                                tools=TOOLS)
        await wait_for(pilot, lambda: any("request #2" in n for n in notes(main)))
        await wait_for(pilot, lambda: all("cut by steering" in t for t in _shown_results(main).values()))
        assert "cuts long tool results" in main.status.slot("proxy").text
        forwarded = json.loads(up.seen[1].body)
        sent_results = {m["tool_call_id"]: m["content"] for m in forwarded["messages"] if m["role"] == "tool"}
        for title in _shown_results(main).values():
            assert f"12,100 chars · {len(sent_results['call_1']):,} sent (cut by steering)" in title
        plan = main.view.plan
        for item in plan.included:
            if item.kind == "tool_atom":
                call = atom_call_id(item.id)
                assert f"→ {len(sent_results[call]):,} of 12,100 chars sent" in item.label
                assert next(m["content"] for m in item.messages if m.get("role") == "tool") == \
                    sent_results[call]
