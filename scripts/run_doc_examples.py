#!/usr/bin/env python3
"""Runs every example in README.md and docs/*.md against a real tensord, as
written, and compares the outputs the docs show. (About 700 lines, past the
project's ~600: one runner, its block parser, server, fresh-clone mode and
self-test, which change together.)

    scripts/run_doc_examples.py [--tensord PATH] [FILE...]   runs them (default: every page)
    scripts/run_doc_examples.py --fresh-clone [--tensord PATH] [PAGE...]   the same in a
        `git clone` of HEAD in a scratch directory with nothing beside it (no ../shared),
        its build/bin holding only the built tensord and tensorctl (symlinks to
        --tensord's directory): the repository stands alone. PAGEs are relative to
        the repository (default: every page, README.md's tour first).
    scripts/run_doc_examples.py --self-test   shows that planted broken, hanging and
                                              unmarked examples are refused

Which fenced blocks are examples (the fence's info string, its first word):
  - `sh`, `bash`, `shell`: a shell example, run as a script by `bash -euo pipefail`;
  - `python`, `py`: a Python example, run as a script by `python` (a venv holding the
    pip-installed tensorop-client, numpy, grpcio and tritonclient);
  - `output`: what the example block before it (the nearest fenced block above, in
    the same page) prints on stdout; see "Outputs" below;
  - any other tag (`text`, `json`, `yaml`, `proto`, `rooms`, ...): not an example
    (a tree, a diagram, a file's contents), neither run nor counted;
  - no tag at all: refused, so that no example goes unrun by forgetting its tag.
An example that cannot run here is marked by an HTML comment on one of the lines
just above its fence (blank lines and other one-line comments may sit between):
    <!-- not runnable here: needs a Kubernetes cluster -->
The reason is required and printed; those blocks are counted, not run.

Where they run: one tensord (build/bin/tensord, or --tensord) started for the
run on the addresses the docs dial, so that they run as written:
localhost:50051 and unix:///run/tensord/tensord.sock (gRPC), localhost:8000
(HTTP/REST) and localhost:9464 (/metrics); a port that is taken stops the run
naming it. It stops at once at the end (--shutdown_grace_seconds=0: examples
leave handles behind, as the programs they stand for do). Each example gets a
fresh working directory that looks like the repository (every top-level entry a
symlink to the real one, client/python a copy so that `pip install client/python`
builds there) and nothing beside it: `build/bin/tensorctl`, `tests/conformance/cases`
and `scripts/...` resolve, a path outside the repository (`../shared/...`) does not,
and whatever it writes (slice.bin, pki/) is thrown away. Examples are self-contained:
none reads what another made. PATH puts first: the run's own Go bin directory (GOBIN, where a
`go install` lands), a scratch venv of the run (whose `pip install` never touches
build/python-venv; it sees build/python-venv's packages through a .pth file),
build/bin (tensord, tensorctl), build/go-bin (grpcurl), ghz's directory and Go's.

Time limits: a shell example is killed after --timeout seconds (60), a Python
example after --python-timeout (10), and a Python example must also have exited
within --python-exit-seconds (5): the docs' Python examples leave clients open,
and a program that does so must still exit. A killed example fails with "timed
out after N s", its whole process group killed (a server it started too).

Outputs: every non-blank line of an `output` block must occur in the example's
stdout, in the order given (other lines may come between), compared with all
whitespace removed, so that a one-line JSON answer in the docs matches grpcurl's
pretty-printed one, and a wrapped line its unwrapped original.

Prints one line per example (PASS / FAIL / NOT RUNNABLE, page:line of the fence),
then "N examples passed, M marked not runnable here" (", K failed" when any
failed, a refused block counting as failed); exits 1 on any failure.
Needs Python 3.11+ (stdlib only); the venv build/python-venv, grpcurl, ghz and
Go come from scripts/python-test.sh and bench/load/install-ghz.sh, which the test
command runs first.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SHELL_TAGS = {"sh", "bash", "shell"}
PYTHON_TAGS = {"python", "py"}
OUTPUT_TAG = "output"

# Where the docs dial tensord; the run's server listens exactly there.
GRPC_ADDRESS = "localhost:50051"
UNIX_SOCKET = Path("/run/tensord/tensord.sock")
HTTP_ADDRESS = "localhost:8000"
METRICS_ADDRESS = "localhost:9464"

FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")
NOT_RUNNABLE = re.compile(r"^\s*<!--\s*not runnable here\s*:?(?P<reason>.*?)-->\s*$")
ONE_LINE_COMMENT = re.compile(r"^\s*<!--.*-->\s*$")
# Lines of an example's output shown when it fails.
TAIL_LINES = 15


@dataclass
class Block:
    page: str  # relative to the root
    line: int  # of the opening fence, 1-based
    tag: str
    code: str
    not_runnable: str | None = None  # the reason, when marked
    expected: list[str] | None = None  # an output block's lines
    expected_line: int = 0

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


@dataclass
class Page:
    examples: list[Block] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # "page:line: what is wrong"


def parse_page(text: str, page: str) -> Page:
    """The page's example blocks (with their markers and expected outputs) and
    what is wrong with its blocks."""
    lines = text.splitlines()
    result = Page()
    last_block_was_example = False
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        tag = opening["info"].split()[0] if opening["info"].strip() else ""
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines):
            closing = re.match(r"^ *(`{3,}|~{3,})\s*$", lines[i])
            if closing and closing[1][0] == fence[0] and len(closing[1]) >= len(fence):
                break
            # CommonMark: a fence's indentation is removed from its content lines.
            body.append(re.sub(rf"^ {{0,{indent}}}", "", lines[i]))
            i += 1
        if i == len(lines):
            result.problems.append(f"{page}:{start + 1}: the fenced block is never closed")
        i += 1
        where = f"{page}:{start + 1}"
        code = "\n".join(body) + "\n"

        if tag == "":
            result.problems.append(
                f"{where}: a fenced block without an info string: tag it sh, bash or python "
                "to run it (or mark it not runnable), or with what it is (text, json, ...)")
            last_block_was_example = False
        elif tag == OUTPUT_TAG:
            if not last_block_was_example:
                result.problems.append(
                    f"{where}: an output block must follow the example whose output it is")
            else:
                example = result.examples[-1]
                example.expected = [l for l in body if l.strip()]
                example.expected_line = start + 1
            last_block_was_example = False
        elif tag in SHELL_TAGS or tag in PYTHON_TAGS:
            block = Block(page, start + 1, tag, code)
            reason = marker_above(lines, start)
            if reason is not None:
                if not reason:
                    result.problems.append(
                        f"{where}: 'not runnable here' needs a reason: "
                        "<!-- not runnable here: needs ... -->")
                block.not_runnable = reason
            result.examples.append(block)
            last_block_was_example = True
        else:
            last_block_was_example = False  # a diagram, a tree, a file: not an example
    return result


def marker_above(lines: list[str], fence: int) -> str | None:
    """The reason of a `not runnable here` comment among the blank and one-line
    comment lines right above line `fence` ("" when it gives none); None if
    there is no such comment."""
    j = fence - 1
    while j >= 0 and (not lines[j].strip() or ONE_LINE_COMMENT.match(lines[j])):
        if marked := NOT_RUNNABLE.match(lines[j]):
            return marked["reason"].strip()
        j -= 1
    return None


def pages_of(root: Path, names: list[str]) -> list[Path]:
    if names:
        return [Path(n).resolve() for n in names]
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def stripped(text: str) -> str:
    return re.sub(r"\s+", "", text)


def missing_output(expected: list[str], stdout: str) -> str | None:
    """The first expected line that is not in stdout (in order, whitespace
    ignored), or None when all are."""
    haystack, at = stripped(stdout), 0
    for line in expected:
        found = haystack.find(stripped(line), at)
        if found < 0:
            return line.strip()
        at = found + len(stripped(line))
    return None


def tail(path: Path, count: int = TAIL_LINES) -> str:
    text = path.read_text(errors="replace") if path.exists() else ""
    return "\n".join(f"    | {l}" for l in text.splitlines()[-count:]) or "    (nothing)"


def both_tails(stdout: Path, stderr: Path) -> str:
    return f"    stdout:\n{tail(stdout)}\n    stderr:\n{tail(stderr)}"


def live_members(pgid: int) -> bool:
    """Whether process group `pgid` has a member that is not a zombie (one
    whose new parent has not reaped it yet no longer runs)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def kill_group(pgid: int) -> None:
    """Stops what an example left running (a server it started in the
    background, a hung child): SIGTERM, then SIGKILL after a moment."""
    for sig, grace in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 2.0)):
        if not live_members(pgid):
            return
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and live_members(pgid):
            time.sleep(0.05)


