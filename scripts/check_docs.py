#!/usr/bin/env python3
"""The docs hold together: every heading README.md had before it became a
front door (its guides moved to docs/) is still a heading in README.md or a
guide, so nothing was lost; and every relative link in README.md and docs/
names a file that exists.

    scripts/check_docs.py            checks; exits 1 naming what is missing
    scripts/check_docs.py --self-test   shows that a lost heading and a broken link fail
    scripts/check_docs.py --flags TENSORD   docs/flags.md's table is exactly what
                                     `TENSORD --help=markdown` prints (the flags' help texts
                                     are its one source), and a planted stale row is refused
    scripts/check_docs.py --flags TENSORD --write   rewrites that table from TENSORD
    scripts/check_docs.py --cases    tests/conformance/cases is ../shared/conformance/cases
                                     byte for byte (a file there may also come from
                                     ../shared/conformance/new_operators); without ../shared
                                     it says it skipped the comparison and passes. Planted
                                     drift is refused first.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# README.md's headings before the move (commit 846d9d3), without their #s.
HEADINGS = [
    "Two commands (fresh Debian 12)",
    "Using it",
    "tensord flags",
    "Metrics",
    "Load tests",
    "Backends",
    "The API (proto/tensorop/v1/tensorop.proto)",
    "The Open Inference Protocol (KServe v2) over gRPC",
    "The Open Inference Protocol (KServe v2) over HTTP",
    "Memory and slow clients",
    "Handles: tensors that stay on the server",
    "Chains",
    "Co-located clients: Unix socket and shared memory",
    "Security",
    "Installed, packaged, versioned, monitored, traced",
    "Docker",
    "Kubernetes",
    "Scaling out",
    "Use it from your language",
    "Layout of the repository",
    "Dependencies",
]

LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def headings(text: str) -> set[str]:
    found, fenced = set(), False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"#+ (.*)", line)):
            found.add(match.group(1).strip())
    return found


def problems(root: Path) -> list[str]:
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    present: set[str] = set()
    found: list[str] = []
    for page in pages:
        text = page.read_text()
        present |= headings(text)
        for target in LINK.findall(text):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (page.parent / target).exists():
                found.append(f"{page.relative_to(root)}: link to {target}, which does not exist")
    found += [f"heading \"{h}\" is in no page" for h in HEADINGS if h not in present]
    return found


def self_test() -> int:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        (root / "docs").mkdir()
        (root / "README.md").write_text(
            "".join(f"## {h}\n" for h in HEADINGS if h != "Chains") + "[x](docs/gone.md)\n"
        )
        got = problems(root)
    want = ["README.md: link to docs/gone.md, which does not exist",
            "heading \"Chains\" is in no page"]
    if got != want:
        print(f"self-test: expected {want}, got {got}")
        return 1
    print("docs self-test: a lost heading and a broken link are refused")
    return 0


FLAGS_PAGE = ROOT / "docs" / "flags.md"
GENERATED = re.compile(r"(<!-- generated: tensord --help=markdown[^\n]*-->\n)(.*?)(<!-- end generated -->)",
                       re.S)


def stale_table(page: str, table: str) -> list[str]:
    """The differences between `page`'s generated table and `table`."""
    found = GENERATED.search(page)
    if found is None:
        return ["docs/flags.md: no generated table (its begin and end markers are gone)"]
    return [line.rstrip("\n") for line in difflib.unified_diff(
        found.group(2).splitlines(True), table.splitlines(True),
        "docs/flags.md", "tensord --help=markdown", n=0)]


def flag_table(tensord: str, write: bool) -> int:
    table = subprocess.run([tensord, "--help=markdown"], capture_output=True, text=True,
                           check=True).stdout
    page = FLAGS_PAGE.read_text()
    if write:
        FLAGS_PAGE.write_text(GENERATED.sub(lambda m: m.group(1) + table + m.group(3), page))
        print("docs/flags.md: table rewritten from tensord --help=markdown")
        return 0
    # The check itself, shown to refuse a row that no longer says what the flag does.
    planted = page.replace("| `--address` |", "| `--address` | stale |", 1)
    if not stale_table(planted, table):
        print("self-test: a planted stale row was not refused")
        return 1
    print("a planted stale row is refused")
    stale = stale_table(page, table)
    for line in stale:
        print(line)
    if stale:
        print("docs/flags.md differs from tensord --help=markdown: run "
              "scripts/check_docs.py --flags build/bin/tensord --write")
        return 1
    print(f"docs/flags.md: the table is tensord --help=markdown ({table.count(chr(10)) - 2} rows)")
    return 0


