"""``bench ui --actions``: every action key is pressed and timed from its arrival to the screen refresh that shows
its effect, on a real workbench; the app is left as the keys made it (pins, a dropped card, a rejected suggestion)."""
from __future__ import annotations

import math

from ctxbench.bench.ui_actions import ACTIONS, action_latency
from retrieval_fixture import write_repo
from tui_helpers import cut_cards_config

QUESTION = "How does the table renderer pad each row into text lines?"


async def test_every_action_key_is_timed_to_its_effect_on_the_screen(tmp_path):
    config = cut_cards_config(max_cards=3)  # cards left out of the plan: the suggestions accept and reject act on
    report = await action_latency(write_repo(tmp_path / "repo"), 2, False, config, question=QUESTION)
    timed = dict(report.timings)
    assert list(timed) == list(ACTIONS)  # each of them, in the order pressed
    for name, stats in timed.items():
        assert stats.runs >= 1, name
        assert 0 < stats.p50 <= stats.max and math.isfinite(stats.max), name
    assert timed["budget up"].runs == timed["overlay open"].runs == 2
    assert report.phase == "idle" and not report.loaded and report.target_ms == 50.0
