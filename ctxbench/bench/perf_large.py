"""``ctxbench bench perf --large``: ctxbench at load — a 10,000-turn session and a 100,000-symbol repository.

Everything measured is generated here, from a seed, offline:

* the session: ``plan_latency.synthetic_session`` (user turns, tool calls in two formats with results of very
  different sizes, replies, an early standing rule), imported into a fresh database through the workbench;
* the repository: Python modules of classes, methods and functions calling one another across modules
  (:func:`write_repository`), about ``symbols`` symbols in all.

Phases (each a :class:`~ctxbench.bench.perf_records.PhaseTiming`, targets from issue 12):

* ``plan`` — per strategy, the first plan of a workbench opened on the session (the history read and masked;
  for ``semantic`` / ``fused`` the history embedded with the configured model first, with the time of that
  warm-up on its own; what the store keeps of earlier plans — masking, token counts, the history snapshot —
  forgotten first), for window / hybrid / levels the first plan of the session reopened in a fresh process (the
  snapshot this workbench keeps, as closing it would, and the kept masking and counts used; the same PlanId
  asserted), then plan p50/p95 warm (vectors cached, the heap settled as the
  workbench does after loading: target p95 ≤ 50 ms, query encoding included), the query encoding alone, the plan
  right after a new turn is added, and storing the plan of a new turn (target ≤ 150 ms; the workbench's first
  stored plan, which keys every history message, in its detail);
* ``replay`` — ``ctxbench replay SESSION --json`` in a fresh process: time to its first record (target: a
  couple of seconds), and to its hundredth;
* ``index`` — indexing the generated repository (parse, graph, cards; no embedding) in a fresh process: wall
  time and that process's peak resident memory.
"""
from __future__ import annotations

import gc
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ctxbench.bench.perf_records import PhaseTiming
from ctxbench.config import Config
from ctxbench.records.vocab import EMBEDDING_STRATEGIES as EMBEDDING
from ctxbench.records.vocab import STRATEGIES
from ctxbench.retrieval.query_vector import encode_query
from ctxbench.records.plan_request import PlanRequest
from ctxbench.records.plans import ContextPlan

if TYPE_CHECKING:
    from ctxbench.service.workbench import Workbench

LARGE_TURNS = 10_000
LARGE_SYMBOLS = 100_000
LARGE_SEED = 20260312
PLAN_TARGET_S = 0.050  # issue 12: every strategy's plan p95 at 10k turns once vectors are cached
REPLAY_FIRST_TARGET_S = 2.0  # issue 12: replay prints its first record within a couple of seconds
PLAN_REPEAT = 40  # warm plans per strategy (the queries in turn)
NEW_TURNS = 5  # turns added to time the plan right after one (and again to time storing its plan)
STORE_TARGET_S = 0.150  # issue 12 (load): storing the plan of a turn at 10k turns, every item kept
REPLAY_RECORDS = 100  # replay records read before the replay is stopped
SYMBOLS_PER_FILE = 100  # module-level functions, classes and methods per generated module (about)