COPY = Path("tests") / "conformance" / "cases"  # the repository's copy of the public cases


def first_difference(ours: bytes, theirs: bytes) -> int:
    """The 1-based line at which two files first differ."""
    a, b = ours.splitlines(), theirs.splitlines()
    for line, (x, y) in enumerate(zip(a, b), start=1):
        if x != y:
            return line
    return min(len(a), len(b)) + 1


def case_drift(root: Path, conformance: Path) -> tuple[str | None, list[str]]:
    """(why the comparison is skipped, or None; what differs) between root's
    tests/conformance/cases and `conformance` (../shared/conformance): every
    *.json of its cases/ copied as it is, and every other file of the copy the
    same-named file of its new_operators/. Each problem names the file and the
    command that fixes it."""
    copy, public, newer = root / COPY, conformance / "cases", conformance / "new_operators"
    show = lambda path: os.path.relpath(path, root)  # noqa: E731
    ours = {p.name: p for p in copy.glob("*.json")}
    if not ours:
        return None, [f"{COPY}: no *.json files (the public cases are missing)"]
    if not public.is_dir():
        return (f"{show(public)} is absent (no ../shared beside the repository, as in a "
                "fresh clone)"), []
    theirs = {p.name: p for p in public.glob("*.json")}
    found = []
    for name, source in sorted(theirs.items()):
        if name not in ours:
            found.append(f"{show(source)} has no copy in {COPY}: cp {show(source)} {COPY}/")
        elif ours[name].read_bytes() != source.read_bytes():
            line = first_difference(ours[name].read_bytes(), source.read_bytes())
            found.append(f"{COPY / name} differs from {show(source)} (first at line {line}): "
                         f"cp {show(source)} {COPY}/")
    for name in sorted(set(ours) - set(theirs)):
        source = newer / name
        if not source.exists():
            found.append(f"{COPY / name} is in neither {show(public)} nor {show(newer)}: "
                         f"git rm {COPY / name}")
        elif ours[name].read_bytes() != source.read_bytes():
            line = first_difference(ours[name].read_bytes(), source.read_bytes())
            found.append(f"{COPY / name} differs from {show(source)} (first at line {line}): "
                         f"cp {show(source)} {COPY}/")
    return None, found + derived_drift(root, newer)


DERIVED = Path("tests") / "conformance" / "dtypes.json"  # the dtypes' cases of today's operators
# Shared cases whose expectation contradicts the copy they describe: the shared
# generator maps the input's integers to bool by parity, the expected floats by
# nonzero. The copy keeps them with their outputs mapped as the inputs are.
CORRECTED = {"slice/doc_example_2_negative_strides/as_bool", "split/doc_example_1_axis_2/as_bool",
             "split/single_output_is_copy/as_bool", "split/doc_example_2_axis_3/as_bool"}


def derived_drift(root: Path, newer: Path) -> list[str]:
    """What differs between root's tests/conformance/dtypes.json and the cases of
    `newer`/dtypes.json whose operator has its public cases in the copy: each
    such case there as it is (compared as JSON), none of them missing."""
    source = newer / "dtypes.json"
    if not source.exists():
        return []
    ops = {p.stem for p in (root / COPY).glob("*.json")}
    theirs = {c["name"]: c for c in json.loads(source.read_text()) if c["op"] in ops}
    ours = {c["name"]: c for c in json.loads((root / DERIVED).read_text())} \
        if (root / DERIVED).exists() else {}
    found = [f"{DERIVED}: case {name} differs from {os.path.relpath(source, root)}'s"
             for name in sorted(set(theirs) & set(ours) - CORRECTED)
             if ours[name] != theirs[name]]
    found += [f"{DERIVED}: case {name} of {os.path.relpath(source, root)} is missing"
              for name in sorted(set(theirs) - set(ours))]
    return found


