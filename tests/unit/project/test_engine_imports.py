"""Engine packages never pull in the TUI libraries (textual, rich)."""
from __future__ import annotations

import importlib.util
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import ctxbench

ENGINE_PACKAGES = ("ctxbench.planner", "ctxbench.compaction", "ctxbench.store", "ctxbench.service", "ctxbench.codegraph",
                   "ctxbench.retrieval", "ctxbench.llm", "ctxbench.bench", "ctxbench.transcripts",
                   "ctxbench.tokens", "ctxbench.config", "ctxbench.records", "ctxbench.heap", "ctxbench.redaction",
                   "ctxbench.validation",
                   # the headless front ends (servers) never pull in the TUI libraries either
                   "ctxbench.proxy", "ctxbench.mcp_server")
NOT_ENGINE = ("ctxbench.tui", "ctxbench.cli", "ctxbench.__main__",
              "ctxbench.web")  # the served workbench is textual-serve's server, which logs with rich
ROOT = Path(__file__).resolve().parents[3]


def test_every_engine_module_is_covered():
    top = {f"ctxbench.{m.name}" for m in pkgutil.iter_modules(ctxbench.__path__)}
    assert top - set(NOT_ENGINE) == set(ENGINE_PACKAGES)


@pytest.mark.parametrize("package", ENGINE_PACKAGES)
def test_engine_package_does_not_import_textual_or_rich(package):
    """The package and every module in it (a module imported only lazily counts too)."""
    assert importlib.util.find_spec(package) is not None
    code = (
        "import importlib, pkgutil, sys\n"
        f"root = importlib.import_module({package!r})\n"
        "for info in pkgutil.walk_packages(getattr(root, '__path__', []), root.__name__ + '.'):\n"
        "    importlib.import_module(info.name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"{package} imported {out.stdout.strip()}"


_PLAN_SCRIPT = """
import hashlib, json, sys
from ctxbench.config import PlannerConfig
from ctxbench.records.messages import Message
from ctxbench.planner import build_plan
from ctxbench.records.plans import PlanInputs
from ctxbench.records.vocab import STRATEGIES
from ctxbench.tokens import get_tokenizer
from ctxbench.transcripts.openai import parse_file

t = parse_file(sys.argv[1])
messages = [Message(id=n, session_id="s", branch_id="main", group_id=m.group, role=m.role, content=m.content,
                    tool_calls=m.tool_calls, tool_call_id=m.tool_call_id, tool_name=m.tool_name,
                    parsing_strategy=m.parsing_strategy, flags=m.flags) for n, m in enumerate(t.messages, 1)]
last = messages[-1].group_id
history = tuple(m for m in messages if m.group_id != last)
current = tuple(m for m in messages if m.group_id == last)
groups = sorted({m.group_id for m in history})
for strategy in STRATEGIES:
    for mode, budget in (("light", 4000), ("heavy", 16000)):
        inputs = PlanInputs(session_id="s", query=current[0].content, history=history, current_turn=current,
                            budget=budget, mode=mode, strategy=strategy, keyword_ranking=tuple(groups[::-7]),
                            semantic_ranking=tuple((g, (g % 13) / 13) for g in groups[::5]),
                            message_keyword=tuple((m.id, float(m.id % 7)) for m in history[::9]),
                            message_similarity=tuple((m.id, (m.id % 11) / 11) for m in history[::2]))
        plan = build_plan(inputs, PlannerConfig(), get_tokenizer())
        plan_bytes = json.dumps(plan.to_json(), ensure_ascii=False).encode()
        payload = json.dumps(plan.messages(), ensure_ascii=False).encode()
        print(strategy, mode, plan.plan_id, hashlib.sha256(plan_bytes).hexdigest(), hashlib.sha256(payload).hexdigest())
"""


def test_plan_id_and_plan_bytes_do_not_depend_on_the_hash_seed():
    """Same inputs, same PlanId and byte-identical plan and payload, in interpreters with different hash seeds."""
    outputs = []
    for seed in ("1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "HF_HUB_OFFLINE": "1"}
        out = subprocess.run([sys.executable, "-c", _PLAN_SCRIPT, str(ROOT / "fixtures" / "sessions" / "long_session.jsonl")],
                             capture_output=True, text=True, timeout=300, env=env)
        assert out.returncode == 0, out.stderr
        outputs.append(out.stdout)
    lines = outputs[0].splitlines()
    from ctxbench.records.vocab import STRATEGIES

    plans = 2 * len(STRATEGIES)
    assert len(lines) == plans and len({line.split()[2] for line in lines}) == plans  # all different plans
    assert outputs[0] == outputs[1]


def test_planner_modules_import_without_tui():
    code = (
        "import sys\n"
        "import ctxbench.planner, ctxbench.planner.pins, ctxbench.planner.activation\n"
        "import ctxbench.planner.strategies.hybrid, ctxbench.planner.strategies.levels\n"
        "import ctxbench.planner.strategies.semantic, ctxbench.planner.strategies.window\n"
        "import ctxbench.bench.plan_latency\n"
        "print(any(m.split('.')[0] in ('textual', 'rich') for m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
