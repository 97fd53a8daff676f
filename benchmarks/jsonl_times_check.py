"""A LoCoMo conversation exported as OpenAI JSONL without times, imported the way a user would, against the bench's
own import (which carries each session's date): evidence recall of the first N questions under the default strategy.

    PYTHONPATH=. python benchmarks/jsonl_times_check.py --locomo /work/shared/data/locomo10 --conversation 47

Prints recall for: the bench's import; the JSONL import (times from the date stamps in the text, as imported
now); the same JSONL import with every message at the import's time (as before); and the JSONL import planned with
the default system prompt (as ``ctxbench plan`` does). The JSONL lines carry role, content and id, no created_at.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path, required=True)
    parser.add_argument("--conversation", default="47")
    parser.add_argument("--questions", type=int, default=60)
    parser.add_argument("--budget", type=int, default=1024)
    args = parser.parse_args()

    from ctxbench.bench.locomo import BENCH_SYSTEM_PROMPT, _session
    from ctxbench.bench.locomo_data import load_conversation, to_transcript
    from ctxbench.config import Config
    from ctxbench.planner import build_plan
    from ctxbench.records import stamps
    from ctxbench.records.plan_request import PlanRequest
    from ctxbench.service.attach import load_embedder
    from ctxbench.service.workbench import Workbench

    conversation = load_conversation(args.locomo / f"{args.conversation}.json")
    questions = conversation.questions[: args.questions]
    base = Config()
    bench_config = dataclasses.replace(base, planner=dataclasses.replace(base.planner, system_prompt=BENCH_SYSTEM_PROMPT))
    embedder = load_embedder(base)
    transcript = to_transcript(conversation, "ab")

    def recall(wb, sid, config) -> float:
        total = 0.0
        for q in questions:
            settings = wb.settings(sid).with_choices(strategy=config.planner.default_strategy, budget=args.budget,
                                                     mode="off")
            inputs = wb.planning.inputs(PlanRequest(sid, q.question, settings))
            inputs = dataclasses.replace(inputs, system_prompt=config.planner.system_prompt)
            plan = build_plan(inputs, config.planner, wb.tokenizer)
            sent = {e for i in plan.items if i.included for e in i.external_ids}
            total += sum(1 for e in q.evidence if e in sent) / len(q.evidence)
        return total / len(questions)

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        jsonl = Path(tmp) / f"locomo{args.conversation}.jsonl"
        jsonl.write_text("".join(json.dumps({"role": m.role, "content": m.content, "id": m.external_id}) + "\n"
                                 for m in transcript.messages), encoding="utf-8")
        with Workbench(Path(tmp) / "b.db", bench_config) as wb:
            wb.embedder = embedder
            sid = _session(wb, conversation, "ab")
            wb.history.warm(sid)
            rows.append(("bench import (session dates)", recall(wb, sid, bench_config)))
            sid = wb.import_file(jsonl)
            wb.history.warm(sid)
            rows.append(("JSONL import, times from the text", recall(wb, sid, bench_config)))
            rows.append(("  ... with the default system prompt", recall(wb, sid, base)))
            keep = stamps.fill_times
            stamps.fill_times = lambda messages, **_kw: [m.created_at for m in messages]  # as before: no times
            try:
                sid = wb.import_file(jsonl)
            finally:
                stamps.fill_times = keep
            wb.history.warm(sid)
            rows.append(("JSONL import, every message at the import time", recall(wb, sid, bench_config)))
    print(f"LoCoMo {args.conversation}, first {len(questions)} questions, budget {args.budget:,}, "
          f"{base.planner.default_strategy}")
    for name, value in rows:
        print(f"{name:<50}{value:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
