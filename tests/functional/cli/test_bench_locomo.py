"""``ctxbench bench locomo`` on a tiny LoCoMo-shaped conversation written here (the real data is not needed)."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ctxbench.bench import locomo
from ctxbench.bench.locomo_data import load_conversation, to_transcript
from ctxbench.cli import main
from ctxbench.config import Config
from ctxbench.retrieval.embedder import HashingEmbedder

SESSION_1 = [
    ("Ann", "D1:1", "Hi Bo! I finally adopted a tortoise, his name is Sheldon."),
    ("Bo", "D1:2", "No way, congratulations! What does Sheldon eat?"),
    ("Ann", "D1:3", "Mostly dandelions and some kale from the market."),
    ("Bo", "D1:4", "I started pottery classes on Tuesdays, it is so relaxing."),
    ("Ann", "D1:5", "Pottery sounds great, send me a photo of your first bowl."),
    ("Bo", "D1:6", "Will do! Talk soon."),
]
SESSION_2 = [
    ("Bo", "D2:1", "Hey Ann, my first bowl cracked in the kiln."),
    ("Ann", "D2:2", "Oh no! Did you try again?"),
    ("Bo", "D2:3", "Yes, the second one survived and I painted it blue."),
    ("Ann", "D2:4", "Sheldon says hi, he escaped into the garden yesterday."),
]
QA = [
    {"question": "What is the name of Ann's tortoise?", "answer": "Sheldon", "evidence": ["D1:1"], "category": 4},
    {"question": "What color did Bo paint the bowl?", "answer": "blue", "evidence": ["D2:3"], "category": 4},
    {"question": "What does the tortoise eat and where did it escape?", "answer": "x",
     "evidence": ["D1:3", "D2:4"], "category": 1},
    {"question": "What is Bo's favourite film?", "answer": "-", "evidence": [], "category": 5},
    {"question": "No evidence listed", "answer": "-", "evidence": [], "category": 2},
]


def _write(folder, name="7"):
    folder.mkdir(parents=True, exist_ok=True)
    data = {"speaker_a": "Ann", "speaker_b": "Bo", "qa": QA,
            "session_1_date_time": "1:56 pm on 8 May, 2023", "session_2_date_time": "10:02 am on 20 May, 2023",
            "session_1": [{"speaker": s, "dia_id": d, "text": t} for s, d, t in SESSION_1],
            "session_2": [{"speaker": s, "dia_id": d, "text": t} for s, d, t in SESSION_2],
            "session_1_summary": "never read", "session_1_observation": {"Ann": [["never read", "D1:1"]]}}
    data["session_2"][2]["blip_caption"] = "a photo of a blue bowl"
    (folder / f"{name}.json").write_text(json.dumps(data), encoding="utf-8")
    return folder


def test_a_conversation_becomes_a_transcript_with_its_turn_ids(tmp_path):
    conversation = load_conversation(_write(tmp_path / "data") / "7.json")
    assert len(conversation.turns) == 10 and len(conversation.questions) == 3  # category 5 and no-evidence left out
    turn = conversation.turns[8]
    assert turn.text == "[10:02 am on 20 May, 2023] Bo: Yes, the second one survived and I painted it blue. " \
                        "[shared image: a photo of a blue bowl]"
    assert turn.created_at == "2023-05-20T10:02:00"
    ab = to_transcript(conversation, "ab")
    assert [m.role for m in ab.messages[:3]] == ["user", "assistant", "user"]
    assert [m.external_id for m in ab.messages] == [t.dia_id for t in conversation.turns]
    ba = to_transcript(conversation, "ba")
    assert ba.messages[0].role == "assistant" and ba.messages[1].role == "user"


def test_every_strategy_and_the_baselines_are_scored(tmp_path):
    folder = _write(tmp_path / "data")
    report = locomo.run([folder / "7.json"], Config(), db_path=tmp_path / "b.db", budgets=(60, 5000),
                        embedder=HashingEmbedder())
    rows = {(r.strategy, r.budget): r for r in report.rows}
    assert set(s for s, _b in rows) == {"default", "window", "hybrid", "levels", "semantic", "fused",
                                        "plain bm25+recency", "plain minilm", "plain rrf minilm+bm25"}
    assert rows[("default", 60)].is_strategy == "fused" and rows[("default", 60)].recall == rows[("fused", 60)].recall
    for strategy in ("window", "fused", "plain minilm"):
        assert rows[(strategy, 5000)].recall == 1.0  # everything fits: every evidence turn is there
        assert rows[(strategy, 5000)].questions == 3
    assert rows[("fused", 60)].recall < 1.0  # 60 tokens hold a system prompt and little else
    data = report.to_json()
    default = next(r for r in data["results"] if r["strategy"] == "default")
    assert default["is"] == "fused" and set(default["categories"]) == {"1", "4"}


def test_each_strategy_that_compares_by_meaning_has_its_texts_embedded_before_the_questions(tmp_path, monkeypatch):
    """A plan embeds only a few missing texts itself: without the warm-up of its turn vectors, ``semantic`` was scored
    on the newest 64 turns of each conversation (held-out recall 0.10-0.18 instead of 0.35-0.72)."""
    from ctxbench.service.history_ranker import HistoryRanker

    warmed: list[str | None] = []
    real = HistoryRanker.warm

    def spy(self, session_id, progress=None, *, strategy=None):
        warmed.append(strategy)
        return real(self, session_id, progress, strategy=strategy)

    monkeypatch.setattr(HistoryRanker, "warm", spy)
    folder = _write(tmp_path / "data")
    locomo.run([folder / "7.json"], Config(), db_path=tmp_path / "b.db", budgets=(60,), embedder=HashingEmbedder(),
               strategies=("semantic", "window"), baselines=False)
    assert sorted(warmed) == ["fused", "semantic"]  # the default (fused) runs too
    warmed.clear()
    locomo.run([folder / "7.json"], Config(), db_path=tmp_path / "c.db", budgets=(60,), embedder=HashingEmbedder(),
               strategies=("window",), baselines=False)
    assert warmed == ["fused"]


def test_the_command_prints_json_and_saves_the_results(tmp_path, monkeypatch):
    folder = _write(tmp_path / "data")
    monkeypatch.setattr("ctxbench.service.attach.load_embedder", lambda config: HashingEmbedder())
    out = tmp_path / "results"
    result = CliRunner().invoke(main, ["bench", "locomo", "--data", str(folder), "--budgets", "300,5000",
                                       "--strategies", "window,fused", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert {(r["strategy"], r["budget"]) for r in data["results"] if r["kind"] != "baseline"} == {
        (s, b) for s in ("default", "window", "fused") for b in (300, 5000)}
    assert all(0.0 <= r["recall"] <= 1.0 and r["questions"] == 3 for r in data["results"])
    saved = json.loads((out / "locomo.json").read_text())
    assert saved["report"]["results"] == data["results"] and saved["machine"]["cores"] >= 1
    text = CliRunner().invoke(main, ["bench", "locomo", "--data", str(folder), "--budgets", "300",
                                     "--strategies", "fused", "--no-baselines", "--no-save"])
    assert text.exit_code == 0, text.output
    assert "per category at 300 tokens" in text.output and "█" in text.output


def test_each_order_gets_rows_with_the_prefix_its_plans_share_and_their_cost(tmp_path, monkeypatch):
    folder = _write(tmp_path / "data")
    monkeypatch.setattr("ctxbench.service.attach.load_embedder", lambda config: HashingEmbedder())
    report = locomo.run([folder / "7.json"], Config(), db_path=tmp_path / "o.db", budgets=(120, 5000),
                        embedder=HashingEmbedder(), strategies=("window", "fused"), baselines=False,
                        orders=("relevance", "cache"))
    rows = {(r.strategy, r.budget, r.order): r for r in report.rows}
    assert {o for _s, _b, o in rows} == {"relevance", "cache"}
    for (strategy, budget, order), row in rows.items():
        other = rows[(strategy, budget, "cache" if order == "relevance" else "relevance")]
        assert row.recall == other.recall  # the same items, in another order
        assert row.cache is not None and row.cache.plans == 3 and 0.0 <= row.cache.prefix_share < 1.0
        assert row.cache.uncached_usd > 0
    big = rows[("window", 5000, "relevance")].cache  # everything fits: only the question changes, at the end
    assert big.prefix_share > 0.5 and big.cached_usd < big.uncached_usd
    data = report.to_json()
    assert data["orders"] == ["relevance", "cache"] and data["cache_price"]
    assert {"prefix_share", "usd_per_turn_uncached", "usd_per_turn_cached"} <= set(data["results"][0]["cache"])
    text = CliRunner().invoke(main, ["bench", "locomo", "--data", str(folder), "--budgets", "300",
                                     "--strategies", "fused", "--orders", "relevance,cache", "--no-baselines",
                                     "--no-save"])
    assert text.exit_code == 0, text.output
    assert "prompt cache" in text.output and "fused [cache]" in text.output


@pytest.mark.parametrize("args, message", [
    (["--data", "/nonexistent"], "is not a folder"),
    (["--conversations", "99"], "no conversation 99"),
    (["--budgets", "abc"], "whole numbers"),
    (["--strategies", "magic"], "unknown strategy magic"),
    (["--roles", "xy"], "unknown role mapping"),
    (["--orders", "sideways"], "unknown order sideways"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    folder = _write(tmp_path / "data")
    base = ["bench", "locomo"] + ([] if "--data" in args else ["--data", str(folder)])
    result = CliRunner().invoke(main, base + args + ["--no-save"])
    assert result.exit_code == 2, result.output
    assert message in result.output
