"""The meter and the overlay of a proxied conversation show each count calibrated to the model's own tokenizer
once the provider has reported usage (marked "≈ calibrated ×R from N …", the tokenizer's own figure beside it),
and plain counts labelled "not calibrated" before. Each figure shown equals the one computed from the stored plan
and the stored usage, and the calibrated items sum to the billed input plus cache tokens within 2%. A real proxy
on loopback, the real openai client, a scripted upstream whose tokenizer makes 1.8 of every cl100k token, and the
workbench run with App.run_test."""
from __future__ import annotations

from sdk import openai
from test_proxy import conversation, settled
from test_proxy_calibration import other_tokenizer
from test_proxy_watch import notes, wait_for
from textual.widgets import DataTable, Static
from tui_helpers import quiet_config, settle
from upstream_server import Answer, Upstream

from ctxbench.proxy.server import ProxyServer, RunningProxy
from ctxbench.service.options import LaunchOptions
from ctxbench.service.proxy.calibration import calibrated_items, calibration_for
from ctxbench.service.proxy.service import ProxyService
from ctxbench.service.workbench import Workbench
from ctxbench.tui.app import CtxbenchApp
from ctxbench.tui.screens.overlay import ContextOverlay

MODEL = "house-model"


def _ask(proxy, turns: int) -> None:
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0)
    messages = conversation(2, result_chars=800)
    client.chat.completions.create(model=MODEL, messages=messages)
    for n in range(1, turns):
        messages += [{"role": "assistant", "content": "Hello from upstream."},
                     {"role": "user", "content": f"and the tests? what do they check in module_{n}.py, and why?"}]
        client.chat.completions.create(model=MODEL, messages=messages)


def _app(db, session: str) -> CtxbenchApp:
    app = CtxbenchApp(LaunchOptions(db_path=db, session_id=session, watch=True, index_repo=False), quiet_config())
    app._disable_notifications = True
    return app


def _text(widget) -> str:
    return str(widget.render()).replace("\u00a0", " ")


