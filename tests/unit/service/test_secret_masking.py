"""Secrets never reach a card, a RetrievalSet, a stored plan, request_code_context, ``show --messages``, an
imported session or a model call; every redaction in a plan is marked (``redacted: N``).

The fake secrets have real formats but are assembled at run time from random characters, so this file
holds no literal a secret scanner would flag.
"""
from __future__ import annotations

import json
import random
import string
import subprocess
import sys

import pytest

from ctxbench.config import Config
from ctxbench.redaction import MASK, mask_secrets, redact, redact_count
from ctxbench.service.attach import attach_repository
from ctxbench.service.workbench import Workbench
from plan_requests import plan_of

_rng = random.Random(1207)
B64 = string.ascii_letters + string.digits + "/+"


def _pick(alphabet: str, n: int) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


def aws_key_id() -> str:
    return "AK" + "IA" + _pick(string.ascii_uppercase + string.digits, 16)


def aws_secret() -> str:
    while True:
        value = _pick(B64, 40)
        if any(c.isdigit() for c in value) and "/" in value and any(c.islower() for c in value):
            return value


def github_token() -> str:
    return "gh" + "p_" + _pick(string.ascii_letters + string.digits, 36)


def slack_token() -> str:
    return "xo" + "xb-" + _pick(string.digits, 12) + "-" + _pick(string.digits, 12) + "-" + _pick(string.ascii_letters, 24)


def private_key() -> tuple[str, list[str]]:
    body = [_pick(B64, 64) for _ in range(4)]
    armour = "RSA " + "PRIVATE" + " KEY"
    return "\n".join([f"-----BEGIN {armour}-----", *body, f"-----END {armour}-----"]), body


KEY_ID, SECRET, BUCKET, GH, SLACK = aws_key_id(), aws_secret(), aws_secret(), github_token(), slack_token()
PEM, PEM_BODY = private_key()
DB_PASSWORD = "pw" + _pick(string.ascii_letters + string.digits, 14)
ENV_FILE = (f"AWS_ACCESS_KEY_ID={KEY_ID}\nAWS_SECRET_ACCESS_KEY={SECRET}\nGITHUB_TOKEN={GH}\n"
            f"DATABASE_URL=postgres://app:{DB_PASSWORD}@db.internal:5432/app\nDEBUG=true\n")
ALL_SECRETS = (KEY_ID, SECRET, BUCKET, GH, SLACK, DB_PASSWORD, *PEM_BODY)

STORAGE_PY = f'''"""Object storage for the ledger exports."""

# deploy credentials: {KEY_ID} {SECRET}
bucket_id = "{BUCKET}"
SLACK_HOOK_TOKEN = "{SLACK}"

DEPLOY_KEY = """
{PEM}
"""


def upload_export(path: str) -> str:
    """Upload one ledger export to the storage bucket and return its url."""
    token = "{GH}"
    return f"https://storage.example/{{bucket_id}}/{{path}}?t={{token}}"
'''


def _leaks(text: str) -> list[str]:
    return [s for s in ALL_SECRETS if s in text]


# -- the rule set --------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    f"# {KEY_ID} {SECRET}",  # an AWS secret access key next to its key id, in a comment
    f'bucket_id = "{BUCKET}"',  # a high-entropy assignment whose name says nothing
    f"aws_secret_access_key = '{SECRET}'",
    f"token = '{GH}'",
    f"hook = '{SLACK}'",
    ENV_FILE,
    PEM,
])
def test_every_format_is_masked(text):
    masked, count = redact_count(text)
    assert count >= 1 and MASK in masked
    assert not _leaks(masked)


@pytest.mark.parametrize("text, masked", [
    ('PASSWORD = "CorrectHorse42battery"', 'PASSWORD = "[REDACTED]"'),
    ("db_Password: CorrectHorse42battery", "db_Password: [REDACTED]"),
    # "İ" lowers to two characters: the words are then found in the text as it is, at the right places
    ("İ" * 40 + "\nDB_PASSWORD: CorrectHorse42battery\nnext line",
     "İ" * 40 + "\nDB_PASSWORD: [REDACTED]\nnext line"),
])
def test_a_password_named_in_any_case_is_masked_in_place(text, masked):
    assert redact_count(text) == (masked, 1)


