"""Peak memory and time of ``ctxbench proxy`` (a subprocess) for one chat request holding one big message.

    PYTHONPATH=$PWD python benchmarks/proxy_big_request.py 30 [CONFIG.toml]

The upstream is the tests' scripted one (tests/upstream_server.py) in this process; the proxy's peak is its
VmHWM from /proc, against its VmRSS after a warm-up request. Linux only.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import httpx2 as httpx  # noqa: E402
from upstream_server import Answer, Upstream  # noqa: E402

WORDS = "the quick brown fox jumps over the lazy dog and writes some code; "


def _memory(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmHWM", "VmRSS")):
            out[line.split()[0].rstrip(":")] = int(line.split()[1]) // 1024
    return out


def main() -> None:
    mb = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    config = sys.argv[2] if len(sys.argv) > 2 else os.devnull
    text = (WORDS * (mb * 1024 * 1024 // len(WORDS) + 1))[: mb * 1024 * 1024]
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": text}]}).encode()
    folder = tempfile.mkdtemp()
    with Upstream([Answer(text="ok")]) as up:
        proc = subprocess.Popen([sys.executable, "-m", "ctxbench", "proxy", "--upstream", up.url, "--port", "0",
                                 "--db", f"{folder}/bench.db", "--config", config], stderr=subprocess.PIPE, text=True,
                                env=dict(os.environ, HF_HUB_OFFLINE="1"))
        url = proc.stderr.readline().split()[3]
        for _ in range(3):
            proc.stderr.readline()
        httpx.post(url + "/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "warm"}]},
                   timeout=120)
        proc.stderr.readline()
        before = _memory(proc.pid)
        start = time.monotonic()
        response = httpx.post(url + "/v1/chat/completions", content=body, headers={"Content-Type": "application/json"},
                              timeout=600)
        took = time.monotonic() - start
        line = proc.stderr.readline().strip()
        after = _memory(proc.pid)
        assert up.seen[-1].body == body, "the upstream did not get the request byte for byte"
        proc.terminate()
        proc.wait()
    grown = after["VmHWM"] - before["VmRSS"]
    print(f"body {len(body) / 1e6:.1f} MB: HTTP {response.status_code} after {took:.1f} s; proxy RSS {before['VmRSS']} MB "
          f"before, peak {after['VmHWM']} MB (+{grown} MB, {grown * 1048576 / len(body):.1f}x the body); "
          f"store {os.path.getsize(f'{folder}/bench.db') / 1e6:.1f} MB")
    print(line)


if __name__ == "__main__":
    main()
