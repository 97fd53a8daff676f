"""Who can reach ``ctxbench serve``: the served page and its session websocket answer only to the loopback Host
of their port, to their own page's Origin and to the holder of the launch token, one session at a time; the page
loads nothing from outside this machine.

The guarded server runs for real on a loopback port (aiohttp), driven with aiohttp's own websocket client. Its
sessions run a stand-in app (a few lines speaking textual-serve's process protocol) instead of ``ctxbench open``:
what is under test is who gets a session, not the workbench. The last test starts ``ctxbench serve`` itself.
"""
from __future__ import annotations

import asyncio
import re
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from ctxbench.web.guard import LoopbackGuard, new_token
from ports import free_port
from ctxbench.web.server import GuardedServer

DEMO = Path(__file__).resolve().parents[3] / "fixtures" / "demo_repo"
STAND_IN_APP = r"""
import sys
out = sys.stdout.buffer
out.write(b"__GANGLION__\n")
payload = b"stand-in app ready"
out.write(b"D" + len(payload).to_bytes(4, "big") + payload)
out.flush()
seen = b""
while b"quit" not in seen:
    chunk = sys.stdin.buffer.read1(4096)
    if not chunk:
        break
    seen += chunk
"""
URL_PATTERN = re.compile(r"""(?:src|href|action)\s*=\s*["']([^"']*)["']|url\(\s*["']?([^"')]*)|((?:https?|wss?)://[^\s"'<>)]*)""",
                         re.IGNORECASE)
LOOPBACK_URL = re.compile(r"^(?:https?|wss?)://(?:127\.0\.0\.1|localhost|\[::1\])(?::\d+)?(?:/|$)", re.IGNORECASE)


class Served:
    """A guarded server on a loopback port, and the addresses a test uses."""

    def __init__(self, server: GuardedServer) -> None:
        self.server = server
        self.guard = server.guard
        self.base = f"http://127.0.0.1:{self.guard.port}"
        self.origin = self.base

    def ws_url(self, token: str | None = None) -> str:
        token = self.guard.token if token is None else token
        return f"ws://127.0.0.1:{self.guard.port}/ws/{token}" if token else f"ws://127.0.0.1:{self.guard.port}/ws"


async def released(served: Served) -> None:
    """Wait until the closed sessions' processes have stopped (their slots are free again)."""
    deadline = time.monotonic() + 30
    while served.server.sessions:
        assert time.monotonic() < deadline, "a closed session was never released"
        await asyncio.sleep(0.05)


@pytest.fixture
async def served(tmp_path):
    app_script = tmp_path / "stand_in_app.py"
    app_script.write_text(STAND_IN_APP)
    guard = LoopbackGuard(free_port(), new_token())
    server = GuardedServer(shlex.join([sys.executable, str(app_script)]), guard, max_sessions=1)
    runner = web.AppRunner(await server.build_app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", guard.port)
    await site.start()
    served = Served(server)
    try:
        yield served
        await released(served)  # every stand-in app has stopped before the loop closes
    finally:
        await runner.cleanup()


async def refused_status(session: aiohttp.ClientSession, url: str, **kwargs) -> int:
    """The HTTP status a websocket handshake was refused with (fails the test when it was accepted)."""
    try:
        ws = await session.ws_connect(url, **kwargs)
    except aiohttp.WSServerHandshakeError as exc:
        return exc.status
    await ws.close()
    raise AssertionError(f"the handshake to {url} with {kwargs} was accepted")


async def first_bytes(ws: aiohttp.ClientWebSocketResponse) -> bytes:
    while True:
        message = await asyncio.wait_for(ws.receive(), 30)
        assert message.type in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT), message
        if message.type == aiohttp.WSMsgType.BINARY:
            return message.data