async def test_the_meter_and_overlay_show_calibrated_counts_that_sum_to_the_bill(tmp_path):
    db = tmp_path / "ctx.db"
    with Upstream([Answer(prompt_of=other_tokenizer)] * 3) as up:
        wb = Workbench(db, quiet_config())
        with RunningProxy(ProxyServer(ProxyService(wb), up.url, wb.config.proxy), "127.0.0.1", 0) as proxy:
            _ask(proxy, 3)
            exchanges = settled(wb)
            latest = exchanges[-1]
            plan = wb.plans.get(latest.plan_id)
            calibration = calibration_for(wb, MODEL, before=latest.id)  # from the two exchanges before it
            assert calibration is not None and calibration.samples == 2
            expected = calibrated_items(plan, calibration)
            billed = wb.proxy_billing.usage(latest.id).prompt
            assert billed == other_tokenizer(up.seen[-1].json())
            assert abs(sum(expected.values()) - billed) <= 0.02 * billed  # within 2% of the bill
            assert abs(plan.used_tokens - billed) > 0.02 * billed  # the raw count is far off
            async with _app(db, latest.session_id).run_test(size=(130, 45)) as pilot:
                app = pilot.app
                main = app.main_screen
                await wait_for(pilot, lambda: main.view is not None and main.view.plan.plan_id == plan.plan_id)
                counts = main.view.counts
                assert counts is not None and counts.calibration == calibration
                assert counts.raw_used == plan.used_tokens and counts.used == sum(expected.values())
                mark = f"≈ calibrated ×{calibration.ratio:.2f} from 2 billed exchanges"
                assert counts.label() == f"{mark} ({plan.tokenizer} {plan.used_tokens:,})"
                # the meter: the calibrated total and sections, marked, the raw figure beside them
                state = main.meter.state
                assert state.used == counts.used and state.counts == counts.label()
                by_section: dict[str, int] = {}
                for item in plan.included:
                    by_section[item.section] = by_section.get(item.section, 0) + expected[item.id]
                assert all(tokens == by_section.get(name, 0) for name, tokens in state.sections)
                assert sum(tokens for _n, tokens in state.sections) == counts.used
                shown = _text(main.meter)
                assert f"≈{counts.used:,} / {plan.budget:,} tok" in shown
                legend = main.meter._legend(state, main.meter.size.width)
                assert legend.plain.startswith(f"≈ calibrated ×{calibration.ratio:.2f}:")
                assert legend.cell_len <= main.meter.size.width  # the mark and every section fit, nothing cut
                assert all(f"≈{tokens:,}" in legend.plain for _n, tokens in state.sections)
                assert counts.label() in main.meter.tooltip
                # the watch's note on the request names the same calibrated sum beside the bill
                await wait_for(pilot, lambda: any(f"request #{latest.id}" in n for n in notes(main)))
                note = next(n for n in notes(main) if f"request #{latest.id}" in n)
                assert f"items {counts.used:,} tok" in note and f"billed {billed:,}" in note
                # the overlay: the title and every included item's tokens, calibrated; the raw count in the detail
                await pilot.press("ctrl+o")
                await settle(pilot)
                overlay = app.screen
                assert isinstance(overlay, ContextOverlay)
                title = _text(overlay.query_one("#overlay-title", Static))
                assert f"≈{counts.used:,} / {plan.budget:,} tok" in title and counts.label() in title
                rows = [r for r in overlay.shown_rows if r.item is not None and r.item.included]
                assert {r.item.id for r in rows} == set(expected)
                for n, row in enumerate(overlay.shown_rows):
                    if row.item is None or not row.item.included:
                        continue
                    assert overlay._cells(row)[4].plain == f"≈{expected[row.item.id]:,}", row.item.id
                    overlay.query_one(DataTable).move_cursor(row=n, animate=False)
                    await pilot.pause()
                    detail = _text(overlay.query_one("#overlay-detail", Static))
                    assert f"≈{expected[row.item.id]:,} tok calibrated ({row.item.tokens:,} {plan.tokenizer})" \
                        in detail, row.item.id
        wb.close()


async def test_counts_before_any_reported_usage_are_plain_and_say_they_are_not_calibrated(tmp_path):
    db = tmp_path / "ctx.db"
    with Upstream([Answer(prompt_of=other_tokenizer)]) as up:
        wb = Workbench(db, quiet_config())
        with RunningProxy(ProxyServer(ProxyService(wb), up.url, wb.config.proxy), "127.0.0.1", 0) as proxy:
            _ask(proxy, 1)
            (exchange,) = settled(wb)
            plan = wb.plans.get(exchange.plan_id)
            async with _app(db, exchange.session_id).run_test(size=(130, 45)) as pilot:
                app = pilot.app
                main = app.main_screen
                await wait_for(pilot, lambda: main.view is not None and main.view.plan.plan_id == plan.plan_id)
                counts = main.view.counts
                assert counts is not None and counts.calibration is None
                assert counts.label() == f"{plan.tokenizer} counts, not calibrated for {MODEL}: no usage reported yet"
                assert main.meter.state.used == plan.used_tokens and main.meter.state.counts == counts.label()
                shown = _text(main.meter)
                assert f" {plan.used_tokens:,} / {plan.budget:,} tok" in shown and "≈" not in shown
                assert main.meter._legend(main.meter.state, main.meter.size.width).plain.startswith("not calibrated:")
                assert counts.label() in main.meter.tooltip
                await pilot.press("ctrl+o")
                await settle(pilot)
                overlay = app.screen
                title = _text(overlay.query_one("#overlay-title", Static))
                assert counts.label() in title and "≈" not in title
                for row in overlay.shown_rows:
                    if row.item is not None and row.item.included:
                        assert overlay._cells(row)[4].plain == f"{row.item.tokens:,}"
        wb.close()
