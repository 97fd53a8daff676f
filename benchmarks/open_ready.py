"""A first ``ctxbench open`` on a repository, headless: seconds from start to the first screen, to usable (the index
built and code retrieval plugged in: keyword + graph) and to ``semantic ready`` (the cards embedded, the vector index
built), on a fresh database. Default repository: textual's installed source (~4,700 symbols).

    PYTHONPATH=. HF_HUB_OFFLINE=1 python benchmarks/open_ready.py [--repo PATH] [--no-semantic] [--bulk-precision int8]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

POLL_S = 0.05


async def measure(repo: Path, semantic: bool, bulk_precision: str = "") -> dict:
    from ctxbench.config import Config
    from ctxbench.service.options import LaunchOptions
    from ctxbench.tui.app import CtxbenchApp

    import dataclasses

    config = Config()
    if bulk_precision:
        config = dataclasses.replace(config, embedding=dataclasses.replace(config.embedding,
                                                                           bulk_precision=bulk_precision))
    out: dict = {"repo": str(repo), "semantic": semantic, "bulk_precision": config.embedding.bulk_precision}
    with tempfile.TemporaryDirectory(prefix="ctxbench-open-ready-") as tmp:
        options = LaunchOptions(db_path=Path(tmp) / "open.db", repo=repo, new_session=True, title="open ready",
                                warm_embedder=semantic)
        app = CtxbenchApp(options, config)
        app._disable_notifications = True
        started = time.perf_counter()
        async with app.run_test(size=(160, 48)) as pilot:
            main = app.main_screen
            while True:
                session = main.session
                now = time.perf_counter() - started
                if "first_screen_s" not in out and main.view is not None:
                    out["first_screen_s"] = round(now, 2)
                if "usable_s" not in out and session is not None and session.retrieval_ready:
                    out["usable_s"] = round(now, 2)
                    attached = session.attached
                    out["symbols"] = attached.symbols if attached is not None else 0
                    if not semantic:
                        break
                if semantic and session is not None and session.semantic_ready:
                    out["semantic_ready_s"] = round(now, 2)
                    break
                await asyncio.sleep(POLL_S)
            await pilot.pause()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=None)
    parser.add_argument("--no-semantic", action="store_true")
    parser.add_argument("--bulk-precision", default="", help="embedding.bulk_precision for the cards (float32, int8)")
    args = parser.parse_args()
    repo = args.repo
    if repo is None:
        import importlib.util

        spec = importlib.util.find_spec("textual")
        repo = Path(list(spec.submodule_search_locations)[0])
    result = asyncio.run(measure(repo.resolve(), not args.no_semantic, args.bulk_precision))
    result["load_average"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
