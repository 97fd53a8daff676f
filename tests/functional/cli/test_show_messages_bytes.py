"""``show --messages`` prints the payload exactly as it was sent: same keys in the same order, same bytes."""
from __future__ import annotations

import json
import os

from click.testing import CliRunner

from ctxbench.cli import main
from ctxbench.config import Config
from ctxbench.records.messages import ToolCall
from ctxbench.service.workbench import Workbench
from plan_requests import plan_of


def test_show_messages_bytes_equal_the_in_memory_payload(tmp_path):
    db = tmp_path / "x.db"
    with Workbench(db, Config()) as wb:
        sid = wb.new_session()
        wb.messages.append(sid, "system", "Be brief.")
        wb.messages.append(sid, "user", "list the files — ünïcode")
        wb.messages.append(sid, "assistant", "", tool_calls=(ToolCall("c1", "ls", '{"path": "."}'),))
        wb.messages.append(sid, "tool", "a.py\nb.py", tool_call_id="c1", tool_name="ls")
        wb.messages.append(sid, "assistant", "Two files.")
        plan = plan_of(wb, sid, "and now?")
    payload = plan.messages()
    assert list(payload[0]) == ["role", "content"]  # the order providers get: role first
    assert any(list(m) == ["role", "content", "tool_calls"] for m in payload)
    assert any(list(m) == ["role", "content", "tool_call_id"] for m in payload)
    shown = CliRunner().invoke(main, ["show", plan.plan_id, "--messages", "--db", str(db)],
                               env={"CTXBENCH_CONFIG": os.devnull})
    assert shown.exit_code == 0, shown.output
    assert shown.stdout == json.dumps(payload, indent=2, ensure_ascii=False) + "\n"
    with Workbench(db, Config()) as wb:
        stored = wb.plans.get(plan.plan_id)
    assert json.dumps(stored.messages()) == json.dumps(payload)  # same keys, same order
    assert json.dumps(stored.to_json()) == json.dumps(plan.to_json())