@dataclass(frozen=True)
class LargeReport:
    turns: int
    messages: int
    symbols: int
    phases: tuple[PhaseTiming, ...]

    def to_json(self) -> dict[str, Any]:
        return {"turns": self.turns, "messages": self.messages, "symbols": self.symbols,
                "phases": [p.to_json() for p in self.phases]}


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def _rss_mib() -> float:
    """This process's resident memory now (MiB)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


# -- the session --------------------------------------------------------------------------------------------

def import_session(db: Path, config: Config, turns: int, seed: int = LARGE_SEED) -> tuple[str, int, float]:
    """(session id, messages, seconds) of the synthetic session of ``turns`` turns imported into ``db``."""
    from ctxbench.bench.plan_latency import synthetic_session
    from ctxbench.records.transcripts import Transcript, TranscriptMessage
    from ctxbench.service.workbench import Workbench

    history = synthetic_session(turns, seed=seed)
    transcript = Transcript("synthetic", "openai", tuple(
        TranscriptMessage(line=i + 1, group=m.group_id, role=m.role, content=m.content, tool_calls=m.tool_calls,
                          tool_call_id=m.tool_call_id, tool_name=m.tool_name, parsing_strategy=m.parsing_strategy,
                          flags=m.flags)
        for i, m in enumerate(history)))
    t0 = time.perf_counter()
    with Workbench(db, config) as wb:
        session_id = wb.import_transcript(transcript, title=f"synthetic {turns} turns")
    return session_id, len(history), time.perf_counter() - t0


def _fresh_process_state(config: Config) -> None:
    """Forget what earlier plans left in this process (layouts, masked texts, token counts), so a first plan is a
    first plan."""
    from ctxbench.planner import atoms
    from ctxbench.redaction import forget_masks
    from ctxbench.tokens import get_tokenizer

    atoms.clear_caches()
    forget_masks()
    forget = getattr(get_tokenizer(config.tokenizer.name, config.tokenizer.cache_size), "forget", None)
    if forget is not None:
        forget()
    gc.collect()


# the first plan of a session reopened in a fresh interpreter: the workbench opened, the session planned once
_REOPEN_CHILD = """
import json, sys, time
from pathlib import Path
from ctxbench.config import load_config
from ctxbench.records.plan_request import PlanRequest
from ctxbench.service.workbench import Workbench

config = load_config(Path(sys.argv[5]) if len(sys.argv) > 5 else None)
with Workbench(Path(sys.argv[1]), config) as wb:
    t0 = time.perf_counter()
    settings = wb.settings(sys.argv[2]).with_choices(strategy=sys.argv[4])
    plan = wb.planning.plan(PlanRequest(sys.argv[2], sys.argv[3], settings))
    seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "plan_id": plan.plan_id}))
