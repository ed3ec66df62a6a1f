#!/usr/bin/env python3
"""The docs hold together: every heading README.md had before it became a
front door (its guides moved to docs/) is still a heading in README.md or a
guide, so nothing was lost; and every relative link in README.md and docs/
names a file that exists.

    scripts/check_docs.py            checks; exits 1 naming what is missing
    scripts/check_docs.py --self-test   shows that a lost heading and a broken link fail
    scripts/check_docs.py --flags TENSORD   docs/flags.md's table names exactly the flags
                                     `TENSORD --help` lists (no flag undocumented, none gone)
"""

from __future__ import annotations

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


def flag_drift(tensord: str) -> int:
    listed = re.findall(r"^  --([a-z0-9_]+)", subprocess.run(
        [tensord, "--help"], capture_output=True, text=True, check=True).stdout, re.M)
    table = (ROOT / "docs" / "flags.md").read_text()
    documented = [name for cell in re.findall(r"^\| ([^|]*)\|", table, re.M)
                  for name in re.findall(r"`--([a-z0-9_]+)`", cell)]
    missing = [name for name in listed if name not in documented]
    gone = [name for name in documented if name not in listed]
    for name in missing:
        print(f"docs/flags.md: --{name} (tensord --help) has no row")
    for name in gone:
        print(f"docs/flags.md: --{name} has a row but tensord has no such flag")
    if missing or gone:
        return 1
    print(f"docs/flags.md: a row for each of the {len(listed)} flags tensord --help lists")
    return 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) == 3 and sys.argv[1] == "--flags":
        return flag_drift(sys.argv[2])
    found = problems(ROOT)
    for problem in found:
        print(f"docs: {problem}")
    if found:
        return 1
    print(f"docs: {len(HEADINGS)} old README headings all present; every relative link resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
