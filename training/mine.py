"""Mine (description -> code) pairs from public packages for the code-aware encoder.

Every package of ``packages.toml`` is fetched from its registry at its pinned version with the registry's own
client (``pip download`` for PyPI wheels, ``npm pack`` for npm tarballs), its archive checked against the sha256
recorded there, its license read from the archive's own metadata and refused unless it is permissive, and
indexed by ctxbench's own indexer, so the code side of a pair is the card text the product embeds
(``retrieval.vectors.embed_text``). Pairs:

- ``doc``: the doc comment's first sentences -> the card **without** its doc (the product's text for an
  undocumented symbol: id words, kind, signature), so the model learns to find code that has no docs;
- ``card``: the same description -> the card as the product builds it, doc included (part of the pairs, so the
  model keeps matching documented cards as it sees them at run time);
- ``template``: a question written from the doc's verb and object the way people ask ("how do I ...", "where is
  the code that ...", a symptom) -> the card without its doc;
- ``test``: the words of a test's name -> the one package function it calls whose name shares most of them.

Each pair carries one hard negative: the BM25 neighbour of the description among the same package's cards that
is not the target (nor a card of the same text). No benchmark codebase is mined: ``excluded_names`` reads every
codebase of ``benchmarks/codebases.toml`` and ``benchmarks/fetch_codebases.py`` (all roles) and adds the ones
kept for independent checks; a manifest naming any of them is refused.

    python -m training.mine --pin          # fetch what has no sha256 yet and record sha256 + license
    python -m training.mine                # fetch (checked), index and write training/data/pairs.jsonl
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import re
import shutil
import sqlite3
import tarfile
import tempfile
import tomllib
import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from benchmarks.fetch_codebases import download, sha256_of

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MANIFEST = HERE / "packages.toml"
PACKAGES_DIR = HERE / ".packages"
DATA_DIR = HERE / "data"
# kept for independent checks of the encoder besides the benchmark's codebases (issue 28)
ALSO_EXCLUDED = ("textual", "rich", "networkx", "attrs", "attr")
# licenses whose code may be used to train weights the project ships: named by one of these words in the archive's
# own metadata (SPDX id, License field or classifier), and none of the copyleft ones
PERMISSIVE = re.compile(r"\b(MIT|BSD|Apache|ISC|Unlicense|0BSD|PSF|Python Software Foundation)\b")
COPYLEFT = re.compile(r"GPL|MPL|EPL|EUPL|CDDL|CC-BY-SA|Mozilla|General Public", re.I)
KINDS = ("function", "method", "class")
MIN_DESCRIPTION_WORDS = 4
MAX_DESCRIPTION_CHARS = 240


@dataclass(frozen=True)
class Package:
    name: str  # folder under training/.packages and the name in the pairs
    registry: str  # pypi | npm
    package: str  # the registry's name
    version: str
    sha256: str = ""  # of the downloaded wheel / tarball ("" until --pin)
    license: str = ""  # as the archive's metadata states it (recorded by --pin, checked on every fetch)


@dataclass(frozen=True)
class Pair:
    package: str
    symbol: str
    source: str  # doc | card | template | test
    query: str
    positive: str
    negative: str

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


# -- the manifest and what it may not name --------------------------------------------------------------------------
def normalize(name: str) -> str:
    """``@tanstack/query-core`` -> ``query-core``; ``python-dateutil`` and ``dateutil`` both -> ``dateutil``."""
    name = name.strip().lower().rsplit("/", 1)[-1].replace("_", "-")
    return name.removeprefix("python-")


def excluded_names(root: Path = ROOT) -> frozenset[str]:
    """Every benchmark codebase (each role of the manifest, by name and by registry package) and the ones kept for
    independent checks, normalized."""
    names = set(ALSO_EXCLUDED)
    manifest = root / "benchmarks" / "codebases.toml"
    for cb in tomllib.loads(manifest.read_text(encoding="utf-8")).get("codebase", []):
        names.add(cb["name"])
        source = cb.get("source", "").split("(")[0].split()
        if len(source) >= 2:
            names.add(re.split(r"==|@(?=\d)", source[1])[0])
    fetch = (root / "benchmarks" / "fetch_codebases.py").read_text(encoding="utf-8")
    for m in re.finditer(r'Codebase\("([^"]+)",\s*"(?:pypi|npm)",\s*"([^"]+)"', fetch):
        names.update(m.groups())
    return frozenset(normalize(n) for n in names)


def load_manifest(path: Path = MANIFEST, root: Path = ROOT) -> list[Package]:
    """The packages of ``path``; a clear ``SystemExit`` when one is a benchmark codebase or named twice."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    packages = [Package(**entry) for entry in data.get("package", [])]
    banned = excluded_names(root)
    for p in packages:
        if p.registry not in ("pypi", "npm"):
            raise SystemExit(f"{path}: {p.name}: registry must be pypi or npm, not {p.registry!r}")
        hit = {normalize(p.name), normalize(p.package)} & banned
        if hit:
            raise SystemExit(f"{path}: {p.name} is a benchmark codebase or kept for independent checks "
                             f"({', '.join(sorted(hit))}): it may not be mined")
    seen = Counter(p.name for p in packages)
    twice = [n for n, c in seen.items() if c > 1]
    if twice:
        raise SystemExit(f"{path}: named twice: {', '.join(twice)}")
    return packages