"""


def reopened_first_plan(db: Path, session_id: str, query: str, strategy: str, config_path: Path | None = None
                        ) -> tuple[float, float, str]:
    """(seconds of the first plan, seconds of the whole process, its PlanId) of ``session_id`` planned in a fresh
    interpreter: what a user waits for when reopening a session the store has planned before."""
    command = [sys.executable, "-c", _REOPEN_CHILD, str(db), session_id, query, strategy]
    if config_path is not None:
        command.append(str(config_path))
    t0 = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    wall = time.perf_counter() - t0
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return float(found["seconds"]), wall, str(found["plan_id"])


def plan_phases(db: Path, session_id: str, turns: int, config: Config, embedder: Any, *, repeat: int = PLAN_REPEAT,
                new_turns: int = NEW_TURNS, progress: Callable[[str], None] = lambda what: None,
                config_path: Path | None = None) -> list[PhaseTiming]:
    """Per strategy: the first plan (with the history's embedding for semantic and fused; the masking and token
    counts the store keeps forgotten first), the first plan of the session reopened in a fresh process (window,
    hybrid, levels), warm p50/p95, and the plan after a new turn."""
    from ctxbench.bench.plan_latency import percentile, queries
    from ctxbench.heap import settle
    from ctxbench.service.workbench import Workbench

    asked = queries()
    out: list[PhaseTiming] = []
    for strategy in STRATEGIES:
        _fresh_process_state(config)
        with Workbench(db, config) as wb:
            wb.derived_texts.forget(session_id)  # a first open: nothing kept from an earlier strategy's plans
            wb.snapshots.forget(session_id)
            detail: dict[str, Any] = {}
            warm_s = 0.0
            if strategy in EMBEDDING:
                wb.embedder = embedder
                progress(f"{strategy}: embedding the history")
                t0 = time.perf_counter()
                seen: list[int] = []
                embedded = wb.history.warm(session_id, lambda done, total: seen.append(total), strategy=strategy)
                warm_s = time.perf_counter() - t0
                detail.update(embedded=embedded, embedding_s=round(warm_s, 2),
                              embedded_per_s=round(embedded / warm_s, 1) if warm_s > 0 else None)
            progress(f"{strategy}: first plan")
            t0 = time.perf_counter()
            first_plan = _plan(wb, session_id, asked[0], strategy)
            first_s = time.perf_counter() - t0
            reopened = None
            if strategy not in EMBEDDING:  # those would load the embedding model in the fresh process first
                progress(f"{strategy}: first plan of the session reopened in a fresh process")
                wb.snapshots.save()  # what closing the workbench keeps
                reopened = reopened_first_plan(db, session_id, asked[0], strategy, config_path)
                if reopened[2] != first_plan.plan_id:
                    raise RuntimeError(f"{strategy}: the reopened session planned {reopened[2]}, "
                                       f"the first open {first_plan.plan_id}")
            settle()  # as the workbench does once a session is loaded
            walls: list[float] = []
            cpus: list[float] = []
            progress(f"{strategy}: {repeat} warm plans")
            for i in range(repeat):
                query = asked[(i + 1) % len(asked)]
                w0, c0 = time.perf_counter(), time.process_time()
                _plan(wb, session_id, query, strategy)
                walls.append(time.perf_counter() - w0)
                cpus.append(time.process_time() - c0)
            ordered = sorted(walls)
            p95 = percentile(ordered, 95)
            if strategy in EMBEDDING:  # what of a plan is the query's encoding
                encode = []
                for query in asked:
                    t0 = time.perf_counter()
                    encode_query(embedder, query, config.planner.semantic.embed_max_seq_length)
                    encode.append(time.perf_counter() - t0)
                detail["query_encode_p50_ms"] = _ms(statistics.median(encode))
            after: list[float] = []
            for i in range(new_turns):
                wb.messages.append(session_id, "user", f"one more question ({i}) about the {asked[i % len(asked)]}")
                wb.messages.append(session_id, "assistant", f"answer {i}: done")
                t0 = time.perf_counter()
                _plan(wb, session_id, asked[i % len(asked)], strategy)
                after.append(time.perf_counter() - t0)
            out.append(PhaseTiming(f"plan {strategy} @ {turns:,} turns (p95, warm)",
                                   (p95,), PLAN_TARGET_S,
                                   (("p50_ms", _ms(statistics.median(ordered))),
                                    ("p95_ms", _ms(p95)),
                                    ("cpu_p50_ms", _ms(statistics.median(cpus))),
                                    ("runs", repeat), *detail.items(), ("rss_mib", _rss_mib()))))
            label = "history embedded + first plan" if strategy in EMBEDDING else "first plan (history read)"
            out.append(PhaseTiming(f"  {strategy}: {label}", (warm_s + first_s,), None,
                                   (("first_plan_s", round(first_s, 3)), ("embedding_s", round(warm_s, 2)))))
            if reopened is not None:
                out.append(PhaseTiming(f"  {strategy}: first plan, session reopened (fresh process)", (reopened[0],),
                                       None, (("process_s", round(reopened[1], 2)), ("same_plan_id", True))))
            out.append(PhaseTiming(f"  {strategy}: plan right after a new turn (median of {new_turns})",
                                   (statistics.median(after),), None, (("max_ms", _ms(max(after))),)))
            out.append(store_phase(wb, session_id, strategy, asked, new_turns))
    return out


def _plan(wb: Workbench, session_id: str, query: str, strategy: str) -> ContextPlan:
    """The plan of ``query`` under ``strategy`` (not stored), as the workbench makes it."""
    settings = wb.settings(session_id).with_choices(strategy=strategy)
    return wb.planning.plan(PlanRequest(session_id, query, settings))


def store_phase(wb: Workbench, session_id: str, strategy: str, asked: list[str], new_turns: int) -> PhaseTiming:
    """Storing the plan of a new turn, as every sent turn does (the plan made first, not timed): the median of
    ``new_turns`` after one stored plan; the first plan stored by the workbench (every history message keyed)
    in the detail."""
    stores: list[float] = []
    for i in range(new_turns + 1):
        wb.messages.append(session_id, "user", f"a stored question ({i}) about the {asked[i % len(asked)]}")
        wb.messages.append(session_id, "assistant", f"stored answer {i}")
        settings = wb.settings(session_id).with_choices(strategy=strategy)
        inputs = wb.planning.inputs(PlanRequest(session_id, asked[i % len(asked)], settings))
        plan = wb.planning.build(inputs)
        t0 = time.perf_counter()
        wb.plans.save(inputs, plan)
        stores.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    stored = wb.plans.get(plan.plan_id)  # and read back: the same plan, every item kept
    read_s = time.perf_counter() - t0
    return PhaseTiming(f"  {strategy}: store the plan of a new turn (median of {new_turns})",
                       (statistics.median(stores[1:]),), STORE_TARGET_S,
                       (("first_store_ms", _ms(stores[0])), ("max_ms", _ms(max(stores[1:]))),
                        ("items", len(plan.items)), ("read_back_ms", _ms(read_s)), ("read_back_equal", stored == plan)))


# -- replay ----------------------------------------------------------------------------------------------------

def replay_phase(db: Path, session_id: str, records: int = REPLAY_RECORDS) -> list[PhaseTiming]:
    """``ctxbench replay SESSION --json`` in a fresh process: seconds to its first and ``records``-th record."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "ctxbench", "replay", session_id, "--json", "--db", str(db)]
    t0 = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    first = nth = None
    seen = 0
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("{"):
                seen += 1
                if seen == 1:
                    first = time.perf_counter() - t0
                if seen == records:
                    nth = time.perf_counter() - t0
                    break
    finally:
        process.kill()
        process.wait()
    if first is None:
        raise RuntimeError("replay printed no record")
    return [PhaseTiming("replay --json: first record (fresh process)", (first,), REPLAY_FIRST_TARGET_S,
                        ((f"record_{records}_s", round(nth, 2) if nth is not None else None),))]