@dataclass
class Settings:
    root: Path  # the repository the examples run in (a fresh clone with --fresh-clone)
    env: dict[str, str]
    python: str
    timeout: float
    python_timeout: float
    python_exit_seconds: float


def workspace(settings: Settings, scratch: Path) -> Path:
    """A directory that looks like the repository (see the module's docstring)."""
    repo = scratch / "repo"
    repo.mkdir(parents=True)
    for entry in settings.root.iterdir():
        # .git stays out: nothing an example runs should reach the real history.
        if entry.name in (".git", "client"):
            continue
        (repo / entry.name).symlink_to(entry)
    client = settings.root / "client"
    if client.is_dir():
        (repo / "client").mkdir()
        for entry in client.iterdir():
            if entry.name == "python":
                # A copy: pip builds in the source tree (build/, *.egg-info).
                shutil.copytree(entry, repo / "client" / "python", ignore=shutil.ignore_patterns(
                    ".*", "__pycache__", "build", "*.egg-info"))
            else:
                (repo / "client" / entry.name).symlink_to(entry)
    return repo


def run_example(block: Block, settings: Settings, scratch: Path) -> tuple[bool, str]:
    """Runs one example; (passed, what to print after its page:line)."""
    repo = workspace(settings, scratch)
    python = block.tag in PYTHON_TAGS
    script = scratch / ("example.py" if python else "example.sh")
    script.write_text(block.code)
    command = [settings.python, str(script)] if python else \
        ["bash", "-e", "-u", "-o", "pipefail", str(script)]
    limit = settings.python_timeout if python else settings.timeout
    stdout, stderr = scratch / "stdout", scratch / "stderr"
    start = time.monotonic()
    with stdout.open("wb") as out, stderr.open("wb") as err:
        # Files, not pipes: a server the example left in the background would
        # hold a pipe open. A session of its own, so its whole group can be killed.
        child = subprocess.Popen(command, cwd=repo, env=settings.env, stdin=subprocess.DEVNULL,
                                 stdout=out, stderr=err, start_new_session=True)
        try:
            status = child.wait(timeout=limit)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            seconds = time.monotonic() - start  # to its exit, not to the cleanup's end
            kill_group(child.pid)
            child.wait()
    label = f"{block.where} {block.tag}"
    if timed_out:
        return False, f"{label} (timed out after {limit:g} s)\n{both_tails(stdout, stderr)}"
    if status != 0:
        return False, f"{label} (exit status {status})\n{both_tails(stdout, stderr)}"
    if python and seconds > settings.python_exit_seconds:
        return False, (f"{label} (took {seconds:.1f} s: a Python example must finish and exit "
                       f"within {settings.python_exit_seconds:g} s, its clients left open)")
    if block.expected is not None:
        line = missing_output(block.expected, stdout.read_text(errors="replace"))
        if line is not None:
            return False, (f"{label} (its output, {block.page}:{block.expected_line}, is not "
                           f"what it printed: no \"{line}\" (whitespace ignored) in order)\n"
                           f"    stdout:\n{tail(stdout, 40)}")
    return True, f"{label} ({seconds:.1f} s)"