def write_manifest(packages: Sequence[Package], path: Path = MANIFEST) -> None:
    head = path.read_text(encoding="utf-8").split("[[package]]", 1)[0] if path.exists() else ""
    out = [head.rstrip() + "\n"] if head.strip() else []
    for p in packages:
        out.append("\n[[package]]\n" + "".join(f'{f.name} = "{getattr(p, f.name)}"\n'
                                               for f in dataclasses.fields(p)))
    path.write_text("".join(out), encoding="utf-8")


def is_permissive(license_text: str) -> bool:
    """True when the license the metadata states is a permissive one (MIT, BSD, Apache, ISC, ...), no copyleft."""
    text = license_text.strip()
    return bool(text) and bool(PERMISSIVE.search(text)) and not COPYLEFT.search(text)


# -- fetching: the benchmark fetcher's own download and checksum (pip download / npm pack, pinned) ------------------
def archive_license(archive: Path) -> str:
    """The license the archive's own metadata states: a wheel's METADATA (License-Expression, License, or the
    License classifiers), an npm tarball's package.json ``license``."""
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as zf:
            meta = next((n for n in zf.namelist() if n.endswith(".dist-info/METADATA")), None)
            text = zf.read(meta).decode("utf-8", "replace") if meta else ""
        header = text.split("\n\n", 1)[0]
        for key in ("License-Expression", "License"):
            m = re.search(rf"^{key}: (.+)$", header, re.M)
            if m and len(m.group(1)) < 60 and m.group(1).strip() not in ("UNKNOWN", ""):
                return m.group(1).strip()
        classifiers = re.findall(r"^Classifier: License :: OSI Approved :: (.+)$", header, re.M)
        return "; ".join(classifiers)
    with tarfile.open(archive) as tf:
        member = tf.extractfile("package/package.json")
        data = json.loads(member.read()) if member else {}
    lic = data.get("license", "")
    return lic if isinstance(lic, str) else lic.get("type", "")


