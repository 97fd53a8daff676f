"""``ctxbench serve`` in a real browser: headless Chromium (the system package, never a browser download)
driven over the Chrome DevTools Protocol with aiohttp's websocket client.

The page's terminal draws on a canvas, so what the app sent is read where it arrives: a script added before
the page loads copies every websocket frame's text into ``window.__ctxbenchText``. The test checks that the
budget meter and the CTX indicator arrive and render, that ctrl+t typed into the page cycles the mode, and
saves screenshots (``CTXBENCH_SCREENSHOTS=DIR`` keeps them for review).
"""
from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from ports import free_port

DEMO = Path(__file__).resolve().parents[3] / "fixtures" / "demo_repo"
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--window-size=1400,900", "--remote-debugging-port=0", "about:blank")
CAPTURE_FRAMES = """
(() => {
  window.__ctxbenchText = "";
  const decoder = new TextDecoder();
  const Native = window.WebSocket;
  window.WebSocket = function (...args) {
    const ws = new Native(...args);
    ws.addEventListener("message", (event) => {
      if (event.data instanceof ArrayBuffer) window.__ctxbenchText += decoder.decode(event.data, {stream: true});
      else if (typeof event.data === "string") window.__ctxbenchText += event.data;
    });
    return ws;
  };
  window.WebSocket.prototype = Native.prototype;
  Object.assign(window.WebSocket, Native);
})();
"""
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[()][0-9A-Za-z]")


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Page:
    """One page of a browser over the DevTools protocol."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.ids = itertools.count(1)

    async def send(self, method: str, **params):
        n = next(self.ids)
        await self.ws.send_json({"id": n, "method": method, "params": params})
        while True:
            message = await asyncio.wait_for(self.ws.receive_json(), 60)
            if message.get("id") == n:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    async def text(self) -> str:
        result = await self.send("Runtime.evaluate", expression="window.__ctxbenchText || ''", returnByValue=True)
        return ANSI.sub("", result["result"].get("value", ""))

    async def wait_for_text(self, predicate, timeout: float = 90.0, start: int = 0) -> str:
        deadline = time.monotonic() + timeout
        seen = ""
        while time.monotonic() < deadline:
            seen = await self.text()
            if predicate(seen[start:]):
                return seen
            await asyncio.sleep(0.25)
        raise AssertionError(f"the page never showed what was expected; it got: {seen[-800:]!r}")

    async def screenshot(self, path: Path) -> Path:
        shot = await self.send("Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    async def key(self, key: str, code: str, keycode: int, ctrl: bool = False) -> None:
        for kind in ("keyDown", "keyUp"):
            await self.send("Input.dispatchKeyEvent", type=kind, key=key, code=code, windowsVirtualKeyCode=keycode,
                            nativeVirtualKeyCode=keycode, modifiers=2 if ctrl else 0)


@pytest.fixture
def browser_path() -> str:
    found = chromium()
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("CI runs the browser test: .ci/run installs chromium from the system packages")
        pytest.skip("no chromium on this machine: `apt-get install -y chromium` (.ci/run does it) runs this test")
    return found


async def test_served_workbench_renders_meter_and_mode_and_ctrl_t_cycles_it(tmp_path, browser_path):
    port = free_port()
    env = dict(os.environ, HF_HUB_OFFLINE="1", CTXBENCH_CONFIG=str(tmp_path / "config.toml"))
    (tmp_path / "config.toml").write_text('[ui]\nlive_preview = false\n')
    server = subprocess.Popen([sys.executable, "-m", "ctxbench", "serve", "--port", str(port), "--repo", str(DEMO),
                               "--no-index", "--db", str(tmp_path / "serve.db")], env=env, cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    browser = None
    try:
        found = re.search(rf"http://127\.0\.0\.1:{port}/\?token=\S+", server.stderr.readline())
        assert found, "ctxbench serve prints the URL to open, with its token"
        url = found.group(0)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, "ctxbench serve did not start"
                time.sleep(0.2)
        browser = subprocess.Popen([browser_path, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        devtools = ""
        for line in browser.stderr:
            if "DevTools listening on" in line:
                devtools = line.split("listening on ")[1].strip()
                break
        assert devtools, "chromium did not start its DevTools endpoint"
        http = devtools.replace("ws://", "http://").split("/devtools/")[0]
        async with aiohttp.ClientSession() as session:
            async with session.put(f"{http}/json/new?about:blank") as response:
                target = json.loads(await response.text())
            async with session.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                page = Page(ws)
                await page.send("Page.enable")
                await page.send("Page.addScriptToEvaluateOnNewDocument", source=CAPTURE_FRAMES)
                await page.send("Page.navigate", url=url)
                text = await page.wait_for_text(lambda t: "CTX: Light" in t and re.search(r"[\d,]+ / [\d,]+ tok", t))
                assert "ctxbench" in text
                loaded = await page.send("Runtime.evaluate", returnByValue=True, expression=(
                    "performance.getEntriesByType('resource').map(e => e.name)"
                    ".concat([...document.fonts].some(f => f.family.replace(/[\"']/g, '') === 'Roboto Mono'"
                    " && f.status === 'loaded') ? 'font:ok' : 'font:missing')"))
                loaded = loaded["result"]["value"]
                assert "font:ok" in loaded  # the page's font is the copy served here
                assert [u for u in loaded if u != "font:ok" and not u.startswith(f"http://127.0.0.1:{port}/")] == []
                shots = Path(os.environ.get("CTXBENCH_SCREENSHOTS") or tmp_path)
                shots.mkdir(parents=True, exist_ok=True)
                first = await page.screenshot(shots / "serve-light.png")
                assert first.stat().st_size > 10_000  # a page with the workbench drawn, not a blank one
                focused = await page.send("Runtime.evaluate", returnByValue=True, expression=(
                    "(() => { const t = document.querySelector('.xterm-helper-textarea'); if (t) t.focus();"
                    " return document.activeElement && document.activeElement.className; })()"))
                assert "xterm-helper-textarea" in str(focused["result"].get("value"))
                before = len(text)
                await page.key("t", "KeyT", 84, ctrl=True)
                await page.wait_for_text(lambda t: "CTX: Heavy" in t, start=before)
                await asyncio.sleep(0.5)
                second = await page.screenshot(shots / "serve-heavy.png")
                assert second.read_bytes() != first.read_bytes()
                before = len(await page.text())
                await page.key("t", "KeyT", 84, ctrl=True)
                await page.wait_for_text(lambda t: "CTX: Off" in t, start=before)
    finally:
        for proc in (browser, server):
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
