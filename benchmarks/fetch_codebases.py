#!/usr/bin/env python3
"""Fetch the pinned codebases the code-retrieval query sets are written against.

Every codebase comes from its package registry at an exact version, with the registry's ordinary
client (``pip download`` for PyPI wheels, ``npm pack`` for the npm registry), and is unpacked under
``benchmarks/.codebases/<name>/`` (ignored by git). The sha256 of each downloaded archive is checked
against the value below, so a re-published file cannot change a benchmark silently. The query files
name these folders (``benchmarks/codebases.toml``); tests never need them nor the network.

    python benchmarks/fetch_codebases.py            # fetch what is missing
    python benchmarks/fetch_codebases.py --force    # fetch again
    python benchmarks/fetch_codebases.py --dest DIR # somewhere else

textual is not fetched here: its set reads the textual the project installs (``textual==8.2.8``).
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_DEST = HERE / ".codebases"


@dataclass(frozen=True)
class Codebase:
    name: str  # folder under the destination, and the name the manifest uses
    registry: str  # pypi | npm
    package: str
    version: str
    sha256: str  # of the downloaded wheel / tarball
    subdir: str  # what of the archive is kept as the codebase (the package folder)


CODEBASES = (
    Codebase("click", "pypi", "click", "8.1.8",
             "63c132bbbed01578a06712a2d1f497bb62d9c1c0d329b7903a866228027263b2", "click"),
    Codebase("trio", "pypi", "trio", "0.27.0",
             "68eabbcf8f457d925df62da780eff15ff5dc68fd6b367e2dde59f7aaf2a0b884", "trio"),
    Codebase("flask", "pypi", "flask", "3.1.0",
             "d667207822eb83f1c4b50949b1623c8fc8d51f2341d65f72e1a1815397551136", "flask"),
    Codebase("marshmallow", "pypi", "marshmallow", "3.23.2",
             "bcaf2d6fd74fb1459f8450e85d994997ad3e70036452cbfa4ab685acb19479b3", "marshmallow"),
    Codebase("commander", "npm", "commander", "12.1.0",
             "56affc6ddafe486f94b428ae2823d059cf60d4dae2f33eaaf1b1ec4306f73173", "package"),
    # the second held-out pair (issue 10, second round): written before any further tuning
    Codebase("httpx", "pypi", "httpx", "0.28.1",
             "d909fcccc110f8c7faf814ca82a9a4d816bc5a6dbfea25d6591d6985b8ba59ad", "httpx"),
    Codebase("js-yaml", "npm", "js-yaml", "4.1.0",
             "0dae332559cf22b21c26ea70e732afd8303ff99412f9c3d9d209faa8882cf2ca", "package"),
    # the third held-out pair (issue 10, third round): written before any further tuning
    Codebase("dateutil", "pypi", "python-dateutil", "2.9.0.post0",
             "a8b2bc7bffae282281c8140a97d3aa9c14da0b136dfe83f850eea9a5f7470427", "dateutil"),
    Codebase("query-core", "npm", "@tanstack/query-core", "5.59.0",
             "2586579316ffc0957be3c4c33e2f9dfa7732b55c15013b7139244d2ab60d27fc", "package"),
    # the fourth held-out pair (issue 10, fourth round): written before any further tuning
    Codebase("sortedcontainers", "pypi", "sortedcontainers", "2.4.0",
             "a163dcaede0f1c021485e957a39245190e74249897e2ae4b2aa38595db237ee0", "sortedcontainers"),
    Codebase("semver", "npm", "semver", "7.6.3",
             "376d2ca2c941fc5a37e9ac3ec65302e5e421e2cc1ee3dee57a854d2bd9bee125", "package"),
    # the fifth held-out pair (issue 10, fifth round): written before any further tuning
    Codebase("mistune", "pypi", "mistune", "3.0.2",
             "71481854c30fdbc938963d3605b72501f5c10a9320ecd412c121c163a1c7d205", "mistune"),
    Codebase("immer", "npm", "immer", "10.1.1",
             "946cc79684ad1e080b09d4f2da14247b272aa667f3aaa100f35846148689f08f", "package"),
    # the sixth held-out pair (issue 28): written before any encoder work, kept out of its training data
    Codebase("transitions", "pypi", "transitions", "0.9.2",
             "f7b40c9b4a93869f36c4d1c33809aeb18cdeeb065fd1adba018ee39c3db216f3", "transitions"),
    Codebase("mobx", "npm", "mobx", "6.13.5",
             "b85a7f765065c081724a7c49e91f59950151607b2f1c5a77c8ec4231f7129a1b", "package"),
)


def sha256_of(path: Path) -> str:
    """The archive's sha256 (ctxbench's own file hash, the one packaged encoders are checked with)."""
    from ctxbench.retrieval.packaged_models import file_sha256

    return file_sha256(path)


def download(cb: Codebase, into: Path) -> Path:
    """The registry's archive of ``cb``, downloaded into ``into`` with the registry's own client."""
    if cb.registry == "pypi":
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
                        "--dest", str(into), f"{cb.package}=={cb.version}"], check=True)
        found = sorted(into.glob("*.whl"))
    elif cb.registry == "npm":
        subprocess.run(["npm", "pack", "--silent", f"{cb.package}@{cb.version}"], check=True, cwd=into,
                       stdout=subprocess.DEVNULL)
        found = sorted(into.glob("*.tgz"))
    else:
        raise SystemExit(f"{cb.name}: unknown registry {cb.registry}")
    if len(found) != 1:
        raise SystemExit(f"{cb.name}: expected one archive, got {[p.name for p in found]}")
    return found[0]


def unpack(archive: Path, subdir: str, dest: Path) -> None:
    """Extract the ``subdir`` folder of ``archive`` to ``dest`` (nothing outside it, no links)."""
    staging = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}-"))
    try:
        if archive.suffix == ".whl":
            with zipfile.ZipFile(archive) as zf:
                for member in zf.namelist():
                    if member.startswith(subdir + "/") and not member.endswith("/"):
                        target = staging / member
                        if not target.resolve().is_relative_to(staging.resolve()):
                            raise SystemExit(f"{archive.name}: unsafe path {member}")
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.write_bytes(zf.read(member))
        else:
            with tarfile.open(archive) as tf:
                members = [m for m in tf.getmembers() if m.name.startswith(subdir + "/") and m.isfile()]
                tf.extractall(staging, members=members, filter="data")
        if dest.exists():
            shutil.rmtree(dest)
        (staging / subdir).rename(dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def fetch(cb: Codebase, dest_root: Path, force: bool = False) -> Path:
    dest = dest_root / cb.name
    stamp = dest / ".fetched"
    wanted = f"{cb.registry} {cb.package} {cb.version} {cb.sha256}\n"
    if not force and stamp.is_file() and stamp.read_text() == wanted:
        return dest
    with tempfile.TemporaryDirectory() as tmp:
        archive = download(cb, Path(tmp))
        actual = sha256_of(archive)
        if actual != cb.sha256:
            raise SystemExit(f"{cb.name}: {archive.name} has sha256 {actual}, expected {cb.sha256}")
        unpack(archive, cb.subdir, dest)
    stamp.write_text(wanted)
    return dest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dest", type=Path, default=DEFAULT_DEST, help=f"where to unpack (default {DEFAULT_DEST})")
    parser.add_argument("--force", action="store_true", help="download again even when present")
    parser.add_argument("names", nargs="*", help="only these codebases (default: all)")
    args = parser.parse_args(argv)
    known = {cb.name: cb for cb in CODEBASES}
    unknown = [n for n in args.names if n not in known]
    if unknown:
        parser.error(f"unknown codebase(s) {', '.join(unknown)}; known: {', '.join(known)}")
    args.dest.mkdir(parents=True, exist_ok=True)
    for cb in (known[n] for n in args.names) if args.names else CODEBASES:
        path = fetch(cb, args.dest, args.force)
        print(f"{cb.name:<12} {cb.registry}:{cb.package}=={cb.version}  {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