async def test_the_session_websocket_with_the_token_and_the_page_origin_is_accepted(served):
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(served.ws_url(), origin=served.origin) as ws:
            assert await first_bytes(ws) == b"stand-in app ready"
        await released(served)
        # the token may also come as a query parameter; every loopback name of the port is this server
        async with session.ws_connect(f"ws://localhost:{served.guard.port}/ws?token={served.guard.token}",
                                      origin=f"http://localhost:{served.guard.port}") as ws:
            assert await first_bytes(ws) == b"stand-in app ready"


async def test_a_foreign_origin_is_refused_on_the_websocket(served):
    async with aiohttp.ClientSession() as session:
        for origin in ("http://evil.example", f"http://127.0.0.1:{served.guard.port + 1}",
                       f"https://127.0.0.1:{served.guard.port}", "null"):
            assert await refused_status(session, served.ws_url(), origin=origin) == 403, origin
        assert await refused_status(session, served.ws_url()) == 403  # no Origin: not this server's page
    assert served.server.sessions == 0


async def test_a_foreign_host_is_refused_on_every_route(served):
    """DNS rebinding: a page of attacker.example whose name now points at 127.0.0.1 is same-origin with itself,
    but its requests say ``Host: attacker.example:PORT``."""
    port, token = served.guard.port, served.guard.token
    async with aiohttp.ClientSession() as session:
        for host in (f"attacker.example:{port}", "attacker.example", f"127.0.0.1:{port + 1}", f"127.0.0.2:{port}"):
            assert await refused_status(session, served.ws_url(), origin=f"http://{host}",
                                        headers={"Host": host}) == 403, host
            for path in (f"/?token={token}", "/static/js/textual.js", "/download/some-key"):
                async with session.get(served.base + path, headers={"Host": host}) as response:
                    assert response.status == 403, (host, path)
                    assert "textual" not in (await response.text()).lower()
    assert served.server.sessions == 0


async def test_a_missing_or_wrong_token_is_refused_on_the_page_and_the_websocket(served):
    token = served.guard.token
    wrong = [token[:-1] + ("A" if token[-1] != "A" else "B"), token[:8], token + "x", "x" * len(token)]
    async with aiohttp.ClientSession() as session:
        assert await refused_status(session, served.ws_url(""), origin=served.origin) == 403
        for bad in wrong:
            assert await refused_status(session, served.ws_url(bad), origin=served.origin) == 403, bad
            async with session.get(f"{served.base}/?token={bad}") as response:
                assert response.status == 403
                assert token not in await response.text()
        async with session.get(f"{served.base}/") as response:
            page = await response.text()
            assert response.status == 403 and "needs its token" in page and token not in page
        async with session.get(f"{served.base}/?token={token}") as response:
            assert response.status == 200 and f"/ws/{token}" in await response.text()
    assert served.server.sessions == 0


async def test_a_second_session_is_refused_while_the_first_is_open_and_its_page_says_so(served):
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(served.ws_url(), origin=served.origin) as first:
            assert await first_bytes(first) == b"stand-in app ready"
            assert await refused_status(session, served.ws_url(), origin=served.origin) == 409
            async with session.get(f"{served.base}/?token={served.guard.token}") as response:
                assert response.status == 409
                assert "Another ctxbench session is open" in await response.text()
            assert served.server.sessions == 1  # the refused one started no process
        await released(served)  # the first session's process is stopped once its tab has gone
        async with session.ws_connect(served.ws_url(), origin=served.origin) as again:
            assert await first_bytes(again) == b"stand-in app ready"


def page_urls(text: str) -> list[str]:
    """Every URL in an HTML page or a stylesheet, comments left out (a credit line loads nothing)."""
    text = re.sub(r"<!--.*?-->|/\*.*?\*/", "", text, flags=re.DOTALL)
    return [next(g for g in match.groups() if g is not None) for match in URL_PATTERN.finditer(text)]