def test_private_key_body_is_masked_and_lines_kept():
    masked, lines = mask_secrets(f'KEY = """\n{PEM}\n"""\n', "k.py")
    assert masked.count("\n") == PEM.count("\n") + 3
    assert not _leaks(masked) and "BEGIN RSA" in masked
    compile(masked, "k.py", "exec")
    assert lines >= {2, 3, 4, 5, 6}


@pytest.mark.parametrize("clean", [
    "password = get_password()", "the password is stored in the vault", "secret: settings.SECRET_KEY",
    'name = "a_long_identifier_name_here"', "x = 1", 'TOKEN = "[a-zA-Z_][a-zA-Z0-9_-]*"',
    "def load_symbols_and_cards(conn, repo_id):",
])
def test_ordinary_code_and_prose_are_left_alone(clean):
    assert redact(clean) == (clean, False)


# -- code indexing: cards, retrieval sets, plans, request_code_context, show --messages ----------------

@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    (root / "ledgerx").mkdir(parents=True)
    (root / "ledgerx" / "__init__.py").write_text("")
    (root / "ledgerx" / "storage.py").write_text(STORAGE_PY)
    return root


def test_cards_retrieval_sets_plans_and_code_context_hold_no_secret(tmp_path, repo):
    with Workbench(tmp_path / "ctx.db", Config()) as wb:
        attached = attach_repository(wb, repo, semantic=False)
        cards = attached.index.cards
        assert "ledgerx.storage.upload_export" in cards
        for card in cards.values():
            assert not _leaks(card.render(with_excerpt=True) + card.snippet + card.excerpt), card.symbol_id
        assert cards["ledgerx.storage"].redacted

        sid = wb.new_session("s", repo)
        plan = plan_of(wb, sid, "how does upload_export reach the storage bucket?", mode="heavy", budget=6000)
        assert any(i.kind == "symbol_card" and i.included for i in plan.items)
        retrieval = wb.plans.retrieval_set(plan.retrieval_set_id)
        assert retrieval is not None and retrieval.hits
        assert not _leaks(json.dumps([h.__dict__ for h in retrieval.hits], default=str) + retrieval.scaffold)
        stored = wb.plans.get(plan.plan_id)
        assert not _leaks(json.dumps(stored.messages()))

        body = attached.code.expand("ledgerx.storage.upload_export") or ""
        assert "upload_export" in body and not _leaks(body)
        lines = attached.code.expand("ledgerx/storage.py:1-20") or ""
        assert not _leaks(lines)

        from ctxbench.llm.tools import ToolBox
        from ctxbench.records.messages import ToolCall

        box = ToolBox(wb, sid, wb.config.llm, code=attached.code)
        for args in ({"symbol": "ledgerx.storage.upload_export"}, {"symbol": "ledgerx.storage"},
                     {"path": "ledgerx/storage.py", "start": 1, "end": 20}):
            out = box.run(ToolCall("c", "request_code_context", json.dumps(args)))
            assert not _leaks(out.content), args

    shown = subprocess.run([sys.executable, "-m", "ctxbench", "show", plan.plan_id, "--messages",
                            "--db", str(tmp_path / "ctx.db")], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) and not _leaks(shown.stdout)


# -- transcripts: on import, and on send ------------------------------------------------------------

