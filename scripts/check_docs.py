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
"""

from __future__ import annotations

import difflib
import re
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


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
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
