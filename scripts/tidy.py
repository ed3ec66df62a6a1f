#!/usr/bin/env python3
"""clang-tidy over the C++ of core/, kernels/ and server/ (.clang-tidy says which checks).

    scripts/tidy.py [--build DIR] [--base REV | --all] [FILE ...]

The release build's compile_commands.json lists unity batches, not sources:
each source is checked with the command of the batch that includes it, so no
second configure or build is needed (run it after scripts/build.sh release).

Which files: the FILEs given; else every one with --all; else those changed
since the base commit (--base, default: the `# tidy-base:` line of .clang-tidy)
plus the uncommitted ones. The whole tree passed at that base, so checking
what changed since keeps the test command's cost to the change.

A function over the size check's limits fails unless .clang-tidy names it on
a `# size-exception: PATH:FUNCTION: REASON` line. A named exception that no longer
fires fails too, so the list only shrinks. Exit status 1 on any finding.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHECKED_DIRS = ("core/", "kernels/", "server/")
CONFIG = ROOT / ".clang-tidy"
DIAGNOSTIC = re.compile(r"^(?P<file>/[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<kind>warning|error): "
                        r"(?P<message>.*) \[(?P<check>[^\]]+)\]$")
SIZE_FUNCTION = re.compile(r"^function '(?P<name>[^']+)' exceeds recommended size/complexity")


def config_lines(prefix):
    """The values of the .clang-tidy comment lines `# PREFIX: ...`."""
    marker = f"# {prefix}:"
    return [line[len(marker):].strip() for line in CONFIG.read_text().splitlines()
            if line.startswith(marker)]


def size_exceptions():
    """{"path:function": reason} from the `# size-exception:` lines."""
    exceptions = {}
    for value in config_lines("size-exception"):
        name, _, reason = value.partition(": ")
        if not reason:
            sys.exit(f"tidy: .clang-tidy: size-exception {name!r} gives no reason")
        exceptions[name] = reason
    return exceptions


def source_commands(build):
    """{source path: compile command}, each source under its unity batch's command."""
    database = json.loads((build / "compile_commands.json").read_text())
    commands = {}
    for entry in database:
        batch = Path(entry["file"])
        sources = [batch]
        if "/Unity/" in entry["file"]:
            sources = [Path(m) for m in re.findall(r'^#include "([^"]+)"', batch.read_text(), re.M)]
        for source in sources:
            commands[str(source.resolve())] = {
                "directory": entry["directory"],
                "file": str(source.resolve()),
                "command": entry["command"].replace(entry["file"], str(source.resolve())),
            }
    return commands


def changed_since(base):
    """The files changed since `base` and those not committed; None when the
    clone does not hold `base` (a shallow one)."""
    known = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{base}^{{commit}}"],
                           capture_output=True)
    if known.returncode != 0:
        return None

    def git(*args):
        return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True,
                              text=True).stdout.split()
    names = set(git("diff", "--name-only", base, "--")) | set(git("diff", "--name-only", "HEAD"))
    names |= set(git("ls-files", "--others", "--exclude-standard"))
    return sorted(names)


def run_tidy(tidy, database_dir, source):
    result = subprocess.run(
        [tidy, "-p", database_dir, "--quiet", "--extra-arg=-Wno-unknown-warning-option", source],
        capture_output=True, text=True)
    return result.stdout + result.stderr


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=str(ROOT / "build"))
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--base", help="check the files changed since this commit")
    which.add_argument("--all", action="store_true", help="check every file")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()

    tidy = shutil.which("clang-tidy-14") or shutil.which("clang-tidy")
    if tidy is None:
        sys.exit("tidy: clang-tidy is not installed (scripts/setup.sh installs clang-tidy-14)")
    build = Path(args.build)
    if not (build / "compile_commands.json").exists():
        sys.exit(f"tidy: no {build}/compile_commands.json: run scripts/build.sh release first")
    commands = source_commands(build)
    exceptions = size_exceptions()

    if args.files:
        names = args.files
    elif args.all:
        names = [str(Path(p).relative_to(ROOT)) for p in commands]
    else:
        base = args.base or (config_lines("tidy-base") or ["HEAD"])[0]
        names = changed_since(base)
        if names is None:
            print(f"tidy: this clone lacks the base {base}: checking every file")
            names = [str(Path(p).relative_to(ROOT)) for p in commands]
    # A header is checked through the source of its stem (the diagnostics of
    # other includers' uses come when they change).
    names = [n[:-2] + ".cc" if n.endswith(".h") else n for n in names]
    sources = sorted({str((ROOT / n).resolve()) for n in names
                      if n.startswith(CHECKED_DIRS) and n.endswith(".cc")})
    unknown = [s for s in sources if s not in commands and Path(s).exists()]
    if unknown:
        sys.exit("tidy: not in the release build's compile commands: " + ", ".join(unknown))
    sources = [s for s in sources if s in commands]
    print(f"tidy: {len(sources)} files")

    findings = []
    fired = set()
    with tempfile.TemporaryDirectory() as database_dir:
        Path(database_dir, "compile_commands.json").write_text(
            json.dumps([commands[s] for s in sources]))
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for output in pool.map(lambda s: run_tidy(tidy, database_dir, s), sources):
                for line in output.splitlines():
                    match = DIAGNOSTIC.match(line)
                    if not match or not match["file"].startswith(str(ROOT) + "/"):
                        continue
                    path = Path(match["file"]).relative_to(ROOT)
                    size = SIZE_FUNCTION.match(match["message"])
                    if size and f'{path}:{size["name"]}' in exceptions:
                        fired.add(f'{path}:{size["name"]}')
                        continue
                    where = f'{path}:{match["line"]}'
                    findings.append(f'{where}: {match["message"]} [{match["check"]}]')
    for finding in sorted(set(findings)):
        print(finding)
    # With every file checked, an exception that did not fire is stale.
    stale = sorted(set(exceptions) - fired) if args.all else []
    for name in stale:
        print(f".clang-tidy: size-exception {name} is within the limits now: remove it")
    if findings or stale:
        print(f"tidy: {len(set(findings))} findings, {len(stale)} stale exceptions")
        return 1
    print("tidy: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