def _transcript(path):
    rows = [
        {"role": "user", "content": "why does the app not start?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "read_file", "arguments": json.dumps({"path": ".env"})}}]},
        {"role": "tool", "tool_call_id": "c1", "content": ENV_FILE},
        {"role": "assistant", "content": f"The key {KEY_ID} is set; try `export TOKEN={GH}`."},
        {"role": "user", "content": "thanks, and the deploy key?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c2", "type": "function", "function": {
            "name": "write_file", "arguments": json.dumps({"path": "id_rsa", "content": PEM})}}]},
        {"role": "tool", "tool_call_id": "c2", "content": "written"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_import_masks_tool_results_replies_and_tool_call_arguments(tmp_path):
    with Workbench(tmp_path / "ctx.db", Config()) as wb:
        sid = wb.import_file(_transcript(tmp_path / "t.jsonl"))
        rows = wb.conn.execute("SELECT content, tool_calls FROM messages WHERE session_id = ?", (sid,)).fetchall()
        text = json.dumps([list(r) for r in rows])
        assert not _leaks(text)
        assert text.count(MASK) >= 6
        for (_content, calls) in rows:  # the arguments are still JSON objects
            for call in json.loads(calls):
                assert isinstance(json.loads(call["arguments"]), dict)


def test_on_send_masks_unmasked_stored_messages_and_marks_each_item(tmp_path):
    """A message stored before masking existed (or pasted into a chat) is masked in what is sent."""
    with Workbench(tmp_path / "ctx.db", Config()) as wb:
        sid = wb.new_session("s")
        wb.messages.append(sid, "user", "here is my env file")
        wb.messages.append(sid, "assistant", "", tool_calls=())
        user2 = wb.messages.append(sid, "user", f"and the old one:\n{ENV_FILE}")
        plan = plan_of(wb, sid, "what is wrong with it?")
        sent = json.dumps(plan.messages())
        assert not _leaks(sent)
        item = next(i for i in plan.included if user2.id in i.message_ids)
        assert item.redacted == 4  # key id, secret key, token, database password
        assert item.to_json()["redacted"] == 4
        assert all("redacted" not in i.to_json() for i in plan.items if not i.redacted)
        assert wb.plans.get(plan.plan_id).items == plan.items  # stored with its marks
        # query_db hands stored messages back to the model: masked too
        from ctxbench.llm.tools import ToolBox
        from ctxbench.records.messages import ToolCall

        out = ToolBox(wb, sid, wb.config.llm).run(
            ToolCall("q", "query_db", json.dumps({"sql": "SELECT content FROM messages"})))
        assert out.ok and not _leaks(out.content) and MASK in out.content


def test_a_what_if_plan_marks_the_redactions_the_plan_sent_would(tmp_path):
    from ctxbench.service.timeline import Timeline

    with Workbench(tmp_path / "ctx.db", Config()) as wb:
        sid = wb.new_session("s")
        wb.messages.append(sid, "user", "here is my env file")
        wb.messages.append(sid, "assistant", "", tool_calls=())
        wb.messages.append(sid, "user", f"and the old one:\n{ENV_FILE}")
        what_if = Timeline(wb, sid).what_if("what is wrong with it?", None, 0).plan(wb.settings(sid))
        sent = plan_of(wb, sid, "what is wrong with it?", store=False)
    assert sum(i.redacted for i in what_if.items) == sum(i.redacted for i in sent.items) == 4
    assert what_if.items == sent.items


def test_plan_table_prints_a_redacted_line(tmp_path):
    db = tmp_path / "ctx.db"
    with Workbench(db, Config()) as wb:
        sid = wb.new_session("s")
        wb.messages.append(sid, "user", f"deploy with {GH}")
        wb.messages.append(sid, "assistant", "ok")
        plan = plan_of(wb, sid, "next?")
    out = subprocess.run([sys.executable, "-m", "ctxbench", "show", plan.plan_id, "--db", str(db)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "redacted: 1 secrets masked in" in out.stdout and not _leaks(out.stdout)


async def test_the_overlay_shows_the_redactions(tmp_path):
    from textual.widgets import Static

    from tui_helpers import make_app, settle

    with Workbench(tmp_path / "tui.db", Config()) as wb:
        sid = wb.new_session("secrets")
        wb.messages.append(sid, "user", f"my token is {GH}")
        wb.messages.append(sid, "assistant", "noted")
    app = make_app(tmp_path, session_id=sid, retriever=False)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+o")
        await settle(pilot)
        overlay = app.screen
        title = str(overlay.query_one("#overlay-title", Static).render())
        assert "redacted: 1 secrets masked" in title
        from textual.widgets import DataTable

        index = next(n for n, r in enumerate(overlay.shown_rows) if r.item is not None and r.item.redacted)
        overlay.query_one(DataTable).move_cursor(row=index, animate=False)
        await settle(pilot)
        assert "redacted: 1" in str(overlay.query_one("#overlay-detail", Static).render())