# -- the repository ----------------------------------------------------------------------------------------

def write_repository(root: Path, symbols: int = LARGE_SYMBOLS, seed: int = LARGE_SEED) -> int:
    """Write a Python package of about ``symbols`` symbols under ``root`` (seeded: the same files every time):
    modules of classes with methods and of functions, each calling functions of other modules it imports.
    Returns the number of files."""
    rng = random.Random(seed)
    files = max(1, round(symbols / SYMBOLS_PER_FILE))
    packages = max(1, files // 50)
    words = ("ledger", "invoice", "parser", "token", "cache", "retry", "budget", "render", "widget", "index",
             "search", "session", "branch", "graph", "score", "plan", "card", "scaffold", "symbol", "excerpt")
    for f in range(files):
        package = root / "genpkg" / f"part{f % packages:03d}"
        package.mkdir(parents=True, exist_ok=True)
        (package / "__init__.py").touch()
        others = sorted({rng.randrange(files) for _ in range(3)} - {f})
        lines = ['"""Generated module {f}: {w}."""'.format(f=f, w=rng.choice(words))]
        lines += [f"from genpkg.part{o % packages:03d} import mod{o:05d}" for o in others]
        classes, methods = 6, 7
        functions = SYMBOLS_PER_FILE - 1 - classes * (methods + 1)
        for c in range(classes):
            lines.append(f"\n\nclass {rng.choice(words).title()}{c}{f}:")
            lines.append(f'    """A {rng.choice(words)} of module {f}."""')
            for m in range(methods):
                lines.append(f"\n    def {rng.choice(words)}_{m}(self, value: int) -> int:")
                lines.append(f'        """Return the {rng.choice(words)} of ``value``."""')
                lines.append(f"        return value + {rng.randrange(100)}")
        for fn in range(functions):
            name = f"{rng.choice(words)}_{fn}"
            lines.append(f"\n\ndef {name}(value: int = {rng.randrange(9)}) -> int:")
            lines.append(f'    """Compute the {rng.choice(words)} for ``value``."""')
            if others and fn % 3 == 0:
                o = rng.choice(others)
                lines.append(f"    return mod{o:05d}.{rng.choice(words)}_{rng.randrange(functions)}(value) + 1")
            else:
                lines.append(f"    return value * {rng.randrange(1, 9)}")
        (package / f"mod{f:05d}.py").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return files


# run in a fresh interpreter; its memory is read from /proc (VmHWM: this process's peak; getrusage's maxrss
# would carry the parent's peak over fork and exec)
_INDEX_CHILD = """
import json, sys, time
from pathlib import Path
from ctxbench.codegraph.index import build_index
from ctxbench.config import load_config
from ctxbench.store.database import Database

def memory(field):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0

config = load_config(Path(sys.argv[3]) if len(sys.argv) > 3 else None)
database = Database(Path(sys.argv[2]))
conn = database.dedicated_connection()
before = memory("VmRSS")
t0 = time.perf_counter()
result = build_index(sys.argv[1], conn, config.index)
seconds = time.perf_counter() - t0
database.close()
print(json.dumps({"seconds": seconds, "files": result.files, "symbols": result.symbols, "edges": result.edges,
                  "cards": result.cards, "parse_errors": len(result.parse_errors), "peak_rss_mib": memory("VmHWM"),
                  "rss_before_mib": before, "phases": dict(result.phases)}))
"""


def index_phase(workdir: Path, symbols: int, config_path: Path | None = None) -> tuple[list[PhaseTiming], int]:
    """Index the generated repository in a fresh process: (its timing and peak memory, the symbols indexed)."""
    repo = workdir / "generated-repo"
    files = write_repository(repo, symbols)
    command = [sys.executable, "-c", _INDEX_CHILD, str(repo), str(workdir / "index.db")]
    if config_path is not None:
        command.append(str(config_path))
    done = subprocess.run(command, capture_output=True, text=True, check=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    found = json.loads(done.stdout.strip().splitlines()[-1])
    detail = (("files", found["files"]), ("symbols", found["symbols"]), ("edges", found["edges"]),
              ("cards", found["cards"]), ("parse_errors", found["parse_errors"]),
              ("peak_rss_mib", round(found["peak_rss_mib"], 1)), ("rss_before_mib", round(found["rss_before_mib"], 1)),
              *((f"{k}_s", round(v, 2)) for k, v in found["phases"].items()))
    assert files > 0
    return ([PhaseTiming(f"index of {found['symbols']:,} generated symbols (cold, no embedding)",
                         (found["seconds"],), None, detail),
             PhaseTiming("  index: peak memory of the indexing process (MiB)", (round(found["peak_rss_mib"], 1),))],
            int(found["symbols"]))


# -- the suite ---------------------------------------------------------------------------------------------

def run(config: Config, *, turns: int = LARGE_TURNS, symbols: int = LARGE_SYMBOLS, repeat: int = PLAN_REPEAT,
        embedder: Any = None, config_path: Path | None = None,
        progress: Callable[[str], None] = lambda what: None) -> LargeReport:
    """The load suite: plans and replay on a generated session of ``turns`` turns, indexing a generated repository
    of about ``symbols`` symbols. ``embedder``: the model for the semantic and fused strategies (default: the
    configured one, loaded here)."""
    if embedder is None:
        from ctxbench.service.attach import load_embedder

        progress("loading the embedding model")
        embedder = load_embedder(config)
    with tempfile.TemporaryDirectory(prefix="ctxbench-large-") as tmp:
        workdir = Path(tmp)
        db = workdir / "large.db"
        progress(f"generating and importing a {turns:,}-turn session")
        session_id, messages, import_s = import_session(db, config, turns)
        phases: list[PhaseTiming] = [PhaseTiming(f"import of the {turns:,}-turn session ({messages:,} messages)",
                                                 (import_s,))]
        progress("replay: time to the first record")
        phases += replay_phase(db, session_id)
        phases += plan_phases(db, session_id, turns, config, embedder, repeat=repeat, progress=progress,
                              config_path=config_path)
        progress(f"generating and indexing a repository of about {symbols:,} symbols")
        index, indexed = index_phase(workdir, symbols, config_path)
        phases += index
    return LargeReport(turns, messages, indexed, tuple(phases))