def planted_drift() -> list[str]:
    """What is wrong with the check itself, shown on planted copies: a changed,
    a missing and an unknown file refused, a new operator's file accepted, and
    a repository without ../shared skipped (this script run in it) and passing."""
    wrong = []
    with tempfile.TemporaryDirectory() as scratch:
        root, conformance = Path(scratch) / "repo", Path(scratch) / "shared" / "conformance"
        for folder in (root / COPY, conformance / "cases", conformance / "new_operators"):
            folder.mkdir(parents=True)
        for name in ("same.json", "changed.json", "missing.json"):
            (conformance / "cases" / name).write_text(f'[{{"name": "{name}"}},\n 1]\n')
        (conformance / "new_operators" / "newer.json").write_text("[]\n")
        (conformance / "new_operators" / "dtypes.json").write_text(json.dumps([
            {"name": "kept", "op": "same"}, {"name": "edited", "op": "same"},
            {"name": "dropped", "op": "changed"}, {"name": "later", "op": "unlanded"}]))
        (root / DERIVED).write_text(json.dumps([
            {"name": "kept", "op": "same"}, {"name": "edited", "op": "same", "attrs": {}},
            {"name": "own", "op": "same"}]))
        for name in ("same.json", "changed.json"):
            shutil.copy(conformance / "cases" / name, root / COPY / name)
        (root / COPY / "changed.json").write_text('[{"name": "changed.json"},\n 2]\n')
        shutil.copy(conformance / "new_operators" / "newer.json", root / COPY)
        (root / COPY / "unknown.json").write_text("[]\n")
        skipped, found = case_drift(root, conformance)
        want = [
            f"{COPY}/changed.json differs from ../shared/conformance/cases/changed.json "
            f"(first at line 2): cp ../shared/conformance/cases/changed.json {COPY}/",
            f"../shared/conformance/cases/missing.json has no copy in {COPY}: "
            f"cp ../shared/conformance/cases/missing.json {COPY}/",
            f"{COPY}/unknown.json is in neither ../shared/conformance/cases nor "
            f"../shared/conformance/new_operators: git rm {COPY}/unknown.json",
            f"{DERIVED}: case edited differs from ../shared/conformance/new_operators/dtypes.json's",
            f"{DERIVED}: case dropped of ../shared/conformance/new_operators/dtypes.json is missing"]
        if skipped is not None or found != want:
            wrong.append(f"planted drift: expected {want}, got {found} (skipped: {skipped})")
        # The same repository without ../shared: this script, run there, skips and passes.
        (root / "scripts").mkdir()
        shutil.copy(__file__, root / "scripts" / "check_docs.py")
        shutil.rmtree(Path(scratch) / "shared")
        done = subprocess.run([sys.executable, str(root / "scripts" / "check_docs.py"), "--cases",
                               "--no-planted"], capture_output=True, text=True, check=False)
        if done.returncode != 0 or "comparison with ../shared/conformance/cases skipped: " \
                "../shared/conformance/cases is absent" not in done.stdout:
            wrong.append(f"without ../shared: exit {done.returncode}, printed "
                         f"{done.stdout + done.stderr!r}")
    return wrong


def cases(planted: bool) -> int:
    if planted:
        wrong = planted_drift()
        for line in wrong:
            print(f"self-test: {line}")
        if wrong:
            return 1
        print("a planted drift is refused (a changed, a missing and an unknown file; a file of "
              "new_operators/ is accepted; a changed or missing dtypes case of a landed "
              "operator), and a clone without ../shared skips and passes")
    skipped, found = case_drift(ROOT, ROOT.parent / "shared" / "conformance")
    if skipped is not None:
        print(f"{COPY}: the comparison with ../shared/conformance/cases skipped: {skipped}")
        return 0
    for problem in found:
        print(f"cases: {problem}")
    if found:
        print(f"{COPY} differs from ../shared/conformance: copy the files as they are "
              "(tests/conformance/README.md)")
        return 1
    count = len(list((ROOT / COPY).glob("*.json")))
    print(f"{COPY} is ../shared/conformance/cases as it is ({count} files)")
    return 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if sys.argv[1:2] == ["--cases"] and sys.argv[2:] in ([], ["--no-planted"]):
        return cases(planted=sys.argv[2:] == [])
    if len(sys.argv) in (3, 4) and sys.argv[1] == "--flags":
        return flag_table(sys.argv[2], write=sys.argv[3:] == ["--write"])
    found = problems(ROOT)
    for problem in found:
        print(f"docs: {problem}")
    if found:
        return 1
    print(f"docs: {len(HEADINGS)} old README headings all present; every relative link resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