def unpack(archive: Path, dest: Path) -> None:
    """The archive's source files under ``dest`` (a wheel's packages without its metadata folders, an npm tarball's
    ``package/``), no links, nothing outside ``dest``."""
    staging = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}-"))
    try:
        if archive.suffix == ".whl":
            with zipfile.ZipFile(archive) as zf:
                for member in zf.namelist():
                    top = member.split("/", 1)[0]
                    if member.endswith("/") or top.endswith((".dist-info", ".data")):
                        continue
                    target = staging / "package" / member
                    if not target.resolve().is_relative_to(staging.resolve()):
                        raise SystemExit(f"{archive.name}: unsafe path {member}")
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(zf.read(member))
        else:
            with tarfile.open(archive) as tf:
                members = [m for m in tf.getmembers() if m.name.startswith("package/") and m.isfile()]
                tf.extractall(staging, members=members, filter="data")
        if dest.exists():
            shutil.rmtree(dest)
        (staging / "package").rename(dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def fetch(p: Package, root: Path = PACKAGES_DIR, pin: bool = False) -> tuple[Path, Package]:
    """``p`` unpacked under ``root`` (fetched when missing or stale); with ``pin`` a package without sha256 gets the
    downloaded archive's sha256 and license recorded. A mismatch or a license that is not permissive stops."""
    dest = root / p.name
    stamp = dest / ".fetched"
    wanted = f"{p.registry} {p.package} {p.version} {p.sha256}\n"
    if p.sha256 and stamp.is_file() and stamp.read_text() == wanted:
        return dest, p
    if not p.sha256 and not pin:
        raise SystemExit(f"{p.name}: no sha256 in the manifest (run python -m training.mine --pin)")
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        archive = download(p, Path(tmp))
        actual = sha256_of(archive)
        if p.sha256 and actual != p.sha256:
            raise SystemExit(f"{p.name}: {archive.name} has sha256 {actual}, expected {p.sha256}")
        lic = archive_license(archive)
        if not is_permissive(lic):
            raise SystemExit(f"{p.name}: license {lic!r} is not one of the permissive licenses this data may use")
        if p.license and lic != p.license:
            raise SystemExit(f"{p.name}: the archive states license {lic!r}, the manifest {p.license!r}")
        p = dataclasses.replace(p, sha256=actual, license=lic)
        unpack(archive, dest)
    stamp.write_text(f"{p.registry} {p.package} {p.version} {p.sha256}\n")
    return dest, p


# -- descriptions and questions -------------------------------------------------------------------------------------
_MARKUP = [
    (re.compile(r"\[([^\]]+)\]\([^)]*\)"), r"\1"),  # [text](url) -> text
    (re.compile(r":[a-z]+:`~?([^`]+)`"), r"\1"),  # :class:`Foo` -> Foo
    (re.compile(r"\{@link(?:code|plain)?\s+([^}|\s]+)[^}]*\}"), r"\1"),  # {@link Foo} -> Foo
    (re.compile(r"`+([^`]*)`+"), r"\1"),
    (re.compile(r"\*\*?([^*]+)\*\*?"), r"\1"),
    (re.compile(r"<[^>]+>"), " "),
    (re.compile(r"\s+"), " "),
]
_SENTENCE_END = re.compile(r"(?<=[a-z0-9)\]'\"])[.!?](?=\s|$)")
_SKIP_DOC = re.compile(r"^(todo|fixme|xxx|deprecated|internal|private|see |@|copyright|license|\W)", re.I)
IMPERATIVE = frozenset(
    "return get set create make build add remove check parse convert compute find load read write run call handle "
    "update apply format render register validate resolve open close send wrap ensure determine generate initialize "
    "initialise yield raise emit transform split join merge copy clear reset start stop decode encode normalize "
    "normalise serialize deserialize compare iterate filter map sort invoke execute process extract match replace "
    "escape insert append delete fetch save store look lookup test wait schedule cancel retry connect configure "
    "install define attach detach bind unbind notify listen subscribe unsubscribe dispatch collect count group "
    "flatten chunk pick omit clone freeze compose pipe throttle debounce memoize cache strip trim pad truncate "
    "quote unquote tokenize scan compile evaluate print log warn assert verify sign hash encrypt decrypt "
    "serialise download upload mark select sum multiply divide subtract round limit skip take drop accept reject "
    "construct instantiate produce report track observe watch emit provide inject lock unlock acquire release "
    "push pop shift unshift enqueue dequeue peek swap reverse shuffle sample".split())


def clean_doc(doc: str) -> str:
    text = doc
    for pattern, repl in _MARKUP:
        text = pattern.sub(repl, text)
    return text.strip()


def description(doc: str) -> str:
    """The doc's first sentence (and the second when the first is short), without markup; "" when unusable."""
    text = clean_doc(doc)
    if not text or _SKIP_DOC.match(text):
        return ""
    ends = [m.end() for m in _SENTENCE_END.finditer(text)]
    first = text[: ends[0]] if ends else text
    if len(first.split()) < 8 and len(ends) > 1:
        first = text[: ends[1]]
    first = first.strip()
    if len(first) > MAX_DESCRIPTION_CHARS:
        first = first[:MAX_DESCRIPTION_CHARS].rsplit(" ", 1)[0]
    return first if len(first.split()) >= MIN_DESCRIPTION_WORDS else ""


def _verb(word: str) -> str:
    """The base form of a doc's first word when it is a verb ("Returns" -> "return"), else ""."""
    w = word.lower().strip(",:;")
    for base in (w, w[:-1] if w.endswith("s") and not w.endswith("ss") else "",
                 w[:-2] if w.endswith("es") else ""):
        if base in IMPERATIVE:
            return base
    return ""


def question(desc: str, rng: random.Random) -> str:
    """A question written from ``desc`` the way people ask: a task, a "where is", or a symptom."""
    text = desc.rstrip(".!? ")
    text = re.sub(r"^(this|the) (function|method|class|helper|decorator|property|hook|utility)\s+(is used to\s+)?",
                  "", text, flags=re.I)
    words = text.split()
    if not words:
        return desc
    verb = _verb(words[0])
    rest = " ".join(words[1:])
    rest_l = rest[:1].lower() + rest[1:]
    if verb and rest:
        third = words[0].lower() if words[0].lower().endswith("s") else verb + "s"
        templates = [
            f"how do I {verb} {rest_l}?",
            f"where is the code that {third} {rest_l}?",
            f"how can I {verb} {rest_l}",
            f"I need to {verb} {rest_l}. Which function does that?",
            f"{verb} {rest_l} does not work as expected, where is this done?",
            f"where do we {verb} {rest_l}?",
        ]
    else:
        low = text[:1].lower() + text[1:]
        templates = [f"where is {low}?", f"what implements {low}?", f"I am looking for {low}",
                     f"which code is {low}?"]
    return rng.choice(templates)


def test_query(name: str) -> str:
    """``test_parse_header_with_spaces`` -> ``parse header with spaces``."""
    from ctxbench.retrieval.vectors import split_identifier

    words = [w for w in split_identifier(name) if w != "test"]
    return " ".join(words)


# -- BM25 over a package's cards ------------------------------------------------------------------------------------
class BM25:
    """Okapi BM25 over token lists; ``top`` returns document indices, best first."""

    def __init__(self, docs: Sequence[Sequence[str]], k1: float = 1.2, b: float = 0.75):
        self.k1, self.b = k1, b
        self.tf = [Counter(d) for d in docs]
        self.len = [len(d) or 1 for d in docs]
        self.avg = sum(self.len) / max(1, len(self.len))
        df: Counter = Counter()
        for counts in self.tf:
            df.update(counts.keys())
        n = len(docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self.postings: dict[str, list[int]] = {}
        for i, counts in enumerate(self.tf):
            for t in counts:
                self.postings.setdefault(t, []).append(i)

    def top(self, query: Iterable[str], k: int = 10) -> list[int]:
        scores: dict[int, float] = {}
        for t in set(query):
            idf = self.idf.get(t)
            if idf is None:
                continue
            for i in self.postings[t]:
                f = self.tf[i][t]
                scores[i] = scores.get(i, 0.0) + idf * f * (self.k1 + 1) / (
                    f + self.k1 * (1 - self.b + self.b * self.len[i] / self.avg))
        return sorted(scores, key=lambda i: (-scores[i], i))[:k]


# -- pairs of one package -------------------------------------------------------------------------------------------
def package_pairs(name: str, folder: Path, *, seed: int, card_share: float, template_share: float,
                  max_pairs: int) -> tuple[list[Pair], int]:
    """The pairs of the package unpacked in ``folder`` and how many cards it has."""
    from ctxbench.codegraph.index import build_index, load_index
    from ctxbench.retrieval.vectors import embed_text, split_identifier
    from ctxbench.store.schema import open_core

    rng = random.Random(f"{seed}:{name}")
    with tempfile.TemporaryDirectory() as tmp:
        conn: sqlite3.Connection = open_core(Path(tmp) / "mine.db")
        try:
            build_index(folder, conn)
            index = load_index(folder, conn)
        finally:
            conn.close()
    cards = [c for c in index.cards.values() if c.kind in KINDS]
    bare = {c.symbol_id: embed_text(dataclasses.replace(c, doc="")) for c in cards}
    full = {c.symbol_id: embed_text(c) for c in cards}
    ids = [c.symbol_id for c in cards]
    bm25 = BM25([split_identifier(full[i]) for i in ids])

    def same_name(a: str, b: str) -> bool:  # one function bundled twice (lodash.js and its own module file)
        return index.symbols[a].name.lower() == index.symbols[b].name.lower()

    def negative(query: str, target: str) -> str:
        for j in bm25.top(split_identifier(query), 12):
            other = ids[j]
            if (other != target and bare[other] != bare[target] and not _is_test(other)
                    and not same_name(other, target)):
                return bare[other] if rng.random() >= card_share else full[other]
        other = rng.choice(ids)
        return bare[other] if not same_name(other, target) else ""

    pairs: list[Pair] = []
    for card in sorted(cards, key=lambda c: c.symbol_id):
        if _is_test(card.symbol_id):
            continue
        desc = description(card.doc)
        if not desc:
            continue
        sid = card.symbol_id
        if rng.random() < card_share:
            pairs.append(Pair(name, sid, "card", desc, full[sid], negative(desc, sid)))
        else:
            pairs.append(Pair(name, sid, "doc", desc, bare[sid], negative(desc, sid)))
        if rng.random() < template_share:
            q = question(desc, rng)
            pairs.append(Pair(name, sid, "template", q, bare[sid], negative(q, sid)))
    pairs += _test_pairs(name, index, bare, negative)
    rng.shuffle(pairs)
    return pairs[:max_pairs], len(cards)


def _is_test(symbol_id: str) -> bool:
    parts = re.split(r"[./]", symbol_id.lower())
    return any(p in ("test", "tests", "__tests__", "testing", "spec", "specs") or p.startswith("test_")
               or p.endswith((".test", "_test", ".spec")) for p in parts)


def _test_pairs(name: str, index, bare: dict[str, str], negative) -> list[Pair]:
    """A test's name -> the package function it calls that shares most words with it (at least one)."""
    from ctxbench.retrieval.vectors import split_identifier

    out = []
    for sid, sym in index.symbols.items():
        if sym.kind not in ("function", "method") or not sym.name.lower().startswith("test"):
            continue
        words = set(split_identifier(sym.name)) - {"test"}
        if len(words) < 2:
            continue
        callees = [d for _, d, k in index.graph.out_edges(sid, data="kind") if k == "calls" and d in bare
                   and not _is_test(d)]
        scored = sorted(((len(words & set(split_identifier(index.symbols[d].name))), d) for d in callees),
                        reverse=True)
        if scored and scored[0][0] > 0:
            target = scored[0][1]
            q = test_query(sym.name)
            out.append(Pair(name, target, "test", q, bare[target], negative(q, target)))
    return out


# -- the whole set --------------------------------------------------------------------------------------------------
def mine(packages: Sequence[Package], *, seed: int, max_pairs: int, per_package: int, card_share: float,
         template_share: float, out: Path, log=print) -> dict:
    """Fetch (checked), index and pair every package; write ``out`` (JSONL, shuffled by ``seed``) and
    ``out``'s ``.stats.json``; return the stats."""
    pairs: list[Pair] = []
    stats: dict = {"seed": seed, "packages": {}}
    seen: set[tuple[str, str]] = set()
    for p in packages:
        folder, _ = fetch(p)
        got, cards = package_pairs(p.name, folder, seed=seed, card_share=card_share,
                                   template_share=template_share, max_pairs=per_package)
        kept = 0
        for pair in got:
            key = (pair.package, pair.query.lower())  # one description once (a function bundled twice has it twice)
            if key in seen or not pair.negative:
                continue
            seen.add(key)
            pairs.append(pair)
            kept += 1
        stats["packages"][p.name] = {"version": p.version, "license": p.license, "cards": cards, "pairs": kept}
        log(f"{p.name:<20} {p.registry}:{p.package}=={p.version}  {cards} cards, {kept} pairs")
    rng = random.Random(seed)
    rng.shuffle(pairs)
    pairs = pairs[:max_pairs]
    stats["pairs"] = len(pairs)
    stats["by_source"] = dict(Counter(p.source for p in pairs))
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as fh:
        for pair in pairs:
            fh.write(json.dumps(pair.to_json(), ensure_ascii=False) + "\n")
    out.with_suffix(".stats.json").write_text(json.dumps(stats, indent=1), encoding="utf-8")
    return stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", type=Path, default=MANIFEST)
    parser.add_argument("--pin", action="store_true", help="fetch packages without sha256 and record it with "
                        "the license their metadata states")
    parser.add_argument("--out", type=Path, default=DATA_DIR / "pairs.jsonl")
    parser.add_argument("--seed", type=int, default=28)
    parser.add_argument("--max-pairs", type=int, default=20000)
    parser.add_argument("--per-package", type=int, default=1200, help="at most this many pairs of one package")
    parser.add_argument("--card-share", type=float, default=0.3,
                        help="share of doc pairs whose code side keeps the doc (the card as the product builds it)")
    parser.add_argument("--template-share", type=float, default=0.5,
                        help="share of documented symbols that also get a question written from their doc")
    args = parser.parse_args(argv)
    packages = load_manifest(args.manifest)
    if args.pin:
        pinned = list(packages)
        for i, p in enumerate(packages):
            _, q = fetch(p, pin=True)
            print(f"{q.name:<20} {q.sha256}  {q.license}")
            pinned[i] = q
            write_manifest(pinned, args.manifest)  # after each: a refusal keeps what was pinned before it
        return 0
    stats = mine(packages, seed=args.seed, max_pairs=args.max_pairs, per_package=args.per_package,
                 card_share=args.card_share, template_share=args.template_share, out=args.out)
    print(f"{stats['pairs']} pairs from {len(stats['packages'])} packages: {stats['by_source']} -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
