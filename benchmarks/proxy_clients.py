"""What each real assistant sends, and what the proxy adds per request.

For each client `make clients` installed (Claude Code, Codex CLI, aider, Gemini CLI): run it once through a
recording proxy to the scripted upstream of the tests (tests/assistant_upstream.py), keep its main request (the
one carrying the question) and print that request's anatomy as the proxy stored it (plan items by kind: count
and tokens, the largest items). Then replay that exact request, with the client's path and headers, N times
each way, interleaved in the same run: straight to the upstream, through a pass-through proxy and through a
steering proxy (nothing asked), each with a keep-alive connection, timing the whole reply (streamed to its
end). The proxy's added time is the paired difference of each round, p50 and p95.

    PYTHONPATH=. HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/proxy_clients.py [--rounds 200] [--json OUT]

Loopback only: nothing leaves the machine. Timings on a shared machine are noisy: compare the three columns of
one run, not runs with each other.
"""
from __future__ import annotations

import argparse
import http.client
import json
import socket
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # the scripted upstream and the client drivers live with the tests

from assistant_upstream import AssistantUpstream  # noqa: E402
from client_drivers import Driver  # noqa: E402

from ctxbench.config import Config  # noqa: E402
from ctxbench.proxy.server import ProxyServer, RunningProxy  # noqa: E402
from ctxbench.service.proxy.service import ProxyService  # noqa: E402
from ctxbench.service.workbench import Workbench  # noqa: E402

QUESTION = "Which module turns tokens into a tree, and where is it tested?"
CLIENTS = ("claude", "codex", "aider", "gemini")
DROP_HEADERS = {"host", "content-length", "connection", "accept-encoding", "transfer-encoding"}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def capture(client: str, work: Path) -> tuple[dict, dict | None]:
    """Run the client once through a recording proxy: its main request, and the stored anatomy (None when the
    proxy did not record that wire format)."""
    with AssistantUpstream() as up:
        wb = Workbench(work / f"{client}.db", Config())
        try:
            with RunningProxy(ProxyServer(ProxyService(wb), up.url, wb.config.proxy), "127.0.0.1", 0) as proxy:
                driver = Driver(client, work / client / "home", work / client / "work")
                result = driver.ask(proxy.url, QUESTION)
                if result.returncode != 0:
                    raise SystemExit(f"{client} failed: {result.stderr[-2000:]}")
                main = [s for s in up.chats() if QUESTION.encode() in s.body][-1]
                time.sleep(0.3)  # the last exchange's end is written just after the client has its reply
                anatomy = None
                for info in wb.sessions.list():
                    for exchange in wb.proxy.exchanges(info.id):
                        if wb.proxy.bodies(exchange.id)[0] == main.body:
                            anatomy = describe(wb.plans.get(exchange.plan_id), exchange)
        finally:
            wb.close()
    headers = {k: v for k, v in main.headers.items() if k not in DROP_HEADERS}
    return {"path": main.path, "headers": headers, "body": main.body, "side_calls": len(up.chats()) - 1,
            "calls": up.calls()}, anatomy


def describe(plan, exchange) -> dict:
    by_kind: dict[str, list] = defaultdict(list)
    for item in plan.items:
        by_kind[item.kind].append(item)
    return {
        "provider": exchange.provider, "estimated_tokens": plan.used_tokens, "reported_prompt": exchange.reported_prompt,
        "kinds": {kind: {"items": len(items), "tokens": sum(i.tokens for i in items),
                         "bytes": sum(getattr(i, "bytes", 0) for i in items)}
                  for kind, items in sorted(by_kind.items(), key=lambda kv: -sum(i.tokens for i in kv[1]))},
        "largest": [(i.id, i.kind, i.tokens, i.label[:60]) for i in sorted(plan.items, key=lambda i: -i.tokens)[:6]],
    }


def time_replays(request: dict, rounds: int, work: Path) -> dict:
    with AssistantUpstream() as up:
        wbs = [Workbench(work / f"replay-{n}.db", Config()) for n in range(2)]
        try:
            passthrough = RunningProxy(ProxyServer(ProxyService(wbs[0]), up.url, wbs[0].config.proxy), "127.0.0.1", 0)
            steering = RunningProxy(ProxyServer(ProxyService(wbs[1], steer=True), up.url, wbs[1].config.proxy),
                                    "127.0.0.1", 0)
            with passthrough, steering:
                targets = {"direct": up.url, "pass-through": passthrough.url, "steering": steering.url}
                clients = {name: http.client.HTTPConnection(urlsplit(url).hostname, urlsplit(url).port, timeout=60)
                           for name, url in targets.items()}
                for client in clients.values():  # no Nagle delay on our side either (aiohttp sets the same)
                    client.connect()
                    client.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                seconds: dict[str, list[float]] = {name: [] for name in targets}
                for n in range(rounds + 5):
                    for name, client in clients.items():
                        start = time.perf_counter()
                        client.request("POST", request["path"], body=request["body"], headers=request["headers"])
                        response = client.getresponse()
                        response.read()  # the whole reply, streamed to its end
                        assert response.status == 200, response.status
                        if n >= 5:  # the first rounds warm the connections, the tokenizer and the store
                            seconds[name].append(time.perf_counter() - start)
                for client in clients.values():
                    client.close()
        finally:
            for wb in wbs:
                wb.close()
    ms = {name: [s * 1000 for s in values] for name, values in seconds.items()}
    out = {name: {"p50": percentile(v, 0.5), "p95": percentile(v, 0.95)} for name, v in ms.items()}
    for name in ("pass-through", "steering"):
        added = [a - b for a, b in zip(ms[name], ms["direct"])]
        out[f"added by {name}"] = {"p50": percentile(added, 0.5), "p95": percentile(added, 0.95)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--clients", default=",".join(CLIENTS))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for client in args.clients.split(","):
            try:
                request, anatomy = capture(client, work)
            except BaseException as exc:  # noqa: BLE001 - a missing client skips, like its tests
                print(f"{client}: skipped ({type(exc).__name__}: {str(exc)[:200]})")
                continue
            timing = time_replays(request, args.rounds, work)
            results[client] = {"path": request["path"], "request_bytes": len(request["body"]),
                               "side_calls": request["side_calls"], "calls": request["calls"],
                               "anatomy": anatomy, "ms": timing}
            print(f"\n== {client}: {request['path']} · {len(request['body']):,} bytes · "
                  f"{request['side_calls']} other model call(s) · calls {request['calls']}")
            if anatomy is None:
                print("   anatomy: not recorded by this proxy (its wire format is not read yet)")
            else:
                print(f"   anatomy ({anatomy['provider']}): {anatomy['estimated_tokens']:,} estimated tokens")
                for kind, row in anatomy["kinds"].items():
                    print(f"     {kind:<18} {row['items']:>3} item(s) {row['tokens']:>7,} tok {row['bytes']:>8,} B")
                print("   largest: " + "; ".join(f"{i[0]} {i[2]:,}" for i in anatomy["largest"]))
            for name, row in timing.items():
                print(f"   {name:<22} p50 {row['p50']:7.2f} ms   p95 {row['p95']:7.2f} ms")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
