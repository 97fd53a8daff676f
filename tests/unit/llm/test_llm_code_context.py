"""request_code_context over a real code index."""
from __future__ import annotations

import pytest

from ctxbench.codegraph.index import build_index, load_index
from ctxbench.config import Config
from ctxbench.records import turns as ev
from ctxbench.llm.loop import TurnRunner
from ctxbench.llm.offline import OfflineClient
from ctxbench.codegraph.code_context import IndexCodeContext
from ctxbench.service.workbench import Workbench

KEY = "sk-" + "a1b2c3d4e5f6g7h8i9j0k1l2m3"


@pytest.fixture
def indexed(tmp_path):
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "__init__.py").write_text("")
    (repo / "pkg" / "billing.py").write_text(
        "class Invoice:\n"
        "    def total(self) -> int:\n"
        '        """Sum of the lines."""\n'
        "        return sum(self.lines)\n"
        "\n"
        "def charge(invoice):\n"
        f'    client = Client(api_key="{KEY}")\n'
        "    return client.charge(invoice.total())\n"
    )
    (repo / "pkg" / "report.py").write_text("def total(rows):\n    return len(rows)\n")
    (repo / ".env").write_text(f"OPENAI_API_KEY={KEY}\n")
    with Workbench(tmp_path / "ctx.db", Config()) as wb:
        build_index(repo, wb.conn, wb.config.index)
        yield wb, IndexCodeContext(load_index(repo, wb.conn, wb.config.index), wb.config.llm, wb.config.index)


def test_a_symbol_expands_to_its_body_with_secrets_masked(indexed):
    _, code = indexed
    body = code.expand("pkg.billing.charge")
    assert body.startswith("# pkg.billing.charge (function) — pkg/billing.py:6-8")
    assert "return client.charge(invoice.total())" in body
    assert KEY not in body and "[REDACTED]" in body
    assert code.expand("Invoice.total") == code.expand("pkg.billing.Invoice.total")
    assert '"""Sum of the lines."""' in code.expand("Invoice.total")


def test_ambiguous_unknown_and_secret_requests(indexed):
    _, code = indexed
    assert code.expand("total").startswith("ambiguous symbol; one of: pkg.billing.Invoice.total, pkg.report.total")
    assert code.expand("nope") is None
    assert code.expand(".env") is None and code.expand("../ctx.db") is None
    whole = code.expand("pkg/report.py")
    assert whole.startswith("# pkg/report.py (defines: pkg.report, pkg.report.total)")


def test_the_turn_runner_gives_the_model_the_body(indexed):
    wb, code = indexed
    sid = wb.new_session("t")
    runner = TurnRunner(wb, OfflineClient(), wb.config, code=code)
    events = list(runner.run(sid, '!tool request_code_context {"symbol": "Invoice.total"}'))
    (done,) = [e for e in events if isinstance(e, ev.ToolFinished)]
    assert done.ok and "return sum(self.lines)" in done.message.content
    assert events[-1].status == "ok"