def port_taken(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex((host, int(port))) == 0


class Server:
    """The run's tensord on the docs' addresses (see the module's docstring)."""

    def __init__(self, tensord: Path, scratch: Path) -> None:
        self.made_socket_dir = False
        self.process: subprocess.Popen[bytes] | None = None
        for address in (GRPC_ADDRESS, HTTP_ADDRESS, METRICS_ADDRESS):
            if port_taken(address):
                raise SystemExit(f"run_doc_examples: {address} is taken: the examples dial it as "
                                 "written, so stop what listens there first")
        self.prepare_socket_dir()
        self.out, self.err = scratch / "tensord.stdout", scratch / "tensord.stderr"
        command = [str(tensord), f"--address={GRPC_ADDRESS}", f"--address=unix://{UNIX_SOCKET}",
                   f"--metrics_address={METRICS_ADDRESS}", f"--http_address={HTTP_ADDRESS}",
                   "--shutdown_grace_seconds=0"]
        with self.out.open("wb") as out, self.err.open("wb") as err:
            self.process = subprocess.Popen(command, stdout=out, stderr=err,
                                            stdin=subprocess.DEVNULL)
        # tensord prints where it listens once it does: every address, metrics, http.
        wanted = [f"tensord listening on {GRPC_ADDRESS}",
                  f"tensord listening on unix://{UNIX_SOCKET}",
                  f"tensord metrics on {METRICS_ADDRESS}", f"tensord http on {HTTP_ADDRESS}"]
        deadline = time.monotonic() + 30
        while not all(w in self.out.read_text().splitlines() for w in wanted):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"run_doc_examples: tensord did not start ({' '.join(command)}):\n"
                                 f"{tail(self.out)}\n{tail(self.err)}")
            time.sleep(0.05)

    def prepare_socket_dir(self) -> None:
        """/run/tensord, where docs/colocated.md's socket lives: made if missing
        (root, or sudo without a password), removed again at the end."""
        directory = UNIX_SOCKET.parent
        if UNIX_SOCKET.exists():
            with socket.socket(socket.AF_UNIX) as probe:
                if probe.connect_ex(str(UNIX_SOCKET)) == 0:
                    raise SystemExit(f"run_doc_examples: {UNIX_SOCKET} is taken: a server "
                                     "listens there; stop it first")
        if directory.is_dir() and os.access(directory, os.W_OK):
            return
        if not directory.exists():
            try:
                directory.mkdir(parents=True)
                self.made_socket_dir = True
                return
            except PermissionError:
                made = subprocess.run(["sudo", "-n", "install", "-d", "-o", str(os.getuid()),
                                       str(directory)], check=False, capture_output=True)
                if made.returncode == 0:
                    self.made_socket_dir = True
                    return
        raise SystemExit(f"run_doc_examples: cannot make {directory} (docs/colocated.md's socket "
                         "is there) writable for this user: run as root or create it")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.made_socket_dir:
            command = [] if os.access(UNIX_SOCKET.parent.parent, os.W_OK) else ["sudo", "-n"]
            subprocess.run([*command, "rm", "-rf", str(UNIX_SOCKET.parent)], check=False,
                           capture_output=True)