async def test_the_served_page_loads_nothing_from_outside_this_machine(served):
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{served.base}/?token={served.guard.token}") as response:
            page = await response.text()
            assert response.headers["Referrer-Policy"] == "no-referrer"  # the token never leaves as a referrer
        urls = page_urls(page)
        assert any(u.endswith("fonts/RobotoMono-VariableFont_wght.ttf") for u in urls)  # the font, served here
        foreign = [u for u in urls if re.match(r"^[a-z][a-z0-9+.-]*:|^//", u, re.IGNORECASE)
                   and not LOOPBACK_URL.match(u) and not u.startswith("http://www.w3.org/2000/svg")]
        assert foreign == []
        local = [u for u in urls if not re.match(r"^[a-z][a-z0-9+.-]*:|^//", u, re.IGNORECASE)]
        assert local, "the page references its script, styles and font"
        for url in local:  # each one is served by this server: nothing the page needs is missing
            async with session.get(served.base + url) as response:
                assert response.status == 200, url
                if url.endswith(".css"):
                    css_urls = page_urls(await response.text())
                    assert all(not re.match(r"^[a-z][a-z0-9+.-]*:|^//", u, re.IGNORECASE) or LOOPBACK_URL.match(u)
                               for u in css_urls), css_urls


def test_ctxbench_serve_prints_one_url_with_its_token_and_refuses_without_it(tmp_path):
    import urllib.error
    import urllib.request

    port = free_port()
    (tmp_path / "config.toml").write_text("")
    log = (tmp_path / "requests.log").open("w")
    server = subprocess.Popen([sys.executable, "-m", "ctxbench", "serve", "--port", str(port), "--repo", str(DEMO),
                               "--no-index", "--db", str(tmp_path / "serve.db"), "--config",
                               str(tmp_path / "config.toml")], cwd=tmp_path, stdout=log,
                              stderr=subprocess.PIPE, text=True)
    try:
        line = server.stderr.readline()
        found = re.search(rf"http://127\.0\.0\.1:{port}/\?token=([A-Za-z0-9_-]{{32,}})", line)
        assert found, line
        token = found.group(1)
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, "ctxbench serve did not start"
                time.sleep(0.2)

        def status(path: str, **headers: str) -> int:
            try:
                with urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                                                   headers=headers), timeout=30) as response:
                    return response.status
            except urllib.error.HTTPError as exc:
                return exc.code

        assert status(f"/?token={token}") == 200
        assert status("/") == 403
        assert status(f"/?token={new_token()}") == 403
        assert status(f"/?token={token}", Host=f"attacker.example:{port}") == 403
        assert status(f"/?token={token}", Origin="http://evil.example") == 403
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
    logged = (tmp_path / "requests.log").read_text()
    assert "GET" in logged and token not in logged  # the request log masks it: printed once, at launch


async def test_a_reloaded_tab_gets_its_session_back(served):
    """Reloading closes the old websocket while its process is still stopping: the new page and websocket wait
    for that slot instead of being told another session is open."""
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(served.ws_url(), origin=served.origin) as first:
            assert await first_bytes(first) == b"stand-in app ready"
        async with session.get(f"{served.base}/?token={served.guard.token}") as response:
            assert response.status == 200
        async with session.ws_connect(served.ws_url(), origin=served.origin) as again:
            assert await first_bytes(again) == b"stand-in app ready"


async def test_two_tabs_waiting_for_one_slot_get_one_session(served):
    async with aiohttp.ClientSession() as session:
        first = await session.ws_connect(served.ws_url(), origin=served.origin)
        assert await first_bytes(first) == b"stand-in app ready"
        waiting = [asyncio.create_task(session.ws_connect(served.ws_url(), origin=served.origin)) for _ in range(2)]
        await asyncio.sleep(0.3)  # both handshakes are waiting for the slot (were they not, the outcome is the same)
        await first.close()
        outcomes = await asyncio.gather(*waiting, return_exceptions=True)
        opened = [o for o in outcomes if isinstance(o, aiohttp.ClientWebSocketResponse)]
        refused = [o for o in outcomes if isinstance(o, aiohttp.WSServerHandshakeError)]
        assert len(opened) == 1 and [r.status for r in refused] == [409], outcomes
        assert served.server.sessions == 1
        await opened[0].close()