def scratch_venv(root: Path, scratch: Path) -> Path:
    """A venv of the run's own that sees build/python-venv's packages (a .pth
    file), so an example's `pip install` lands here; its python."""
    shared = root / "build" / "python-venv" / "bin" / "python"
    if not shared.exists():
        raise SystemExit(f"run_doc_examples: no {shared}: scripts/python-test.sh makes it "
                         "(the test command runs it first)")
    query = "import sysconfig; p = sysconfig.get_paths(); print(p['purelib']); print(p['platlib'])"
    paths = subprocess.run([str(shared), "-c", query],
                           capture_output=True, text=True, check=True).stdout.split()
    venv = scratch / "venv"
    subprocess.run([str(shared), "-m", "venv", str(venv)], check=True)
    own = subprocess.run([str(venv / "bin" / "python"), "-c",
                          "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    Path(own, "python-venv.pth").write_text("\n".join(dict.fromkeys(paths)) + "\n")
    return venv


def go_directory(root: Path) -> str | None:
    """The directory of the Go the scripts use (scripts/lib.sh go_binary), for
    the docs' `go install`."""
    found = subprocess.run(["bash", "-c", f'. "{root}/scripts/lib.sh" && go_binary'],
                           check=False, capture_output=True, text=True)
    return str(Path(found.stdout.strip()).parent) if found.returncode == 0 else None


def example_environment(root: Path, tools: Path, scratch: Path, venv: Path | None,
                        tensord: Path | None) -> dict[str, str]:
    """The examples' environment: `root` is the repository they run in, whose
    build/bin comes first; `tools` the one whose build holds grpcurl (build/go-bin)
    and whose scripts find Go (the same but with --fresh-clone)."""
    env = dict(os.environ)
    # The examples show plaintext calls: no TLS settings from the caller's shell.
    for name in ("TENSOROP_TLS", "TENSOROP_CA_FILE", "TENSOROP_CERT_FILE", "TENSOROP_KEY_FILE",
                 "TENSOROP_TOKEN_FILE", "PYTHONPATH", "PYTHONHOME"):
        env.pop(name, None)
    gobin = scratch / "go-bin"
    gobin.mkdir()
    path = [str(gobin)]
    if venv is not None and tensord is not None:
        path.append(str(venv / "bin"))
        env["VIRTUAL_ENV"] = str(venv)
        go = go_directory(tools)
        # The version scripts/python-test.sh builds the package with (setup.py
        # would ask git, which the examples' copy of client/python is outside of).
        env["TENSOROP_VERSION"] = subprocess.run(
            [str(tensord), "--version"], capture_output=True, text=True,
            check=True).stdout.split()[-1]
    else:
        go = None
    path += [str(root / "build" / "bin"), str(tools / "build" / "go-bin"),
             os.environ.get("GHZ_BIN_DIR", str(Path.home() / ".local" / "bin"))]
    if go:
        path.append(go)
    env["PATH"] = os.pathsep.join([*path, env.get("PATH", "/usr/bin:/bin")])
    env["GOBIN"] = str(gobin)
    env["GOTOOLCHAIN"] = "local"  # never a downloaded toolchain (scripts/lib.sh)
    return env


def fresh_clone(repository: Path, scratch: Path, tensord: Path) -> Path:
    """A `git clone` of `repository`'s HEAD in scratch/clone/, alone there (no
    ../shared beside it), with build/bin/tensord and build/bin/tensorctl linked
    to the built ones (tensorctl: the one beside `tensord`)."""
    head = subprocess.run(["git", "-C", str(repository), "log", "-1", "--format=%h %s"],
                          capture_output=True, text=True, check=False)
    if head.returncode != 0:
        raise SystemExit(f"run_doc_examples: --fresh-clone: {repository} is no git repository "
                         f"with a HEAD: {head.stderr.strip()}")
    parent = scratch / "clone"
    parent.mkdir()
    clone = parent / repository.name
    cloned = subprocess.run(["git", "clone", "--quiet", str(repository), str(clone)],
                            capture_output=True, text=True, check=False)
    if cloned.returncode != 0:
        raise SystemExit(f"run_doc_examples: git clone {repository} failed: "
                         f"{cloned.stderr.strip()}")
    (clone / "build" / "bin").mkdir(parents=True)
    for built in (tensord, tensord.parent / "tensorctl"):
        if not built.is_file():
            raise SystemExit(f"run_doc_examples: --fresh-clone: no {built} (build it first)")
        (clone / "build" / "bin" / built.name).symlink_to(built)
    beside = sorted(p.name for p in parent.iterdir() if p != clone)
    assert not beside, f"the clone has {beside} beside it"
    print(f"fresh clone of {head.stdout.strip()} in {clone}: nothing beside it; build/bin: "
          f"{tensord.parent}'s tensord and tensorctl", flush=True)
    return clone


def run(args: argparse.Namespace) -> int:
    repository = Path(args.root).resolve()
    passed = not_runnable = failed = 0
    with tempfile.TemporaryDirectory(prefix="doc-examples-") as scratch_name:
        scratch = Path(scratch_name)
        tensord = None if args.no_server else Path(args.tensord).resolve()
        root = repository
        if args.fresh_clone:
            if tensord is None:
                raise SystemExit("run_doc_examples: --fresh-clone needs a tensord")
            root = fresh_clone(repository, scratch, tensord)
        examples: list[Block] = []
        problems: list[str] = []
        names = [str(root / n) for n in args.files] if args.fresh_clone else args.files
        for page in pages_of(root, names):
            parsed = parse_page(page.read_text(), str(page.relative_to(root)))
            examples += parsed.examples
            problems += parsed.problems
        for problem in problems:
            print(f"FAIL {problem}")

        server = None
        try:
            if tensord is None:
                venv, python = None, sys.executable
            else:
                venv = scratch_venv(repository, scratch)
                python = str(venv / "bin" / "python")
                server = Server(tensord, scratch)
            settings = Settings(
                root=root,
                env=example_environment(root, repository, scratch, venv, tensord),
                python=python, timeout=args.timeout, python_timeout=args.python_timeout,
                python_exit_seconds=args.python_exit_seconds)
            for number, block in enumerate(examples):
                if block.not_runnable is not None:
                    if block.not_runnable:  # an empty reason is a problem, counted above
                        not_runnable += 1
                        print(f"NOT RUNNABLE {block.where} {block.tag} ({block.not_runnable})")
                    continue
                ok, line = run_example(block, settings, scratch / f"example-{number}")
                print(f"{'PASS' if ok else 'FAIL'} {line}", flush=True)
                passed += ok
                failed += not ok
            if server is not None and server.process is not None \
                    and server.process.poll() is not None:
                print(f"FAIL tensord exited during the examples (status "
                      f"{server.process.returncode}):\n{tail(server.err)}")
                failed += 1
        finally:
            if server is not None:
                server.stop()
    failed += len(problems)
    summary = f"{passed} examples passed, {not_runnable} marked not runnable here"
    print(summary + (f", {failed} failed" if failed else ""))
    return 1 if failed else 0


PLANTED = """\
# A page with planted examples

```sh
echo hello from a good example
```

```output
hello from a good example
```

```python
raise SystemExit(3)
```

```sh
false
```

```sh
sleep 600
```

```python
import threading, time
threading.Thread(target=time.sleep, args=(600,)).start()  # holds the exit
```

```sh
echo goodbye
```

```output
hello
```

```sh
sleep 600 &  # left running: the example still ends, and the sleep is killed
echo started a background job
```

<!-- not runnable here: needs a cluster of planted machines -->
```sh
exit 1
```

<!-- not runnable here -->
```sh
exit 1
```

```
an untagged block
```

```text
a tree, not an example
```

```sh
cat ../shared/README.md  # beside the repository, so outside it: examples never see it
```
"""

# (what the self-test checks, the line of the runner's output that shows it)
EXPECTED = [
    ("a passing example whose output is as shown passes",
     r"^PASS docs/planted\.md:3 sh \("),
    ("a failing Python example is refused",
     r"^FAIL docs/planted\.md:11 python \(exit status 3\)$"),
    ("a failing shell example is refused",
     r"^FAIL docs/planted\.md:15 sh \(exit status 1\)$"),
    ("a hanging example is refused",
     r"^FAIL docs/planted\.md:19 sh \(timed out after 2 s\)$"),
    ("a Python example that does not exit is refused",
     r"^FAIL docs/planted\.md:23 python \(timed out after 3 s\)$"),
    ("an example whose output differs is refused",
     (r"^FAIL docs/planted\.md:28 sh \(its output, docs/planted\.md:32, is not what it "
      r"printed: no \"hello\"")),
    ("an example leaving a process behind passes without waiting for it",
     r"^PASS docs/planted\.md:36 sh \("),
    ("a marked example is counted, not run",
     r"^NOT RUNNABLE docs/planted\.md:42 sh \(needs a cluster of planted machines\)$"),
    ("a mark without a reason is refused",
     r"^FAIL docs/planted\.md:47: 'not runnable here' needs a reason"),
    ("an untagged block is refused",
     r"^FAIL docs/planted\.md:51: a fenced block without an info string"),
    ("an example reading ../shared, which sits beside the repository, is refused",
     r"^FAIL docs/planted\.md:59 sh \(exit status 1\)$"),
    ("the summary counts them",
     r"^2 examples passed, 1 marked not runnable here, 8 failed$"),
]


def self_test() -> int:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "repo"
        (root / "docs").mkdir(parents=True)
        (root / "README.md").write_text("# planted\n\nNo examples here.\n")
        (root / "docs" / "planted.md").write_text(PLANTED)
        # What a repository may have beside it, which its examples must not reach.
        (Path(scratch) / "shared").mkdir()
        (Path(scratch) / "shared" / "README.md").write_text("beside the repository\n")
        start = time.monotonic()
        done = subprocess.run(
            [sys.executable, __file__, "--root", str(root), "--no-server", "--timeout", "2",
             "--python-timeout", "3"], check=False, capture_output=True, text=True, timeout=120)
        seconds = time.monotonic() - start
    lines = done.stdout.splitlines()
    wrong = []
    for what, pattern in EXPECTED:
        if any(re.search(pattern, line) for line in lines):
            print(f"doc examples self-test: {what}")
        else:
            wrong.append(f"{what}: no line matches {pattern}")
    if done.returncode != 1:
        wrong.append(f"the run exited {done.returncode}, not 1")
    if seconds > 60:
        wrong.append(f"the run took {seconds:.0f} s: the hanging examples were waited for")
    if wrong:
        print("doc examples self-test FAILED:\n  " + "\n  ".join(wrong))
        print("the run printed:\n" + done.stdout + done.stderr)
        return 1
    print("doc examples self-test: broken, hanging and unmarked examples are refused")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", help="pages to run (default: README.md, docs/*.md)")
    parser.add_argument("--root", default=str(ROOT), help="the repository (default: this one)")
    parser.add_argument("--tensord", default=str(ROOT / "build" / "bin" / "tensord"))
    parser.add_argument("--timeout", type=float, default=60,
                        help="seconds a shell example may take (default 60)")
    parser.add_argument("--python-timeout", type=float, default=10,
                        help="seconds before a Python example is killed (default 10)")
    parser.add_argument("--python-exit-seconds", type=float, default=5,
                        help="seconds within which a Python example must have exited (default 5)")
    parser.add_argument("--fresh-clone", action="store_true",
                        help="run in a git clone of HEAD with nothing beside it")
    parser.add_argument("--self-test", action="store_true")
    # For the self-test: no tensord, no venv; Python examples run by this python.
    parser.add_argument("--no-server", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
