#!/usr/bin/env python3
"""A catalogue of bad inputs and faults, run against the `fp8jit` CLI as a new user would.

    python3 tests/catalogue/catalogue.py --cli build/fp8jit [--quick] [--only REGEX] [--jobs N]

Every case runs the CLI in a fresh temporary working folder, with HOME, FP8JIT_DB and
FP8JIT_CACHE_DIR pointed into a temporary folder of its own, stdin from /dev/null and a time limit.
It prints one line per case and a summary:

    N cases: P ok, H hangs, C crashes, L lost rows, S stray writes, B bad values accepted, F other failures

and exits 0 only when every case is ok. Each failing case is counted once, under its worst finding
(in that order). See README.md next to this file.
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple, Union

# ----------------------------------------------------------------------------------------------
# Findings

HANG, CRASH, LOST, STRAY, ACCEPTED, OTHER = ("HANG", "CRASH", "LOST ROWS", "STRAY WRITE", "BAD VALUE ACCEPTED",
                                             "OTHER")
SEVERITY = [HANG, CRASH, LOST, STRAY, ACCEPTED, OTHER]

# Expectations.
OK = "ok"          # exit 0
USAGE = "usage"    # exit 2: a parse error (unknown option, bad type or range, missing option)
ERROR = "error"    # exit 1: a runtime refusal (bad file, invalid spec, refused database)
REFUSE = "refuse"  # exit 1 or 2
GPU = "gpu"        # no GPU: exit 1 "needs a GPU", one line, nothing written; a GPU: runs or refuses cleanly
CLEAN = "clean"    # runs (0) or refuses cleanly (1 or 2): never a hang, crash or stray write
REFUSED = (USAGE, ERROR, REFUSE, GPU)

CONTROL = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]")
CRASH_MARKS = (b"terminate called", b"Segmentation", b"Aborted", b"unexpected error", b"core dumped",
               b"AddressSanitizer", b"UndefinedBehaviorSanitizer")
PROGRESS_LINE = re.compile(r"^[^:\n]{1,80}: \d+/\d+( |$)")
PREFIX = re.compile(r"^(fp8jit(?: [a-z][a-z0-9-]*)*): ")

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
ROOT_NOTE = "running as root, which ignores permission bits"


def shown(arg, limit=60) -> str:
    """An argument as a reader can see it: printable ASCII kept, other bytes as \\xNN, bounded."""
    b = arg if isinstance(arg, bytes) else arg.encode("utf-8", "surrogateescape")
    s = "".join(chr(c) if 0x20 <= c < 0x7f and c != 0x5c else "\\x%02x" % c for c in b)
    if len(s) > limit:
        s = s[:limit - 3] + "..."
    if s == "" or re.search(r"[\s'\"{}\[\]|;&<>()$`*?!#~]", s):
        s = "'" + s.replace("'", "'\\''") + "'"
    return s


def brief(data: bytes, limit=200) -> str:
    text = data.decode("utf-8", "replace").strip()
    out = "".join(ch if (0x20 <= ord(ch) < 0x7f or ord(ch) > 0x9f) else ("\\n" if ch == "\n" else "\\x%02x" % ord(ch))
                  for ch in text)
    return out if len(out) <= limit else out[:limit - 3] + "..."


# ----------------------------------------------------------------------------------------------
# Running the CLI


@dataclass
class Res:
    rc: Optional[int]          # exit status; None when killed by a signal
    sig: Optional[int]         # the signal that ended it
    out: bytes
    err: bytes
    timed_out: bool
    secs: float

    def status(self) -> str:
        if self.timed_out:
            return "timed out after %.0f s" % self.secs
        return "killed by signal %d" % self.sig if self.sig else "exit %d" % self.rc


def wrap_limits(argv: List, limits: Optional[dict]) -> List:
    """Runs argv under resource limits through sh (ulimit; SIGXFSZ ignored so a write past the
    file size limit fails with EFBIG instead of killing the process)."""
    if not limits:
        return argv
    script = ""
    for flag, value in limits.items():
        script += "ulimit -%s %s || exit 99; " % (flag, value)
    script += "trap '' XFSZ; exec \"$@\""
    return ["/bin/sh", "-c", script, "sh"] + argv


def popen(cli: str, args: Sequence, cwd: str, env: dict, stdout_path: Optional[str] = None,
          limits: Optional[dict] = None) -> subprocess.Popen:
    argv = wrap_limits([cli] + list(args), limits)
    stdout = open(stdout_path, "wb") if stdout_path else subprocess.PIPE
    try:
        return subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=stdout,
                                stderr=subprocess.PIPE, start_new_session=True)
    finally:
        if stdout_path:
            stdout.close()


def finish(p: subprocess.Popen, timeout: float, t0: float) -> Res:
    timed_out = False
    try:
        out, err = p.communicate(timeout=max(0.1, timeout - (time.monotonic() - t0)))
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = p.communicate()
    rc = p.returncode
    return Res(rc if rc >= 0 else None, -rc if rc < 0 else None, out or b"", err or b"", timed_out,
               time.monotonic() - t0)


def run_cli(cli, args, cwd, env, timeout=30.0, stdout_path=None, limits=None) -> Res:
    t0 = time.monotonic()
    return finish(popen(cli, args, cwd, env, stdout_path, limits), timeout, t0)


# ----------------------------------------------------------------------------------------------
# Snapshots: every entry's type and mode, every regular file's bytes (as a hash)


def file_digest(path: str) -> str:
    h = hashlib.sha256()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError as e:
        return "unreadable:%s" % e.errno
    try:
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            h.update(chunk)
    finally:
        os.close(fd)
    return h.hexdigest()


def snapshot(top: str) -> dict:
    out = {}

    def walk(d, rel):
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError as e:
            out[rel + "/"] = "unlistable:%s" % e.errno
            return
        for e in entries:
            r = (rel + "/" + e.name) if rel else e.name
            st = os.lstat(e.path)
            kind = stat.S_IFMT(st.st_mode)
            desc = "type=%o mode=%o" % (kind, stat.S_IMODE(st.st_mode))
            if stat.S_ISREG(st.st_mode):
                desc += " size=%d %s" % (st.st_size, file_digest(e.path))
            elif stat.S_ISLNK(st.st_mode):
                desc += " -> %r" % os.readlink(e.path)
            out[r] = desc
            if stat.S_ISDIR(st.st_mode):
                walk(e.path, r)

    walk(top, "")
    return out


def snapshot_diff(before: dict, after: dict, allowed: Sequence[str] = ()) -> List[str]:
    def ok(path):
        return any(path == a or path.startswith(a.rstrip("/") + "/") for a in allowed)

    diffs = []
    for p in sorted(set(before) | set(after)):
        if ok(p) or before.get(p) == after.get(p):
            continue
        diffs.append(("+" if p not in before else "-" if p not in after else "~") + shown(p, 80))
    return diffs


# ----------------------------------------------------------------------------------------------
# A case's folders


class SetupError(Exception):
    pass


class Ctx:
    """root/work: the working folder (snapshotted); root/home: HOME; root/cache: FP8JIT_CACHE_DIR
    (not created); root/db/tuning.sqlite: FP8JIT_DB; root/other: a place for files outside the
    working folder."""

    def __init__(self, run: "Runner"):
        self.runner = run
        self.cli = run.cli
        self.gpu = run.gpu
        self.root = tempfile.mkdtemp(prefix="fp8cat-", dir=run.base)
        self.cwd = os.path.join(self.root, "work")
        self.home = os.path.join(self.root, "home")
        self.cache = os.path.join(self.root, "cache")
        self.db = os.path.join(self.root, "db", "tuning.sqlite")
        self.other = os.path.join(self.root, "other")
        for d in (self.cwd, self.home, os.path.dirname(self.db), self.other):
            os.makedirs(d)
        self.extra_env = {}

    def env(self, extra: Optional[dict] = None) -> dict:
        e = {k: v for k, v in os.environ.items() if not k.startswith("FP8JIT_") and k != "XDG_CACHE_HOME"}
        e.update(HOME=self.home, FP8JIT_DB=self.db, FP8JIT_CACHE_DIR=self.cache, LC_ALL="C")
        e.update(self.extra_env)
        if extra:
            e.update(extra)
        return {k: v for k, v in e.items() if v is not None}

    def p(self, name) -> str:
        return os.path.join(self.cwd, name)

    def write(self, name, data, where=None) -> str:
        path = os.path.join(where or self.cwd, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode())
        return path

    def fifo(self, name, where=None) -> str:
        path = os.path.join(where or self.cwd, name)
        os.mkfifo(path)
        return path

    def mkdir(self, name, where=None) -> str:
        path = os.path.join(where or self.cwd, name)
        os.makedirs(path, exist_ok=True)
        return path

    def sparse(self, name, size=100 << 20, where=None) -> str:
        path = os.path.join(where or self.cwd, name)
        with open(path, "wb") as f:
            f.truncate(size)
        return path

    def symlink(self, target, name, where=None) -> str:
        path = os.path.join(where or self.cwd, name)
        os.symlink(target, path)
        return path

    def run(self, args, timeout=60.0, env=None, cwd=None, **kw) -> Res:
        return run_cli(self.cli, args, cwd or self.cwd, self.env(env), timeout, **kw)

    def must(self, args, env=None, timeout=120.0) -> Res:
        """A setup step that has to succeed."""
        r = self.run(args, timeout=timeout, env=env)
        if r.rc != 0:
            raise SetupError("setup `fp8jit %s` failed: %s: %s" % (" ".join(shown(a) for a in args), r.status(),
                                                                  brief(r.err)))
        return r

    def import_rows(self, rows, db=None) -> str:
        """Creates (or adds to) a tuning database through the CLI."""
        f = self.write("setup-rows-%d.json" % len(rows), export_doc(rows), where=self.other)
        self.must(["db", "import", "--file", f] + (["--db", db] if db else []))
        os.unlink(f)
        return db or self.db


# ----------------------------------------------------------------------------------------------
# Cases


Args = Union[Sequence, Callable[[Ctx], Sequence]]
Finding = Tuple[str, str]


@dataclass
class Case:
    name: str
    args: Args = ()
    expect: str = OK
    needles: Sequence[str] = ()        # in stderr when refused; in stdout or stderr when it ran
    out_needles: Sequence[str] = ()    # in stdout
    not_needles: Sequence[str] = ()    # never in stderr
    setup: Optional[Callable[[Ctx], None]] = None
    env: Optional[Union[dict, Callable[[Ctx], dict]]] = None
    timeout: float = 30.0
    slow: bool = False                 # left out of --quick
    gpu_heavy: bool = False            # left out where a GPU is present (would really run big)
    writes: Sequence[str] = ()         # paths under the working folder a successful run may change
    check: Optional[Callable[[Ctx, Res], List[Finding]]] = None
    runner: Optional[Callable[[Ctx], Tuple[str, List[Finding]]]] = None  # a case of several processes
    stdout_to: Optional[Union[str, Callable[[Ctx], str]]] = None
    limits: Optional[dict] = None      # ulimit flags, e.g. {"f": 8}
    skip: Optional[Callable[["Runner"], Optional[str]]] = None
    root_clean: bool = True            # a refusal leaves the whole temporary folder alone
    one_line: bool = False             # a refusal's stderr is one line
    exclusive: bool = False            # runs alone (timing-sensitive concurrency)
    needs_bench: bool = False          # bench --dry-run answers only where fp8jit_bench is built


def prefix_findings(err: bytes) -> List[Finding]:
    """Non-empty stderr that starts with "fp8jit" (after progress lines) and has its prefix once."""
    if not err.strip():
        return [(OTHER, "stderr is empty")]
    lines = err.decode("utf-8", "replace").split("\n")
    while lines and PROGRESS_LINE.match(lines[0]) and not lines[0].startswith("fp8jit"):
        lines.pop(0)
    first = lines[0] if lines else ""
    if not first.startswith("fp8jit"):
        return [(OTHER, "stderr does not start with \"fp8jit\": %s" % brief(err, 120))]
    m = PREFIX.match(first)
    if m:
        rest = first[m.end():]
        text = "\n".join(lines)
        if rest.startswith("fp8jit") or text.count(m.group(1) + ": ") > 1:
            return [(OTHER, "the prefix \"%s: \" twice: %s" % (m.group(1), brief(err, 160)))]
    return []


def evaluate(case: Case, ctx: Ctx, res: Res, expect: str, before_cwd: dict, before_root: dict) -> List[Finding]:
    f: List[Finding] = []
    if res.timed_out:
        return [(HANG, "no answer within %.0f s" % case.timeout)]
    both = res.out + res.err
    if res.sig is not None or (res.rc is not None and res.rc >= 128) or any(m in both for m in CRASH_MARKS):
        f.append((CRASH, "%s: %s" % (res.status(), brief(res.err, 200))))
    for name, data in (("stdout", res.out), ("stderr", res.err)):
        m = CONTROL.search(data)
        if m:
            f.append((OTHER, "raw control byte 0x%02x in %s: %s" % (m.group()[0], name,
                                                                     brief(data[max(0, m.start() - 60):m.start() + 40]))))
    rc = res.rc
    if rc is not None and rc < 128:
        if expect in REFUSED and rc == 0:
            f.append((ACCEPTED, "exit 0 (expected a refusal); stdout: %s; stderr: %s" % (brief(res.out, 100),
                                                                                   brief(res.err, 100))))
        elif expect == OK and rc != 0:
            f.append((OTHER, "exit %d, expected 0: %s" % (rc, brief(res.err))))
        elif expect == USAGE and rc != 2:
            f.append((OTHER, "exit %d, expected 2 (a usage error): %s" % (rc, brief(res.err))))
        elif expect in (ERROR, GPU) and rc != 1:
            f.append((OTHER, "exit %d, expected 1: %s" % (rc, brief(res.err))))
        elif expect in (REFUSE, CLEAN) and rc not in ((0, 1, 2) if expect == CLEAN else (1, 2)):
            f.append((OTHER, "exit %d, expected %s: %s" % (rc, "0, 1 or 2" if expect == CLEAN else "1 or 2",
                                                          brief(res.err))))
        if rc != 0:
            f += prefix_findings(res.err)
            if case.one_line and res.err.count(b"\n") != 1:
                f.append((OTHER, "expected one line on stderr: %s" % brief(res.err)))
        for n in case.needles:
            if n.encode() not in (res.err if rc != 0 else both):
                f.append((OTHER, "%r not in %s: %s" % (n, "stderr" if rc != 0 else "the output",
                                                      brief(res.err if rc != 0 else both))))
        for n in case.out_needles:
            if n.encode() not in res.out:
                f.append((OTHER, "%r not in stdout: %s" % (n, brief(res.out))))
        for n in case.not_needles:
            if n.encode() in res.err:
                f.append((OTHER, "%r in stderr: %s" % (n, brief(res.err))))
    after_cwd = snapshot(ctx.cwd)
    d = snapshot_diff(before_cwd, after_cwd, case.writes if rc == 0 else ())
    if d:
        f.append((STRAY, "the working folder changed: %s" % " ".join(d[:6])))
    elif rc != 0 and case.root_clean:
        # home/.nv: the NVIDIA driver's own JIT cache, made wherever libcuda is loaded
        d = snapshot_diff(before_root, snapshot(ctx.root), ("work", "home/.nv"))
        if d:
            f.append((STRAY, "a refused command wrote: %s" % " ".join(d[:6])))
    return f


class Runner:
    def __init__(self, cli: str, gpu: bool, base: str, keep: bool):
        self.cli, self.gpu, self.base, self.keep = cli, gpu, base, keep
        d = os.path.dirname(cli)
        self.has_bench = any(os.access(p, os.X_OK) for p in (os.path.join(d, "fp8jit_bench"),
                                                              os.path.join(d, "bench", "fp8jit_bench")))

    def effective(self, case: Case) -> str:
        return CLEAN if (case.expect == GPU and self.gpu) else case.expect

    def run_case(self, case: Case) -> Tuple[str, List[Finding], str]:
        """(command shown, findings, note); note "skip: ..." when the case did not run."""
        if case.skip:
            why = case.skip(self)
            if why:
                return "", [], "skip: " + why
        if case.gpu_heavy and self.gpu:
            return "", [], "skip: would really run at a large size on this GPU"
        if case.needs_bench and not self.has_bench:
            return "", [], "skip: fp8jit_bench is not built next to the CLI, so bench --dry-run cannot answer"
        ctx = Ctx(self)
        shown_cmd = ""
        try:
            try:
                if case.setup:
                    case.setup(ctx)
                if case.runner:
                    before = snapshot(ctx.cwd)
                    shown_cmd, findings = case.runner(ctx)
                    d = snapshot_diff(before, snapshot(ctx.cwd))
                    if d:
                        findings.append((STRAY, "the working folder changed: %s" % " ".join(d[:6])))
                    return shown_cmd, findings, ""
                args = case.args(ctx) if callable(case.args) else list(case.args)
                shown_cmd = "fp8jit " + " ".join(shown(a) for a in args)
                env = case.env(ctx) if callable(case.env) else case.env
                stdout_to = case.stdout_to(ctx) if callable(case.stdout_to) else case.stdout_to
                if stdout_to:
                    shown_cmd += " >" + shown(stdout_to)
                before_cwd, before_root = snapshot(ctx.cwd), snapshot(ctx.root)
                if case.expect == GPU and self.gpu and case.timeout < 120:
                    case = Case(**{**case.__dict__, "timeout": 120.0})  # a first CUDA context, a compile
                res = ctx.run(args, timeout=case.timeout, env=env, stdout_path=stdout_to, limits=case.limits)
                expect = self.effective(case)
                c = case
                if case.expect == GPU and not self.gpu:
                    c = Case(**{**case.__dict__, "needles": list(case.needles) + ["needs a GPU"], "one_line": True})
                findings = evaluate(c, ctx, res, expect, before_cwd, before_root)
                if case.check and not res.timed_out:
                    findings += case.check(ctx, res)
                return shown_cmd, findings, ""
            except SetupError as e:
                return shown_cmd, [(OTHER, str(e))], ""
        finally:
            if not self.keep:
                make_removable(ctx.root)
                shutil.rmtree(ctx.root, ignore_errors=True)


def make_removable(top):
    for d, dirs, _files in os.walk(top):
        for name in dirs:
            try:
                os.chmod(os.path.join(d, name), 0o755)
            except OSError:
                pass


# ----------------------------------------------------------------------------------------------
# Test data

QSPEC = ('{"family":"quantize","problem":{"input":"bf16","format":"e4m3","granularity":"1x128","transpose":0},'
         '"config":{"vec":8,"threads":256,"unroll":2}}')
GEMM_SPEC_FALLBACK = ('{"config":{"block_m":128,"block_n":64,"cluster_m":1,"cluster_n":1,"group_m":8,"stages":6},'
                      '"family":"gemm","problem":{"a_format":"e4m3","accum":"precise","b_format":"e4m3","bias":0,'
                      '"out":"bf16","scale":"block"}}')
GPU_KEY = "NVIDIA H100 80GB HBM3|9.0|132"
ONE_SHAPE = "m,n,k\n128,4096,7168\n"
GEMM_SPEC = json.loads(GEMM_SPEC_FALLBACK)  # replaced in main() by what `fp8jit select-gemm` prints


def problem_key(spec) -> str:
    return json.dumps(spec["problem"], sort_keys=True, separators=(",", ":"))


def make_row(m, n=4096, k=7168, space="catalogue", gpu=GPU_KEY, best_us=10.0, **override):
    row = {"gpu": gpu, "op": "gemm", "problem_key": problem_key(GEMM_SPEC), "m": m, "n": n, "k": k,
           "space_hash": space, "best_config": GEMM_SPEC, "best_us": best_us, "timings": [],
           "created_at": 1700000000}
    row.update(override)
    return row


def export_doc(rows) -> str:
    return json.dumps({"format": "fp8jit-tuning", "version": 1, "rows": rows})


def rows_file(name, rows):
    return lambda c: c.write(name, export_doc(rows))


def export_rows(ctx: Ctx, db=None) -> Optional[list]:
    r = ctx.run(["db", "export"] + (["--db", db] if db else []), timeout=120)
    if r.rc != 0:
        return None
    try:
        return json.loads(r.out)["rows"]
    except (ValueError, KeyError, TypeError):
        return None


def sqlite_file(path, statements):
    con = sqlite3.connect(path)
    for s in statements:
        con.execute(s)
    con.commit()
    con.close()
    for suffix in ("-journal", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.unlink(path + suffix)


FOREIGN = {
    "users-sqlite": lambda p: sqlite_file(p, ["CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)",
                                              "INSERT INTO users (name) VALUES ('ada'), ('grace')"]),
    "results-other-columns": lambda p: sqlite_file(p, [
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value NOT NULL)",
        "INSERT INTO meta VALUES ('schema_version', 2)",
        "CREATE TABLE results (id INTEGER PRIMARY KEY, score REAL, label TEXT)",
        "INSERT INTO results (score, label) VALUES (1.5, 'x')"]),
    "results-only": lambda p: sqlite_file(p, ["CREATE TABLE results (gpu_key TEXT, op TEXT, m INTEGER)",
                                              "INSERT INTO results VALUES ('g', 'gemm', 1)"]),
    "text-file": lambda p: open(p, "w").write("name,score\nada,1\ngrace,2\n" * 50),
}


def fp8jit_db_with(ctx: Ctx, path: str, rows=None) -> str:
    """A real fp8jit database at `path` (made elsewhere, moved there with its WAL checkpointed)."""
    tmp = os.path.join(ctx.other, "make-%d" % len(os.listdir(ctx.other)), "t.sqlite")
    os.makedirs(os.path.dirname(tmp))
    ctx.import_rows(rows if rows is not None else [make_row(m) for m in range(1, 201)], db=tmp)
    con = sqlite3.connect(tmp)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.execute("PRAGMA journal_mode=DELETE")
    con.close()
    shutil.copyfile(tmp, path)
    shutil.rmtree(os.path.dirname(tmp))
    return path


def damage(path, offset=None, length=2048):
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.seek(offset if offset is not None else size // 2)
        f.write(bytes((i * 37 + 11) & 0xff for i in range(length)))


# ----------------------------------------------------------------------------------------------
# The catalogue

CASES: List[Case] = []


def add(*cases: Case):
    CASES.extend(cases)


def root_skip(what):
    return lambda run: ("%s: %s" % (ROOT_NOTE, what)) if IS_ROOT else None


COMMANDS = {  # each command and the options its --help must list
    "info": [],
    "list": ["--family", "--json", "--specs", "--where"],
    "emit": ["--spec"],
    "compile": ["--spec", "--cubin", "--ptx", "--arch"],
    "compile-all": ["--family", "--jobs", "--sample"],
    "quantize": ["--m", "--k", "--input", "--format", "--granularity", "--layout", "--pow2", "--transpose", "--iters"],
    "dequantize": ["--m", "--k", "--format", "--output", "--granularity", "--layout", "--iters"],
    "demo": ["--m", "--k", "--jobs"],
    "gemm": ["--m", "--n", "--k", "--scale", "--out", "--fast-accum", "--bias", "--a-format", "--b-format", "--iters",
             "--config", "--layout", "--groups", "--expected-m", "--scale-layout-a"],
    "select-gemm": ["--m", "--n", "--k", "--scale", "--out", "--fast-accum", "--bias", "--layout", "--groups", "--expected-m",
                    "--db"],
    "tune": ["--suite", "--shapes", "--op", "--scale", "--out", "--fast-accum", "--bias", "--db", "--jobs", "--top-k", "--shard",
             "--dry-run", "--device", "--all-gpus"],
    "precompile": ["--suite", "--shapes", "--op", "--scale", "--out", "--fast-accum", "--bias", "--db", "--jobs", "--model", "--m",
                   "--tp", "--gpu"],
    "bench": ["--suite", "--shapes", "--scale", "--providers", "--out", "--dry-run"],
    "db": ["list", "show", "export", "import", "prune", "rebuild"],
    "cast": ["--to", "IN_DIR", "OUT_DIR", "--format", "--scale-fmt", "--skip", "--device"],
}
DB_SUBS = {
    "list": ["--db", "--gpu"],
    "show": ["--db", "--gpu", "--op", "--m", "--n", "--k"],
    "export": ["--db", "--file"],
    "import": ["--db", "--file"],
    "prune": ["--db", "--op", "--space-hash"],
    "rebuild": ["--db"],
}
# The smallest valid invocation of each command: what a bad extra argument is added to.
MINIMAL = {
    "info": ["info"], "list": ["list"], "emit": ["emit", "--spec", QSPEC], "compile": ["compile", "--spec", QSPEC],
    "compile-all": ["compile-all", "--family", "quantize"], "quantize": ["quantize", "--m", "128", "--k", "128"],
    "dequantize": ["dequantize", "--m", "128", "--k", "128"], "demo": ["demo"],
    "gemm": ["gemm", "--m", "128", "--n", "128", "--k", "128"], "select-gemm": ["select-gemm"],
    "tune": ["tune", "--suite", "deepseek-v3"], "precompile": ["precompile", "--suite", "deepseek-v3"],
    "bench": ["bench", "--suite", "deepseek-v3", "--dry-run"], "db": ["db", "list"],
    "cast": ["cast", "--to", "bf16", "in", "out"],
}
ESC = "\x1b[31mred\x1b]0;title\x07"


def help_and_version():
    add(Case("basic/info", ["info"], OK, out_needles=["gpu:", "cache dir:"]),
        Case("basic/list", ["list"], OK, out_needles=["quantize", "gemm"]),
        Case("basic/list-json", ["list", "--json"], OK, out_needles=['"valid_variants"'],
             check=lambda c, r: [] if [f["family"] for f in json.loads(r.out)] == ["quantize", "dequantize", "gemm"]
             else [(OTHER, "list --json is not one document of the three families")]),
        Case("basic/list-specs", ["list", "--specs", "--family", "quantize"], OK, out_needles=['"family":"quantize"']),
        Case("basic/list-json-and-specs", ["list", "--json", "--specs"], USAGE),
        Case("basic/list-where", ["list", "--specs", "--family", "gemm", "--where",
                                  "scale=block,accum=precise,out=bf16,a_format=e4m3,b_format=e4m3,bias=0,"
                                  "layout=dense,block_m=256"], OK, out_needles=['"block_m":256']),
        Case("basic/list-where-bad-value", ["list", "--where", "scale=bogus"], USAGE),
        Case("basic/list-where-not-in-family", ["list", "--family", "quantize", "--where", "scale=block"], ERROR),
        Case("basic/emit", ["emit", "--spec", QSPEC], OK, out_needles=["#include"]),
        Case("basic/select-gemm", ["select-gemm", "--m", "128", "--n", "4096", "--k", "7168"], OK,
             out_needles=['"family":"gemm"']),
        Case("basic/compile-gemm-spec", lambda c: ["compile", "--spec", json.dumps(GEMM_SPEC)], OK, timeout=300),
        Case("basic/precompile-one-shape", ["precompile", "--shapes", "one.csv"], OK, timeout=300,
             setup=lambda c: c.write("one.csv", ONE_SHAPE), out_needles=["1 shapes"]),
        Case("basic/cast-missing-input", ["cast", "--to", "bf16", "nope", "out"], ERROR, needles=["not a directory"]),
        Case("basic/cast-not-a-checkpoint", ["cast", "--to", "fp8", "empty", "out"], ERROR,
             setup=lambda c: c.mkdir("empty"), needles=["not a Hugging Face safetensors checkpoint"]),
        Case("basic/cast-into-itself", ["cast", "--to", "bf16", "empty", "empty"], ERROR,
             setup=lambda c: c.mkdir("empty"), needles=["is the input folder"]),
        Case("basic/cast-bad-to", ["cast", "--to", "fp4", "a", "b"], USAGE, needles=["--to"]))
    add(Case("help/version", ["--version"], OK, out_needles=["fp8jit "]),
        Case("help/top", ["--help"], OK, out_needles=list(COMMANDS)),
        Case("help/top-short", ["-h"], OK, out_needles=["precompile"]),
        Case("help/no-arguments", [], USAGE, needles=["info", "precompile"]),
        Case("help/db-alone", ["db"], USAGE, needles=["fp8jit db"]),
        Case("help/db-help", ["db", "--help"], OK, out_needles=COMMANDS["db"]),
        Case("help/version-after-command", ["info", "--version"], CLEAN),
        Case("help/help-after-bad-value", ["select-gemm", "--m", "abc", "--help"], CLEAN))
    for cmd, opts in COMMANDS.items():
        if cmd != "db":
            add(Case("help/%s" % cmd, [cmd, "--help"], OK, out_needles=["Usage: fp8jit %s" % cmd, "--help"] + opts))
    for sub, opts in DB_SUBS.items():
        add(Case("help/db-%s" % sub, ["db", sub, "--help"], OK, out_needles=["Usage: fp8jit db %s" % sub] + opts))


def unknown_commands_and_options():
    for name, args, exp in [("unknown-command", ["bogus"], USAGE), ("help-word", ["help"], REFUSE),
                            ("empty-command", [""], USAGE), ("esc-command", [ESC], USAGE),
                            ("unknown-top-option", ["--bogus"], USAGE), ("dash", ["-"], USAGE),
                            ("double-dash", ["--"], USAGE), ("db-unknown-sub", ["db", "vacuum"], USAGE),
                            ("db-option-before-sub", ["db", "--db", "x.sqlite", "list"], USAGE),
                            ("non-utf8-command", [b"\xff\xfe"], USAGE)]:
        add(Case("args/%s" % name, args, exp))
    add(Case("args/esc-command-escaped", [ESC], USAGE, needles=["\\x1b[31mred"]))
    for cmd, minimal in MINIMAL.items():
        if cmd == "db":
            for sub in DB_SUBS:
                add(Case("args/db-%s-positional" % sub, ["db", sub, "junk"], USAGE),
                    Case("args/db-%s-unknown-option" % sub, ["db", sub, "--bogus"], USAGE))
            continue
        add(Case("args/%s-positional" % cmd, minimal + ["junk"], USAGE),
            Case("args/%s-unknown-option" % cmd, minimal + ["--bogus"], USAGE),
            Case("args/%s-unknown-option-value" % cmd, minimal + ["--bogus=1"], USAGE),
            Case("args/%s-short-option" % cmd, minimal + ["-x"], USAGE),
            Case("args/%s-esc-option" % cmd, minimal + ["--" + ESC], USAGE))
    add(Case("args/flag-with-value", ["list", "--json=maybe"], USAGE),
        Case("args/flag-with-value-true", ["list", "--json=true", "--family", "quantize"], CLEAN),
        Case("args/option-twice", ["select-gemm", "--m", "64", "--m", "128"], CLEAN),
        Case("args/option-equals", ["select-gemm", "--m=64"], OK, out_needles=['"family":"gemm"']),
        Case("args/option-as-value", ["select-gemm", "--m", "--n", "64"], USAGE))


# Integer options: (command prefix, option, kind, runs on a GPU when valid)
INT_OPTIONS = [
    (["select-gemm"], "--m", "dim", False), (["select-gemm"], "--n", "dim", False),
    (["select-gemm"], "--k", "kdim", False),
    (["gemm", "--m", "128", "--n", "128", "--k", "128", "--iters", "1"], "--m", "dim", True),
    (["gemm", "--m", "128", "--n", "128", "--k", "128", "--iters", "1"], "--n", "dim", True),
    (["gemm", "--m", "128", "--n", "128", "--k", "128", "--iters", "1"], "--k", "kdim", True),
    (["gemm", "--m", "128", "--n", "128", "--k", "128"], "--iters", "iters", True),
    (["quantize", "--m", "128", "--k", "128", "--iters", "1"], "--m", "qdim", True),
    (["quantize", "--m", "128", "--k", "128", "--iters", "1"], "--k", "qdim", True),
    (["quantize", "--m", "128", "--k", "128"], "--iters", "iters", True),
    (["dequantize", "--m", "128", "--k", "128", "--iters", "1"], "--m", "qdim", True),
    (["dequantize", "--m", "128", "--k", "128", "--iters", "1"], "--k", "qdim", True),
    (["dequantize", "--m", "128", "--k", "128"], "--iters", "iters", True),
    (["demo"], "--m", "qdim", None), (["demo"], "--k", "qdim", None), (["demo"], "--jobs", "jobs", None),
    (["compile-all", "--family", "quantize"], "--jobs", "jobs", None),
    (["compile-all", "--family", "quantize"], "--sample", "sample", None),
    (["tune", "--shapes", "one.csv"], "--jobs", "jobs", True),
    (["tune", "--shapes", "one.csv"], "--top-k", "topk", True),
    (["precompile", "--shapes", "one.csv"], "--jobs", "jobs", False),
    (["db", "show"], "--m", "u63", False), (["db", "show"], "--n", "u63", False), (["db", "show"], "--k", "u63", False),
    (["select-gemm", "--layout", "contiguous", "--m", "1024", "--groups", "8"], "--groups", "groups", False),
    (["select-gemm", "--layout", "masked", "--m", "256", "--groups", "8"], "--expected-m", "expected", False),
]
BAD_INTEGERS = [("empty", ""), ("word", "abc"), ("trailing-junk", "12abc"), ("float", "1.5"), ("exponent", "1e3"),
                ("hex", "0x10"), ("leading-space", " 7"), ("trailing-space", "7 "), ("20-digits", "99999999999999999999"),
                ("2^63", "9223372036854775808"), ("2^64", "18446744073709551616"),
                ("-2^63-1", "-9223372036854775809"), ("esc", "\x1b[31m5\x1b[0m"), ("fullwidth-digit", "\uff15"),
                ("negative", "-1"), ("minus-2^63", "-9223372036854775808")]
RANGES = {  # kind: (refused values, accepted values)
    "dim": (["0", "2147483648", "4294967297", "9223372036854775807"], ["1", "2147483647"]),
    "kdim": (["0", "8", "100", "2147483648", "4294967297", "4294967312"], ["16", "2147483632"]),
    "qdim": (["0", "2147483648", "4294967297"], ["1", "2147483647"]),
    "iters": (["0", "100001", "2147483648", "4294967297"], ["1", "100000"]),
    "jobs": (["0", "1025", "2147483648", "4294967297", "1099511627776"], ["1", "1024"]),
    "sample": (["1000001", "4294967297"], ["0"]),
    "topk": (["100001", "4294967297"], ["0", "100000"]),
    "u63": ([], ["0", "9223372036854775807"]),
    "groups": (["0", "65537", "2147483648", "4294967297"], ["1", "65536"]),
    "expected": (["257", "2147483648"], ["0", "256"]),  # with --m 256
}


def without(prefix, opt):
    """prefix without `opt` and its value: the option under test is given once."""
    out, i = [], 0
    while i < len(prefix):
        if prefix[i] == opt:
            i += 2
            continue
        out.append(prefix[i])
        i += 1
    return out


def integer_options():
    for prefix, opt, kind, gpu in INT_OPTIONS:
        prefix = without(prefix, opt)
        cmd = "-".join(a for a in prefix[:2] if not a.startswith("-")) if prefix[0] == "db" else prefix[0]
        tag = "int/%s%s" % (cmd, opt)
        setup = (lambda c: c.write("one.csv", ONE_SHAPE)) if "one.csv" in prefix else None
        add(Case(tag + "/missing-value", prefix + [opt], USAGE, needles=[opt], setup=setup))
        refused = [(n, v) for n, v in BAD_INTEGERS if not (kind in ("sample", "topk", "u63") and v == "0")]
        refused += [("range-" + v, v) for v in RANGES[kind][0]]
        if kind == "u63":
            refused = [(n, v) for n, v in refused if v not in RANGES["u63"][1]]
        for name, value in refused:
            add(Case("%s/%s" % (tag, name), prefix + [opt, value], USAGE, needles=[opt], setup=setup))
        for value in RANGES[kind][1]:
            if gpu is None:
                continue  # demo / compile-all would really run everything
            big = len(value) > 4 or value == "100000"
            if kind == "qdim" and value == "2147483647":
                # m*k must stay below 2^34: with the other size at 128 that is refused, and named
                # as such (not as "needs a GPU": every other check comes first).
                add(Case("%s/accepted-%s" % (tag, value), prefix + [opt, value], REFUSE, not_needles=["needs a GPU"]))
                continue
            exp = GPU if gpu else OK
            if prefix[0] == "precompile" and value == "1024":
                exp = OK
            whole_space = kind == "topk" and value == "0"
            add(Case("%s/accepted-%s" % (tag, value), prefix + [opt, value], exp, setup=setup,
                     gpu_heavy=bool(gpu and (big or whole_space)), timeout=120 if prefix[0] == "precompile" else 30))
    add(Case("int/quantize-m-times-k-over-2^34", ["quantize", "--m", "2147483647", "--k", "2147483647"], REFUSE,
             not_needles=["needs a GPU"]),
        Case("int/dequantize-m-times-k-over-2^34", ["dequantize", "--m", "2147483647", "--k", "2147483647"], REFUSE,
             not_needles=["needs a GPU"]),
        Case("int/gemm-huge-valid-dims", ["gemm", "--m", "2147483647", "--n", "2147483647", "--k", "2147483632"],
             REFUSE, gpu_heavy=True),
        Case("int/select-gemm-edges", ["select-gemm", "--m", "2147483647", "--n", "16", "--k", "16"], OK,
             out_needles=['"family":"gemm"']))


CHOICES = [  # (command prefix, option, a valid value, runs on a GPU)
    (["quantize", "--m", "128", "--k", "128", "--iters", "1"], "--input", "fp16", True),
    (["quantize", "--m", "128", "--k", "128", "--iters", "1"], "--format", "e5m2", True),
    (["quantize", "--m", "128", "--k", "128", "--iters", "1"], "--granularity", "128x128", True),
    (["quantize", "--m", "128", "--k", "128", "--iters", "1"], "--layout", "col_major_tma", True),
    (["dequantize", "--m", "128", "--k", "128", "--iters", "1"], "--format", "e5m2", True),
    (["dequantize", "--m", "128", "--k", "128", "--iters", "1"], "--output", "fp32", True),
    (["dequantize", "--m", "128", "--k", "128", "--iters", "1"], "--granularity", "tensor", True),
    (["dequantize", "--m", "128", "--k", "128", "--iters", "1"], "--layout", "col_major_tma", True),
    (["gemm", "--m", "128", "--n", "128", "--k", "128", "--iters", "1"], "--scale", "tensor", True),
    (["gemm", "--m", "128", "--n", "128", "--k", "128", "--iters", "1"], "--out", "fp32", True),
    (["gemm", "--m", "128", "--n", "128", "--k", "128", "--iters", "1"], "--a-format", "e5m2", True),
    (["gemm", "--m", "128", "--n", "128", "--k", "128", "--iters", "1"], "--b-format", "e5m2", True),
    (["gemm", "--m", "128", "--n", "128", "--k", "128", "--iters", "1"], "--scale-layout-a", "row_major", True),
    (["select-gemm"], "--scale", "rowwise", False), (["select-gemm"], "--out", "fp16", False),
    (["select-gemm", "--groups", "8"], "--layout", "masked", False),
    (["tune", "--shapes", "one.csv", "--top-k", "1"], "--op", "gemm", True),
    (["tune", "--shapes", "one.csv", "--top-k", "1"], "--scale", "tensor", True),
    (["tune", "--shapes", "one.csv", "--top-k", "1"], "--out", "fp32", True),
    (["precompile", "--shapes", "one.csv"], "--op", "gemm", False),
    (["precompile", "--shapes", "one.csv"], "--scale", "tensor", False),
    (["precompile", "--shapes", "one.csv"], "--out", "fp16", False),
    (["db", "show"], "--op", "gemm", False), (["db", "prune", "--space-hash", "abc"], "--op", "gemm", False),
]
BAD_CHOICES = [("empty", ""), ("unknown", "bogus"), ("uppercase", None), ("trailing-space", None),
               ("esc", ESC), ("comma-list", None), ("non-utf8", b"\xff\xfe")]


def choice_options():
    for prefix, opt, good, gpu in CHOICES:
        cmd = "db-" + prefix[1] if prefix[0] == "db" else prefix[0]
        tag = "choice/%s%s" % (cmd, opt)
        setup = (lambda c: c.write("one.csv", ONE_SHAPE)) if "one.csv" in prefix else None
        add(Case(tag + "/missing-value", prefix + [opt], USAGE, needles=[opt], setup=setup))
        for name, value in BAD_CHOICES:
            if value is None:
                value = {"uppercase": good.upper(), "trailing-space": good + " ", "comma-list": good + "," + good}[name]
            if opt == "--family" and name == "comma-list":
                continue  # --family takes a list
            exp = USAGE
            add(Case("%s/%s" % (tag, name), prefix + [opt, value], exp, setup=setup))
        exp = GPU if gpu else OK
        if prefix[0] == "db" and prefix[1] == "prune":
            exp = OK
        add(Case("%s/valid" % tag, prefix + [opt, good], exp, setup=setup, timeout=120))
    for cmd in ("list", "compile-all"):
        for name, value in [("empty", ""), ("comma", ","), ("unknown", "bogus"), ("one-unknown", "quantize,bogus"),
                            ("esc", ESC), ("non-utf8", b"\xff"), ("missing-value", None)]:
            add(Case("choice/%s--family/%s" % (cmd, name), [cmd, "--family"] + ([value] if value is not None else []),
                     USAGE, needles=["--family"]))
    add(Case("choice/list--family/valid", ["list", "--family", "dequantize"], OK, out_needles=["dequantize"]),
        Case("choice/list--family/two", ["list", "--family", "quantize,dequantize"], OK))
    add(Case("choice/list-esc-escaped", ["list", "--family", "x\x1b[31mred\x07"], USAGE, needles=["\\x1b[31mred\\x07"]))


SPEC_JSON = [  # (name, inline spec, expectation)
    ("empty-object", "{}", ERROR), ("array", "[]", ERROR), ("array-of-numbers", "[1,2]", ERROR),
    ("truncated", "{", ERROR), ("truncated-string", '{"family":"quan', ERROR),
    ("unknown-family", '{"family":"conv","problem":{},"config":{}}', ERROR),
    ("no-problem", '{"family":"quantize"}', ERROR),
    ("bad-config-value", QSPEC.replace('"vec":8', '"vec":3'), ERROR),
    ("huge-int", QSPEC.replace('"vec":8', '"vec":99999999999999999999'), ERROR),
    ("2^63", QSPEC.replace('"vec":8', '"vec":9223372036854775808'), ERROR),
    ("negative", QSPEC.replace('"vec":8', '"vec":-8'), ERROR),
    ("string-int", QSPEC.replace('"vec":8', '"vec":"8"'), ERROR),
    ("float", QSPEC.replace('"vec":8', '"vec":8.5'), ERROR),
    ("bool", QSPEC.replace('"vec":8', '"vec":true'), ERROR),
    ("null", QSPEC.replace('"vec":8', '"vec":null'), ERROR),
    ("nested-object-value", QSPEC.replace('"vec":8', '"vec":{"a":1}'), ERROR),
    ("unknown-config-key", QSPEC.replace('"vec":8', '"vec":8,"vecc":8'), ERROR),
    ("unknown-problem-key", QSPEC.replace('"transpose":0', '"transpose":0,"bias":1'), ERROR),
    ("unknown-top-level-key", QSPEC[:-1] + ',"confg":{}}', ERROR),
    ("missing-config-key", QSPEC.replace('"vec":8,', ''), ERROR),
    ("esc-in-json-string", '{"family":"\\u001b[31mquantize","problem":{},"config":{}}', ERROR),
    ("nul-in-json-string", '{"family":"quant\\u0000ize","problem":{},"config":{}}', ERROR),
    ("deep-nesting-array", "[" * 100000, ERROR),
    ("deep-nesting-object", '{"a":' * 20000, ERROR),
    ("long-string", '{"family":"' + "x" * 100000 + '"}', ERROR),
    ("trailing-garbage", QSPEC + "x", ERROR),
    ("two-objects", QSPEC + QSPEC, ERROR),
    ("leading-whitespace", "  \n\t" + QSPEC, OK),
]


def file_kinds(opt_name: str):
    """(name, setup returning the path argument, expectation, needles): every kind of bad input
    file. The path is relative to the working folder where it can be. Needles None: the file was
    read and its content refused (the message need not name the option)."""
    return [
        ("directory", lambda c: (c.mkdir("in"), "in")[1], ERROR, ["directory"]),
        ("fifo", lambda c: (c.fifo("in"), "in")[1], ERROR, ["FIFO"]),
        ("empty-file", lambda c: (c.write("in", b""), "in")[1], ERROR, None),
        ("binary-file", lambda c: (c.write("in", bytes(range(256)) * 64), "in")[1], ERROR, None),
        ("sparse-100MB", lambda c: (c.sparse("in"), "in")[1], ERROR, None),
        ("missing-file", lambda c: "absent", ERROR, ["absent"]),
        ("missing-folder", lambda c: "no/such/folder/in", ERROR, []),
        ("dev-null", lambda c: "/dev/null", ERROR, []),
        ("dev-zero", lambda c: "/dev/zero", ERROR, []),
        ("dev-stdin", lambda c: "/dev/stdin", ERROR, []),
        ("proc-file", lambda c: "/proc/self/status", ERROR, None),
        ("dash", lambda c: "-", ERROR, []),
        ("dangling-symlink", lambda c: (c.symlink("nowhere", "in"), "in")[1], ERROR, []),
        ("symlink-loop", lambda c: (c.symlink("in", "in"), "in")[1], ERROR, []),
        ("symlink-to-fifo", lambda c: (c.fifo("f"), c.symlink("f", "in"), "in")[2], ERROR, ["FIFO"]),
        ("path-through-file", lambda c: (c.write("afile", "x"), "afile/in")[1], ERROR, []),
        ("name-too-long", lambda c: "x" * 300, ERROR, []),
        ("path-too-long", lambda c: "/".join(["d" * 200] * 30), ERROR, []),
        ("esc-in-name", lambda c: "in" + ESC, ERROR, ["\\x1b"]),
        ("unreadable", lambda c: (c.write("in", "x"), os.chmod(c.p("in"), 0), "in")[2], ERROR, []),
    ]


def spec_inputs():
    for cmd in ("emit", "compile"):
        add(Case("spec/%s-missing" % cmd, [cmd], USAGE, needles=["--spec"]),
            Case("spec/%s-missing-value" % cmd, [cmd, "--spec"], USAGE, needles=["--spec"]),
            Case("spec/%s-empty" % cmd, [cmd, "--spec", ""], ERROR, needles=["--spec"]),
            Case("spec/%s-null-word" % cmd, [cmd, "--spec", "null"], ERROR),
            Case("spec/%s-esc-value" % cmd, [cmd, "--spec", "no\x1b]0;title\x07such"], ERROR, needles=["\\x1b"]),
            Case("spec/%s-valid" % cmd, [cmd, "--spec", QSPEC], OK, timeout=120),
            Case("spec/%s-valid-file" % cmd, [cmd, "--spec", "spec.json"], OK,
                 setup=lambda c: c.write("spec.json", QSPEC + "\n"), timeout=120),
            Case("spec/%s-file-with-bom" % cmd, [cmd, "--spec", "spec.json"], CLEAN,
                 setup=lambda c: c.write("spec.json", b"\xef\xbb\xbf" + QSPEC.encode()), timeout=120),
            Case("spec/%s-file-over-1MiB" % cmd, [cmd, "--spec", "spec.json"], ERROR,
                 setup=lambda c: c.write("spec.json", QSPEC + " " * (1 << 20))),
            Case("spec/%s-file-deep-nesting" % cmd, [cmd, "--spec", "spec.json"], ERROR,
                 setup=lambda c: c.write("spec.json", "[" * 500000)))
        for name, text, exp in SPEC_JSON:
            add(Case("spec/%s-json-%s" % (cmd, name), [cmd, "--spec", text], exp, timeout=120,
                     slow=(exp == OK and cmd == "compile")))
        for name, make, exp, needles in file_kinds("--spec"):
            skip = root_skip("an unreadable file") if name == "unreadable" else None
            add(Case("spec/%s-file-%s" % (cmd, name), (lambda mk, cm: lambda c: [cm, "--spec", mk(c)])(make, cmd),
                     exp, needles=["--spec"] + needles if needles is not None else [], skip=skip))
    # A spec that names what it holds: the message must escape it.
    add(Case("spec/emit-esc-family-escaped", ["emit", "--spec", '{"family":"\\u001b[31mx","problem":{},"config":{}}'],
             ERROR, needles=["\\x1b"]))


def output_paths():
    """compile --cubin / --ptx and db export --file: where the output cannot go."""
    elf = lambda name: lambda c, r: [] if r.rc != 0 or open(c.p(name), "rb").read(4) == b"\x7fELF" else [
        (OTHER, "%s is not an ELF cubin" % name)]
    for opt in ("--cubin", "--ptx"):
        base = ["compile", "--spec", QSPEC, opt]
        t = "out/compile%s" % opt
        add(Case(t + "/directory", lambda c, b=base: b + [c.mkdir("o")], ERROR, needles=["directory"]),
            Case(t + "/fifo", lambda c, b=base: b + [c.fifo("o")], ERROR, needles=["FIFO"]),
            Case(t + "/symlink-to-fifo", lambda c, b=base: (c.fifo("f"), b + [c.symlink("f", "o")])[1], ERROR),
            Case(t + "/missing-folder", base + ["no/such/dir/o"], ERROR, needles=["no/such/dir"]),
            Case(t + "/trailing-slash", base + ["newdir/"], ERROR),
            Case(t + "/path-through-file", lambda c, b=base: (c.write("afile", "x"), b + ["afile/o"])[1], ERROR),
            Case(t + "/dev-full", base + ["/dev/full"], REFUSE),
            Case(t + "/dev-null", base + ["/dev/null"], CLEAN),
            Case(t + "/empty", base + [""], CLEAN),
            Case(t + "/missing-value", base, USAGE),
            Case(t + "/name-too-long", base + ["o" * 300], ERROR),
            Case(t + "/proc", base + ["/proc/fp8jit-catalogue.out"], ERROR),
            Case(t + "/read-only-folder", lambda c, b=base: (os.chmod(c.mkdir("ro"), 0o555), b + ["ro/o"])[1], ERROR,
                 skip=root_skip("a read-only folder")),
            Case(t + "/esc-in-name", base + ["o" + ESC], OK, writes=["o" + ESC], timeout=120),
            Case(t + "/existing-file-replaced", base + ["o"], OK, writes=["o"], setup=lambda c: c.write("o", "old"),
                 check=(elf("o") if opt == "--cubin" else None), timeout=120),
            Case(t + "/dangling-symlink", lambda c, b=base: b + [c.symlink("target", "o")], CLEAN,
                 writes=["o", "target"], timeout=120),
            Case(t + "/file-size-limit", base + ["o"], ERROR, limits={"f": 8}, timeout=120))
    add(Case("out/compile-same-path-twice", ["compile", "--spec", QSPEC, "--cubin", "o", "--ptx", "o"], REFUSE),
        Case("out/compile-ptx-bad-cubin-not-written",
             lambda c: ["compile", "--spec", QSPEC, "--cubin", "k.cubin", "--ptx", c.mkdir("taken.ptx")], ERROR,
             needles=["taken.ptx"]),
        Case("out/compile-both-ok", ["compile", "--spec", QSPEC, "--cubin", "k.cubin", "--ptx", "k.ptx"], OK,
             writes=["k.cubin", "k.ptx"], check=elf("k.cubin"), timeout=120))

    def with_db(c):
        c.import_rows([make_row(m) for m in range(1, 11)])

    t = "out/db-export--file"
    base = ["db", "export", "--file"]
    add(Case(t + "/directory", lambda c: base + [c.mkdir("o")], ERROR, setup=with_db, needles=["directory"]),
        Case(t + "/fifo", lambda c: base + [c.fifo("o")], ERROR, setup=with_db, needles=["FIFO"]),
        Case(t + "/missing-folder", base + ["no/such/dir/o.json"], ERROR, setup=with_db),
        Case(t + "/dev-full", base + ["/dev/full"], REFUSE, setup=with_db),
        Case(t + "/empty", base + [""], CLEAN, setup=with_db),
        Case(t + "/name-too-long", base + ["o" * 300], ERROR, setup=with_db),
        Case(t + "/esc-in-name", base + ["o" + ESC], OK, setup=with_db, writes=["o" + ESC]),
        Case(t + "/existing-file-replaced", base + ["o.json"], OK, writes=["o.json"],
             setup=lambda c: (with_db(c), c.write("o.json", "old")),
             check=lambda c, r: [] if len(json.load(open(c.p("o.json")))["rows"]) == 10 else [
                 (OTHER, "o.json does not hold the 10 rows")]),
        Case(t + "/file-size-limit", base + ["o.json"], ERROR, setup=with_db, limits={"f": 1}, root_clean=False),
        Case(t + "/read-only-folder", lambda c: (os.chmod(c.mkdir("ro"), 0o555), base + ["ro/o.json"])[1], ERROR,
             setup=with_db, skip=root_skip("a read-only folder")),
        Case("out/db-export-stdout-dev-full", ["db", "export"], REFUSE, setup=with_db, stdout_to="/dev/full"),
        Case("out/emit-stdout-dev-full", ["emit", "--spec", QSPEC], REFUSE, stdout_to="/dev/full"),
        Case("out/list-json-stdout-dev-full", ["list", "--json"], REFUSE, stdout_to="/dev/full"),
        Case("out/list-specs-stdout-dev-full", ["list", "--specs"], REFUSE, stdout_to="/dev/full"),
        Case("out/select-gemm-stdout-dev-full", ["select-gemm"], REFUSE, stdout_to="/dev/full"))


SHAPES_CONTENT = [  # (name, content, expectation, needles)
    ("header-only", "m,n,k\n", ERROR, ["no m,n,k rows"]),
    ("comment-only", "# nothing\n", ERROR, ["no m,n,k rows"]),
    ("two-fields", "m,n,k\n64,2112\n", ERROR, [":2", "fields"]),
    ("four-fields", "64,2112,7168,5\n", ERROR, [":1", "fields"]),
    ("word", "m,n,k\n64,x,7168\n", ERROR, [":2"]),
    ("zero", "0,16,16\n", ERROR, [":1"]),
    ("negative", "-64,2112,7168\n", ERROR, [":1"]),
    ("20-digits", "99999999999999999999,16,16\n", ERROR, [":1"]),
    ("2^31", "2147483648,16,16\n", ERROR, [":1"]),
    ("4294967297", "16,4294967297,16\n", ERROR, [":1"]),
    ("k-not-multiple-of-16", "64,2112,100\n", ERROR, [":1", "multiple of 16"]),
    ("float", "1.5,16,16\n", ERROR, [":1"]),
    ("hex", "0x40,16,16\n", ERROR, [":1"]),
    ("semicolons", "64;16;16\n", ERROR, [":1"]),
    ("commas-only", ",,\n", ERROR, [":1"]),
    ("esc", "\x1b[31m64,16,16\n", ERROR, ["\\x1b"]),
    ("nul-byte", "64,16\x00,16\n", ERROR, [":1"]),
    ("long-line", "1" * (2 << 20) + ",16,16\n", ERROR, [":1"]),
    ("bad-row-after-good", "64,2112,7168\n" * 50 + "64,2112\n", ERROR, [":51"]),
    ("crlf-and-spaces", "m,n,k\r\n 128 , 4096 ,7168 \r\n", OK, []),
    ("trailing-comma", "128,4096,7168,\n", CLEAN, []),
]


def arch_option():
    """compile --arch: another GPU for the elementwise families; GEMMs, older GPUs and names that are
    no architecture refused, nothing written."""
    base = ["compile", "--spec", QSPEC, "--cubin", "k.cubin", "--arch"]
    add(Case("arch/quantize-sm_89", base + ["sm_89"], OK, writes=["k.cubin"], out_needles=["sm_89 cubin"],
             timeout=120),
        Case("arch/quantize-sm_120", base + ["sm_120"], OK, writes=["k.cubin"], out_needles=["sm_120 cubin"],
             timeout=120),
        Case("arch/gemm-sm_89", lambda c: ["compile", "--spec", json.dumps(GEMM_SPEC), "--cubin", "k.cubin", "--arch",
                                           "sm_89"], ERROR, needles=["need sm_90a"]),
        Case("arch/quantize-sm_80", base + ["sm_80"], ERROR, needles=["sm_89 or later"]),
        Case("arch/missing-value", ["compile", "--spec", QSPEC, "--arch"], USAGE, needles=["--arch"]))
    for name, value in [("empty", ""), ("unknown", "bogus"), ("ada-arch-specific", "sm_89a"), ("unsupported", "sm_999"),
                        ("compute", "compute_89"), ("uppercase", "SM_89"), ("esc", "sm_" + ESC),
                        ("huge", "sm_" + "9" * 100000), ("huge-number", "sm_" + "8" * 40)]:
        add(Case("arch/" + name, base + [value], ERROR, needles=["arch '"]))


def shapes_inputs():
    for cmd, extra in (("bench", ["--dry-run"]), ("tune", []), ("precompile", [])):
        for name, text, exp, needles in SHAPES_CONTENT:
            e = exp
            if exp == OK and cmd == "tune":
                e = GPU
            add(Case("shapes/%s-%s" % (cmd, name), [cmd, "--shapes", "s.csv"] + extra, e,
                     needles=(["s.csv"] + needles) if exp == ERROR else [],
                     setup=(lambda t: lambda c: c.write("s.csv", t))(text), timeout=120,
                     needs_bench=cmd == "bench" and exp != ERROR))
        for name, make, exp, needles in file_kinds("--shapes"):
            skip = root_skip("an unreadable file") if name == "unreadable" else None
            add(Case("shapes/%s-file-%s" % (cmd, name), (lambda mk, cm, ex: lambda c: [cm, "--shapes", mk(c)] + ex)(
                make, cmd, extra), exp, needles=["--shapes"] + needles if needles is not None else [], skip=skip))
        add(Case("shapes/%s-empty-path" % cmd, [cmd, "--shapes", ""] + extra, ERROR),
            Case("shapes/%s-missing-value" % cmd, [cmd] + extra + ["--shapes"], USAGE),
            Case("shapes/%s-option-as-value" % cmd, [cmd, "--shapes", "--jobs", "2"] + extra, REFUSE),
            Case("shapes/%s-suite-and-shapes" % cmd, [cmd, "--suite", "deepseek-v3", "--shapes", "x.csv"] + extra, USAGE,
                 needles=["--suite", "--shapes"]),
            Case("shapes/%s-neither" % cmd, [cmd] + extra, ERROR, needles=["--suite/--shapes"]),
            Case("shapes/%s-suite-unknown" % cmd, [cmd, "--suite", "bogus"] + extra, ERROR, needles=["bogus"]),
            Case("shapes/%s-suite-empty" % cmd, [cmd, "--suite", ""] + extra, ERROR),
            Case("shapes/%s-suite-path" % cmd, [cmd, "--suite", "../shapes/deepseek_v3"] + extra, ERROR),
            Case("shapes/%s-suite-absolute" % cmd, [cmd, "--suite", "/etc/passwd"] + extra, ERROR),
            Case("shapes/%s-suite-esc" % cmd, [cmd, "--suite", ESC] + extra, ERROR, needles=["\\x1b"]))
    add(Case("shapes/bench-100k-rows", ["bench", "--shapes", "s.csv", "--dry-run"], OK, needs_bench=True,
             setup=lambda c: c.write("s.csv", "m,n,k\n" + "64,2112,7168\n" * 100000)),
        Case("shapes/bench-suite-dry-run", ["bench", "--suite", "deepseek-v3", "--dry-run"], OK, needs_bench=True),
        Case("shapes/precompile-suite-square", ["precompile", "--suite", "square"], OK, timeout=300, slow=True),
        Case("shapes/tune-suite", ["tune", "--suite", "deepseek-v3", "--top-k", "1"], GPU, gpu_heavy=True))


def gpu_commands():
    """Without a GPU: every check first, then one line "needs a GPU" and nothing written."""
    one = lambda c: c.write("one.csv", ONE_SHAPE)
    add(Case("gpu/quantize-small", ["quantize", "--m", "128", "--k", "128", "--iters", "1"], GPU),
        Case("gpu/quantize-defaults", ["quantize", "--iters", "1"], GPU, timeout=120),
        Case("gpu/quantize-ragged", ["quantize", "--m", "3", "--k", "129", "--iters", "1", "--transpose"], GPU),
        Case("gpu/quantize-pow2-e5m2", ["quantize", "--m", "1", "--k", "1", "--iters", "1", "--pow2", "--format",
                                        "e5m2", "--granularity", "tensor"], GPU),
        Case("gpu/dequantize-small", ["dequantize", "--m", "128", "--k", "128", "--iters", "1"], GPU),
        Case("gpu/dequantize-ragged", ["dequantize", "--m", "3", "--k", "129", "--iters", "1"], GPU),
        Case("gpu/gemm-small", ["gemm", "--m", "128", "--n", "128", "--k", "128", "--iters", "1"], GPU, timeout=300),
        Case("gpu/gemm-config", ["gemm", "--m", "128", "--n", "256", "--k", "256", "--iters", "1", "--config",
                                 '{"block_n":128,"stages":4}'], GPU, timeout=300),
        Case("gpu/tune-one-shape", ["tune", "--shapes", "one.csv", "--top-k", "1", "--jobs", "2"], GPU, setup=one,
             timeout=300),
        Case("gpu/bench-one-shape", lambda c: ["bench", "--shapes", "one.csv", "--providers", "fp8jit", "--out",
                                               os.path.join(c.other, "bench-out")], GPU, setup=one, timeout=300),
        Case("gpu/bench-out-in-cwd-not-created", ["bench", "--shapes", "one.csv", "--out", "results"], GPU,
             setup=one, gpu_heavy=True),
        Case("gpu/bench-default-out-not-created", ["bench", "--shapes", "one.csv"], GPU, setup=one, gpu_heavy=True),
        Case("gpu/demo", ["demo", "--jobs", "2"], OK, timeout=600, slow=True),
        # Per row with a transposed output (qt scaled per row of the transpose).
        Case("gpu/quantize-row-transpose", ["quantize", "--granularity", "row", "--transpose", "--m", "256", "--k",
                                            "512", "--iters", "1"], GPU))
    # The combinations each GPU command refuses before it asks for a GPU.
    add(Case("gpu/gemm-e5m2-e5m2", ["gemm", "--a-format", "e5m2", "--b-format", "e5m2"], ERROR,
             needles=["e5m2"]),
        Case("gpu/gemm-block-fast-accum", ["gemm", "--scale", "block", "--fast-accum"], ERROR, needles=["--fast-accum"]),
        Case("gpu/gemm-group-fast-accum", ["gemm", "--scale", "group", "--fast-accum"], ERROR, needles=["--fast-accum"]),
        Case("gpu/select-gemm-group-fast-accum", ["select-gemm", "--scale", "group", "--fast-accum"], ERROR),
        Case("gpu/select-gemm-tensor-fast-accum", ["select-gemm", "--scale", "tensor", "--fast-accum"], OK),
        Case("gpu/tune-block-fast-accum", ["tune", "--shapes", "one.csv", "--fast-accum"], ERROR, setup=one),
        Case("gpu/precompile-block-fast-accum", ["precompile", "--shapes", "one.csv", "--fast-accum"], ERROR, setup=one),
        # Grouped GEMMs have no bias; a model's GEMMs are derived without one.
        Case("gpu/gemm-masked-bias", ["gemm", "--layout", "masked", "--groups", "4", "--m", "128", "--bias"], USAGE,
             needles=["--bias"]),
        Case("gpu/select-gemm-masked-bias", ["select-gemm", "--layout", "masked", "--groups", "4", "--m", "128",
                                             "--bias"], USAGE, needles=["--bias"]),
        Case("gpu/select-gemm-bias", ["select-gemm", "--scale", "rowwise", "--bias"], OK),
        Case("gpu/tune-grouped-bias", ["tune", "--shapes", "moe.csv", "--bias"], ERROR, needles=["--bias"],
             setup=lambda c: c.write("moe.csv", "layout,groups,m,n,k,expected_m\nmasked,8,128,4096,7168,16\n")),
        Case("gpu/precompile-model-bias", ["precompile", "--model", "config.json", "--bias"], ERROR, needles=["--bias"],
             setup=lambda c: c.write("config.json", "{}")),
        Case("gpu/tune-bad-shapes-first", ["tune", "--shapes", "bad.csv"], ERROR, needles=["fields"],
             setup=lambda c: c.write("bad.csv", "64,2112\n")),
        Case("gpu/bench-bad-shapes-first", ["bench", "--shapes", "bad.csv"], ERROR, needles=["fields"],
             setup=lambda c: c.write("bad.csv", "64,2112\n")),
        Case("gpu/tune-db-directory", lambda c: ["tune", "--shapes", "one.csv", "--db", c.mkdir("d")], ERROR,
             setup=one, needles=["directory"]),
        Case("gpu/tune-db-fifo", lambda c: ["tune", "--shapes", "one.csv", "--db", c.fifo("d")], ERROR, setup=one,
             needles=["FIFO"]),
        Case("gpu/precompile-db-directory", lambda c: ["precompile", "--shapes", "one.csv", "--db", c.mkdir("d")],
             REFUSE, setup=one),
        Case("gpu/precompile-db-fifo", lambda c: ["precompile", "--shapes", "one.csv", "--db", c.fifo("d")], REFUSE,
             setup=one),
        Case("gpu/precompile-env-db-directory", ["precompile", "--shapes", "one.csv"], REFUSE,
             setup=lambda c: (one(c), c.mkdir("d")), env=lambda c: {"FP8JIT_DB": c.p("d")}),
        Case("gpu/tune-env-db-fifo", ["tune", "--shapes", "one.csv"], REFUSE,
             setup=lambda c: (one(c), c.fifo("d")), env=lambda c: {"FP8JIT_DB": c.p("d")}),
        Case("gpu/tune-db-missing-folder-not-created", ["tune", "--shapes", "one.csv", "--db", "no/such/db.sqlite"],
             GPU, setup=one, gpu_heavy=True))
    for name, value, exp in [("empty", "", GPU), ("empty-object", "{}", GPU), ("array", "[]", ERROR),
                             ("truncated", "{", ERROR), ("unknown-key", '{"tile":1}', ERROR),
                             ("string-value", '{"block_n":"x"}', ERROR), ("float-value", '{"block_n":1.5}', ERROR),
                             ("huge-value", '{"block_n":99999999999999999999}', ERROR),
                             ("2^63-value", '{"block_n":9223372036854775808}', ERROR),
                             ("invalid-combination", '{"block_n":7}', REFUSE),
                             ("negative", '{"stages":-1}', REFUSE),
                             ("problem-key", '{"scale":"tensor"}', ERROR),
                             ("esc-key", '{"\\u001b[31m":1}', ERROR), ("deep-nesting", "[" * 100000, ERROR),
                             ("raw-esc", ESC, ERROR)]:
        add(Case("gpu/gemm-config-%s" % name, ["gemm", "--m", "128", "--n", "128", "--k", "128", "--iters", "1",
                                                "--config", value], exp, timeout=300, root_clean=exp != REFUSE))
    # bench's own options (--dry-run: no GPU needed)
    for opt, values in (("--scale", [("empty", ""), ("unknown", "bogus"), ("one-unknown", "block,bogus"),
                                     ("commas", ",,"), ("esc", ESC), ("fast-only", "_fast")]),
                        ("--providers", [("empty", ""), ("unknown", "bogus"), ("one-unknown", "fp8jit,bogus"),
                                         ("commas", ","), ("esc", ESC)])):
        for name, value in values:
            add(Case("bench%s/%s" % (opt, name), ["bench", "--suite", "deepseek-v3", "--dry-run", opt, value], REFUSE,
                     needles=[opt]))
        add(Case("bench%s/missing-value" % opt, ["bench", "--suite", "deepseek-v3", "--dry-run", opt], USAGE))
    bo = ["bench", "--suite", "deepseek-v3", "--dry-run", "--out"]
    add(Case("bench--out/file", bo + ["f"], ERROR, setup=lambda c: c.write("f", "x"), needles=["--out"],
             needs_bench=True),
        Case("bench--out/fifo", lambda c: bo + [c.fifo("f")], ERROR, needles=["--out"]),
        Case("bench--out/dev-null", bo + ["/dev/null"], ERROR, needles=["--out"]),
        Case("bench--out/directory", lambda c: bo + [c.mkdir("d")], OK, needs_bench=True),
        Case("bench--out/missing-folder", bo + ["no/such/dir"], OK, needs_bench=True),
        Case("bench--out/empty", bo + [""], CLEAN),
        Case("bench--out/esc", bo + ["r" + ESC], OK, needs_bench=True),
        Case("bench--out/quote", bo + ["it's here"], OK, out_needles=["it'\\''s here"], needs_bench=True))


def db_paths():
    subs = list(DB_SUBS)

    def args_for(sub, path):
        a = ["db", sub, "--db", path]
        if sub == "import":
            a += ["--file", "rows.json"]
        return a

    rows_json = rows_file("rows.json", [make_row(m) for m in range(1, 4)])

    def case(name, sub, make, exp, needles=(), skip=None, check=None, root_clean=True):
        def setup(c):
            rows_json(c)

        add(Case("db-path/%s/%s" % (name, sub), (lambda mk, s: lambda c: args_for(s, mk(c)))(make, sub), exp,
                 needles=needles, setup=setup, skip=skip, check=check, root_clean=root_clean))

    for sub in subs:
        read_only = sub in ("list", "show", "prune", "rebuild")
        case("directory", sub, lambda c: c.mkdir("dbdir"), ERROR, ["directory"])
        case("fifo", sub, lambda c: c.fifo("db.sqlite"), ERROR, ["FIFO"])
        case("symlink-to-fifo", sub, lambda c: (c.fifo("f"), c.symlink("f", "db.sqlite"))[1], ERROR, ["FIFO"])
        case("symlink-to-directory", sub, lambda c: (c.mkdir("d"), c.symlink("d", "db.sqlite"))[1], ERROR)
        case("dev-null", sub, lambda c: "/dev/null", ERROR)
        case("proc-file", sub, lambda c: "/proc/version", REFUSE)
        case("symlink-loop", sub, lambda c: c.symlink("db.sqlite", "db.sqlite"), REFUSE if not read_only else CLEAN)
        if sub != "import":  # (import creates it: see esc-in-name below)
            case("esc-in-name-missing", sub, lambda c: "db" + ESC + ".sqlite", ERROR if sub == "export" else OK)
        # A missing folder: read-only commands say there is nothing yet and create nothing.
        if read_only:
            case("missing-folder", sub, lambda c: "no/such/dir/db.sqlite", OK, ["no tuning database"])
            case("proc-folder", sub, lambda c: "/proc/fp8jit-catalogue/db.sqlite", OK, ["no tuning database"])
            case("path-through-file", sub, lambda c: (c.write("afile", "x"), "afile/db.sqlite")[1], CLEAN)
            case("name-too-long", sub, lambda c: "d" * 300, CLEAN)
            case("dangling-symlink", sub, lambda c: c.symlink("target.sqlite", "db.sqlite"), CLEAN)
        elif sub == "export":
            case("missing-folder", sub, lambda c: "no/such/dir/db.sqlite", ERROR, ["nothing to export"])
            case("proc-folder", sub, lambda c: "/proc/fp8jit-catalogue/db.sqlite", ERROR)
            case("path-through-file", sub, lambda c: (c.write("afile", "x"), "afile/db.sqlite")[1], ERROR)
            case("name-too-long", sub, lambda c: "d" * 300, ERROR)
            case("dangling-symlink", sub, lambda c: c.symlink("target.sqlite", "db.sqlite"), REFUSE)
        else:  # import creates the database, and its folder
            case("missing-folder", sub, lambda c: os.path.join(c.other, "no/such/dir/db.sqlite"), OK,
                 check=lambda c, r: [] if os.path.isfile(os.path.join(c.other, "no/such/dir/db.sqlite")) else [
                     (OTHER, "the database was not created")])
            case("proc-folder", sub, lambda c: "/proc/fp8jit-catalogue/db.sqlite", ERROR)
            case("proc-root", sub, lambda c: "/proc/fp8jit-catalogue.sqlite", ERROR)
            case("path-through-file", sub, lambda c: (c.write("afile", "x"), "afile/db.sqlite")[1], ERROR)
            case("name-too-long", sub, lambda c: "d" * 300, ERROR)
            case("esc-in-name", sub, lambda c: os.path.join(c.other, "db" + ESC + ".sqlite"), OK)
        case("read-only-file", sub, lambda c: (fp8jit_db_with(c, c.p("ro.sqlite")), os.chmod(c.p("ro.sqlite"), 0o444),
                                               "ro.sqlite")[2],
             CLEAN if sub in ("list", "show", "export") else ERROR, skip=root_skip("a read-only database file"))
        case("read-only-folder", sub, lambda c: (c.mkdir("ro"), fp8jit_db_with(c, c.p("ro/db.sqlite")),
                                                 os.chmod(c.p("ro"), 0o555), "ro/db.sqlite")[3],
             CLEAN if sub in ("list", "show", "export") else ERROR, skip=root_skip("a read-only folder"))
        case("read-only-folder-missing-file", sub, lambda c: (os.chmod(c.mkdir("ro"), 0o555), "ro/db.sqlite")[1],
             OK if read_only else ERROR, skip=root_skip("a read-only folder"))
        # Someone else's file: refused, byte for byte unchanged, nothing created beside it.
        for kind, make in FOREIGN.items():
            case("foreign-%s" % kind, sub, (lambda mk: lambda c: (mk(c.p("their.db")), "their.db")[1])(make), ERROR,
                 ["not an fp8jit tuning database"])
        case("foreign-extra-table", sub, lambda c: (fp8jit_db_with(c, c.p("their.db")),
                                                    sqlite_file(c.p("their.db"), ["CREATE TABLE notes (t TEXT)"]),
                                                    "their.db")[2], ERROR, ["not an fp8jit tuning database"])
        case("newer-schema", sub, lambda c: (fp8jit_db_with(c, c.p("new.db")), sqlite_file(c.p("new.db"), [
            "UPDATE meta SET value = 99 WHERE key = 'schema_version'"]), "new.db")[2], ERROR, ["newer"])
        if sub != "rebuild":  # damage is refused, left alone and named (rebuild: db-rebuild/ below)
            case("damaged", sub, lambda c: (fp8jit_db_with(c, c.p("bad.db")), damage(c.p("bad.db")), "bad.db")[2],
                 ERROR, ["damaged"])
            case("truncated", sub, lambda c: (fp8jit_db_with(c, c.p("cut.db")),
                                              os.truncate(c.p("cut.db"), 4096), "cut.db")[2], ERROR)
            case("sqlite-header-then-garbage", sub,
                 lambda c: (c.write("bad.db", b"SQLite format 3\x00" + bytes((i * 7) & 0xff for i in range(8192))),
                            "bad.db")[1], ERROR)
    # With FP8JIT_DB instead of --db.
    for kind, make in FOREIGN.items():
        for sub in subs:
            add(Case("db-env/foreign-%s/%s" % (kind, sub), ["db", sub] + (["--file", "rows.json"] if sub == "import"
                                                                          else []), ERROR,
                     needles=["not an fp8jit tuning database"],
                     setup=(lambda mk: lambda c: (rows_json(c), mk(c.p("their.db"))))(make),
                     env=lambda c: {"FP8JIT_DB": c.p("their.db")}))
        for cmd in (["precompile", "--shapes", "one.csv"], ["tune", "--shapes", "one.csv"]):
            add(Case("db-env/foreign-%s/%s" % (kind, cmd[0]), cmd + ["--db", "their.db"],
                     CLEAN if cmd[0] == "precompile" else REFUSE,
                     setup=(lambda mk: lambda c: (c.write("one.csv", ONE_SHAPE), mk(c.p("their.db"))))(make),
                     timeout=120))
    # Rebuild moves a damaged database aside (outside the working folder here) and keeps what it can.
    for name, hurt in (("damaged", lambda p: damage(p)), ("truncated", lambda p: os.truncate(p, 4096)),
                       ("garbage", None)):
        def setup(c, hurt=hurt):
            p = os.path.join(c.other, "bad.db")
            if hurt:
                fp8jit_db_with(c, p)
                hurt(p)
            else:
                c.write("bad.db", b"SQLite format 3\x00" + bytes((i * 7) & 0xff for i in range(8192)), where=c.other)

        def after(c, r):
            if r.rc != 0:
                return []
            moved = [n for n in os.listdir(c.other) if ".corrupt-" in n]
            f = []
            if len(moved) != 1:
                f.append((OTHER, "expected one moved-aside file, found %s" % moved))
            r2 = c.run(["db", "list", "--db", os.path.join(c.other, "bad.db")])
            if r2.rc != 0:
                f.append((OTHER, "`db list` after rebuild: %s: %s" % (r2.status(), brief(r2.err))))
            return f

        add(Case("db-rebuild/%s" % name, lambda c: ["db", "rebuild", "--db", os.path.join(c.other, "bad.db")], OK,
                 setup=setup, check=after))
    add(Case("db-path/empty-value/list", ["db", "list", "--db", ""], CLEAN),
        Case("db-path/empty-value/import", ["db", "import", "--db", "", "--file", "rows.json"], CLEAN, setup=rows_json),
        Case("db-path/empty-file/list", lambda c: ["db", "list", "--db", c.write("e.db", b"", where=c.other)], CLEAN),
        Case("db-path/empty-env/list", ["db", "list"], CLEAN, env={"FP8JIT_DB": ""}))


def db_options():
    def with_rows(c, n=10):
        c.import_rows([make_row(m) for m in range(1, n + 1)])

    for sub in ("list", "show"):
        for name, value, exp in [("empty", "", CLEAN), ("no-bars", "x", ERROR), ("no-name", "|9.0|132", ERROR),
                                 ("zero-sms", "a|9.0|0", ERROR), ("huge-cc", "a|99999999999.0|1", ERROR),
                                 ("negative", "a|-9.0|132", ERROR), ("esc", ESC + "|9.0|132", CLEAN),
                                 ("huge-sms", "a|9.0|99999999999", ERROR), ("2^31-sms", "a|9.0|2147483648", ERROR),
                                 ("valid", GPU_KEY, OK)]:
            add(Case("db-opt/%s--gpu/%s" % (sub, name), ["db", sub, "--gpu", value], exp, setup=with_rows))
        add(Case("db-opt/%s--gpu/missing-value" % sub, ["db", sub, "--gpu"], USAGE))

    def count_after(n_expected):
        def check(c, r):
            rows = export_rows(c)
            if rows is None:
                return [(OTHER, "`db export` failed afterwards")]
            if len(rows) != n_expected:
                return [(LOST if len(rows) < n_expected else OTHER, "%d rows afterwards, expected %d" % (
                    len(rows), n_expected))]
            return []
        return check

    add(Case("db-opt/prune-empty-space-hash", ["db", "prune", "--op", "gemm", "--space-hash", ""], REFUSE,
             setup=with_rows, check=count_after(10)),
        Case("db-opt/prune-esc-space-hash", ["db", "prune", "--op", "gemm", "--space-hash", ESC], CLEAN,
             setup=with_rows),
        Case("db-opt/prune-same-space", ["db", "prune", "--op", "gemm", "--space-hash", "catalogue"], OK,
             setup=with_rows, check=count_after(10)),
        Case("db-opt/prune-other-space", ["db", "prune", "--op", "gemm", "--space-hash", "other"], OK,
             setup=with_rows, check=count_after(0)),
        Case("db-opt/prune-op-alone", ["db", "prune", "--op", "gemm"], USAGE, needles=["--space-hash"]),
        Case("db-opt/prune-space-alone", ["db", "prune", "--space-hash", "x"], USAGE, needles=["--op"]),
        Case("db-opt/import-missing-file-option", ["db", "import"], USAGE, needles=["--file"]),
        Case("db-opt/export-nothing", ["db", "export"], ERROR, needles=["nothing to export"]),
        Case("db-opt/export-to-file-nothing", ["db", "export", "--file", "x.json"], ERROR),
        Case("db-opt/show-all-filters", ["db", "show", "--op", "gemm", "--m", "5", "--n", "4096", "--k", "7168"], OK,
             setup=with_rows, out_needles=["m=5 n=4096 k=7168"]))
    for sub in ("list", "show", "prune", "rebuild"):
        add(Case("db-opt/%s-no-database" % sub, ["db", sub], OK, needles=["no tuning database"]))


IMPORT_DOCS = [  # (name, document text, expectation)
    ("empty-object", "{}", ERROR), ("array", "[]", ERROR), ("null", "null", ERROR), ("number", "5", ERROR),
    ("truncated", '{"format":"fp8jit-tuning","version":1,"rows":[', ERROR),
    ("wrong-format", '{"format":"other","version":1,"rows":[]}', ERROR),
    # Version 3 is today's export (rows carry fp8jit_version and tuned_on), versions 1 and 2 the
    # earlier ones: all import. The first version this build does not know (and a non-integer)
    # must be refused.
    ("version-2", '{"format":"fp8jit-tuning","version":2,"rows":[]}', OK),
    ("version-3", '{"format":"fp8jit-tuning","version":3,"rows":[]}', OK),
    ("version-4", '{"format":"fp8jit-tuning","version":4,"rows":[]}', ERROR),
    ("version-0", '{"format":"fp8jit-tuning","version":0,"rows":[]}', ERROR),
    ("version-float", '{"format":"fp8jit-tuning","version":2.0,"rows":[]}', ERROR),
    ("version-string", '{"format":"fp8jit-tuning","version":"1","rows":[]}', ERROR),
    ("version-huge", '{"format":"fp8jit-tuning","version":99999999999999999999,"rows":[]}', ERROR),
    ("rows-object", '{"format":"fp8jit-tuning","version":1,"rows":{}}', ERROR),
    ("no-rows", '{"format":"fp8jit-tuning","version":1}', ERROR),
    ("zero-rows", '{"format":"fp8jit-tuning","version":1,"rows":[]}', OK),
    ("deep-nesting", '{"format":"fp8jit-tuning","version":1,"rows":' + "[" * 100000, ERROR),
    ("row-deep-nesting", '{"format":"fp8jit-tuning","version":1,"rows":[{"timings":' + "[" * 100000, ERROR),
    ("nul-bytes", '{"format":"fp8jit-tuning",\x00"version":1,"rows":[]}', ERROR),
]
ROW_VARIANTS = [  # (name, row overrides or a function of the row, expectation)
    ("valid", {}, OK),
    ("missing-field", lambda r: {k: v for k, v in r.items() if k != "space_hash"}, ERROR),
    ("unknown-field", {"extra": 1}, ERROR),
    ("gpu-malformed", {"gpu": "H100"}, ERROR), ("gpu-empty", {"gpu": ""}, ERROR),
    ("gpu-zero-sms", {"gpu": "H100|9.0|0"}, ERROR), ("gpu-number", {"gpu": 5}, ERROR),
    ("gpu-esc", {"gpu": "NVIDIA\x1b[31mH100|9.0|132"}, CLEAN),
    ("op-other", {"op": "quantize"}, ERROR), ("op-esc", {"op": ESC}, ERROR),
    ("problem-key-mismatch", {"problem_key": '{"scale":"tensor"}'}, ERROR),
    ("problem-key-esc", {"problem_key": ESC}, ERROR),
    ("m-negative", {"m": -1}, ERROR), ("m-zero", {"m": 0}, CLEAN), ("m-2^63", {"m": 9223372036854775808}, ERROR),
    ("m-2^64", {"m": 18446744073709551616}, ERROR), ("m-float", {"m": 5.0}, ERROR), ("m-string", {"m": "5"}, ERROR),
    ("m-bool", {"m": True}, ERROR), ("m-max", {"m": 9223372036854775807}, CLEAN),
    ("space-empty", {"space_hash": ""}, ERROR), ("space-esc", {"space_hash": ESC}, CLEAN),
    ("best-config-invalid", lambda r: {**r, "best_config": {**r["best_config"], "config": {"block_m": 7}}}, ERROR),
    ("best-config-string", {"best_config": "gemm"}, ERROR),
    ("best-config-deep", lambda r: {**r, "best_config": json.loads("[" * 200 + "]" * 200)}, ERROR),
    ("best-us-zero", {"best_us": 0}, ERROR), ("best-us-negative", {"best_us": -1.5}, ERROR),
    ("best-us-huge", {"best_us": 1e308}, CLEAN), ("best-us-string", {"best_us": "10"}, ERROR),
    ("timings-object", {"timings": {}}, ERROR), ("timings-bad-status", {"timings": [
        {"config": GEMM_SPEC, "status": "great"}]}, ERROR),
    ("timings-string-time", {"timings": [{"config": {}, "status": "passed", "median_us": "1"}]}, ERROR),
    ("created-string", {"created_at": "yesterday"}, ERROR),
    ("created-max", {"created_at": 9223372036854775807}, CLEAN),
    ("created-min", {"created_at": -9223372036854775808}, CLEAN),
    ("created-far-future", {"created_at": 253402300800}, CLEAN),
]


def import_documents():
    for name, text, exp in IMPORT_DOCS:
        add(Case("import/doc-%s" % name, ["db", "import", "--file", "in.json"], exp,
                 setup=(lambda t: lambda c: c.write("in.json", t))(text)))

    def readers_work(c, r):
        """After an accepted import, every reader shows the rows cleanly."""
        if r.rc != 0:
            return []
        f = []
        for args in (["db", "list"], ["db", "show"], ["db", "export"], ["db", "rebuild"]):
            r2 = c.run(args)
            bad = r2.rc != 0 or r2.timed_out or any(m in r2.out + r2.err for m in CRASH_MARKS)
            ctl = CONTROL.search(r2.out + r2.err)
            if bad or ctl:
                cat = CRASH if (r2.sig or any(m in r2.out + r2.err for m in CRASH_MARKS)) else OTHER
                f.append((cat, "then `fp8jit %s`: %s%s: %s" % (" ".join(args), r2.status(),
                                                              ", raw control byte" if ctl else "",
                                                              brief(r2.err or r2.out, 160))))
        return f

    for name, change, exp in ROW_VARIANTS:
        def setup(c, change=change):
            base = make_row(5)
            row = change(base) if callable(change) else {**base, **change}
            c.write("in.json", export_doc([make_row(1), row]))

        add(Case("import/row-%s" % name, ["db", "import", "--file", "in.json"], exp, setup=setup,
                 needles=["rows[1]"] if exp == ERROR and name != "best-config-deep" else [], check=readers_work))
    for name, make, exp, needles in file_kinds("--file"):
        skip = root_skip("an unreadable file") if name == "unreadable" else None
        add(Case("import/file-%s" % name, (lambda mk: lambda c: ["db", "import", "--file", mk(c)])(make), exp,
                 needles=["--file"] + needles if needles is not None else [], skip=skip))
    add(Case("import/file-missing-value", ["db", "import", "--file"], USAGE),
        Case("import/refused-creates-nothing", ["db", "import", "--db", "new.sqlite", "--file", "in.json"], ERROR,
             setup=lambda c: c.write("in.json", '{"format":"other"}')),
        Case("import/file-empty-path", ["db", "import", "--file", ""], ERROR),
        Case("import/bad-row-writes-nothing", lambda c: ["db", "import", "--file", "in.json"], ERROR,
             setup=lambda c: (c.import_rows([make_row(m) for m in range(1, 6)]),
                              c.write("in.json", export_doc([make_row(m) for m in range(6, 100)] + [make_row(-1)]))),
             check=lambda c, r: [] if len(export_rows(c) or []) == 5 else [(OTHER, "rows changed")]),
        Case("import/round-trip", ["db", "import", "--file", "in.json"], OK,
             setup=lambda c: c.write("in.json", export_doc([make_row(m) for m in range(1, 301)])),
             check=lambda c, r: [] if len(export_rows(c) or []) == 300 else [(LOST, "export after import: %d rows" % len(
                 export_rows(c) or []))]),
        Case("import/file-size-limit", ["db", "import", "--file", "in.json"], ERROR, limits={"f": 16},
             setup=lambda c: (c.import_rows([make_row(m) for m in range(1, 6)]),
                              c.write("in.json", export_doc([make_row(m) for m in range(6, 3000)]))),
             root_clean=False,
             check=lambda c, r: [] if len(export_rows(c) or []) == 5 else [(OTHER, "rows after a failed import: %s" % (
                 len(export_rows(c) or [])))]))


def settings_env():
    bad = [("FP8JIT_JOBS", "abc"), ("FP8JIT_JOBS", "99999999999999999999"), ("FP8JIT_JOBS", "-1"),
           ("FP8JIT_JOBS", "4294967297"), ("FP8JIT_LOG", "9"), ("FP8JIT_LOG", "1x"), ("FP8JIT_TUNE", "bogus"),
           ("FP8JIT_DISK_CACHE", "maybe"), ("FP8JIT_KEEP_SOURCE", "2"), ("FP8JIT_SPLIT_SUM", "x"),
           ("FP8JIT_FFMA_REUSE", "x"), ("FP8JIT_TUNE", ESC)]
    for var, value in bad:
        tag = "env/%s=%s" % (var, shown(value, 24).strip("'"))
        add(Case(tag + "/info", ["info"], ERROR, env={var: value}, needles=[var]),
            Case(tag + "/version", ["--version"], CLEAN, env={var: value}),
            Case(tag + "/help", ["--help"], CLEAN, env={var: value}),
            Case(tag + "/select-gemm", ["select-gemm"], CLEAN, env={var: value}),
            Case(tag + "/precompile-help", ["precompile", "--help"], CLEAN, env={var: value}),
            Case(tag + "/db-list", ["db", "list"], CLEAN, env={var: value}))
    one = lambda c: c.write("one.csv", ONE_SHAPE)
    pc = ["precompile", "--shapes", "one.csv"]
    for name, value, exp in [
        ("file", lambda c: c.write("cachefile", "x"), CLEAN),
        ("fifo", lambda c: c.fifo("cachefifo"), CLEAN),
        ("dev-null", lambda c: "/dev/null", CLEAN),
        ("proc", lambda c: "/proc/fp8jit-catalogue", CLEAN),
        ("path-through-file", lambda c: os.path.join(c.write("afile", "x"), "cache"), CLEAN),
        ("missing-folder", lambda c: os.path.join(c.other, "a/b/cache"), OK),
        ("esc", lambda c: os.path.join(c.other, "cache" + ESC), OK),
        ("relative", lambda c: "relcache", CLEAN),
        ("read-only-folder", lambda c: (os.chmod(c.mkdir("ro", where=c.other), 0o555),
                                        os.path.join(c.other, "ro", "cache"))[1], CLEAN),
    ]:
        def setup(c, value=value):
            one(c)
            c.extra_env["FP8JIT_CACHE_DIR"] = value(c)

        writes = ["relcache"] if name == "relative" else []
        skip = root_skip("a read-only folder") if name == "read-only-folder" else None
        add(Case("env/FP8JIT_CACHE_DIR=%s/precompile" % name, pc, exp, setup=setup, timeout=300, writes=writes,
                 skip=skip, root_clean=False),
            Case("env/FP8JIT_CACHE_DIR=%s/info" % name, ["info"], CLEAN, setup=setup, skip=skip))
    add(Case("env/HOME-unset/info", ["info"], CLEAN, env={"HOME": None, "FP8JIT_CACHE_DIR": None, "FP8JIT_DB": None}),
        Case("env/FP8JIT_DISK_CACHE=0/precompile", pc, OK, setup=one, env={"FP8JIT_DISK_CACHE": "0"}, timeout=300))


# ----------------------------------------------------------------------------------------------
# Faults and concurrency: cases of several processes

def findings_of(name: str, res: Res, want_ok=True) -> List[Finding]:
    f = []
    if res.timed_out:
        return [(HANG, "%s: no answer within %.0f s" % (name, res.secs))]
    if res.sig or (res.rc or 0) >= 128 or any(m in res.out + res.err for m in CRASH_MARKS):
        f.append((CRASH, "%s: %s: %s" % (name, res.status(), brief(res.err))))
    elif want_ok and res.rc != 0:
        f.append((OTHER, "%s: %s: %s" % (name, res.status(), brief(res.err))))
    elif res.rc not in (0, 1, 2):
        f.append((OTHER, "%s: %s: %s" % (name, res.status(), brief(res.err))))
    elif res.rc != 0:
        f += [(c, "%s: %s" % (name, m)) for c, m in prefix_findings(res.err)]
    if CONTROL.search(res.out + res.err):
        f.append((OTHER, "%s: raw control byte in its output" % name))
    return f


def concurrent_import(ctx: Ctx):
    """8 imports of 2000 distinct rows each while `db rebuild`, `db list` and `db export` run in
    loops: every row must be there afterwards."""
    procs, files = 8, []
    for i in range(procs):
        rows = [make_row(m, n=4096 + 128 * i, space="catalogue-%d" % i) for m in range(1, 2001)]
        files.append(ctx.write("rows%d.json" % i, export_doc(rows), where=ctx.other))
    findings: List[Finding] = []
    stop = threading.Event()
    lock = threading.Lock()
    counts = {"rebuild": 0, "list": 0, "export": 0}

    def loop(name, args):
        while not stop.is_set():
            r = ctx.run(args, timeout=60)
            with lock:
                counts[name] += 1
                findings.extend(findings_of("`fp8jit %s`" % " ".join(args), r))
            if args[1] == "export" and r.rc == 0:
                try:
                    json.loads(r.out)
                except ValueError:
                    with lock:
                        findings.append((OTHER, "`db export` during imports printed invalid JSON"))

    ctx.must(["db", "import", "--file", ctx.write("seed.json", export_doc([make_row(1, space="seed")]),
                                                     where=ctx.other)])
    threads = [threading.Thread(target=loop, args=(n, a)) for n, a in (
        ("rebuild", ["db", "rebuild"]), ("list", ["db", "list"]), ("export", ["db", "export"]))]
    for t in threads:
        t.start()
    t0 = time.monotonic()
    ps = [popen(ctx.cli, ["db", "import", "--file", f], ctx.cwd, ctx.env()) for f in files]
    results = [finish(p, 120, t0) for p in ps]
    stop.set()
    for t in threads:
        t.join()
    for i, r in enumerate(results):
        findings += findings_of("import %d" % i, r)
        if r.rc == 0 and b"imported 2000 rows" not in r.out:
            findings.append((OTHER, "import %d: %s" % (i, brief(r.out))))
    rows = export_rows(ctx)
    if rows is None:
        findings.append((OTHER, "`db export` afterwards failed"))
    else:
        got = sum(1 for r in rows if r["space_hash"].startswith("catalogue-"))
        if got != procs * 2000:
            findings.append((LOST, "%d of %d rows after the concurrent imports" % (got, procs * 2000)))
    return ("8x `fp8jit db import --file rowsI.json` (2000 rows each) with %d rebuilds, %d lists, %d exports" % (
        counts["rebuild"], counts["list"], counts["export"]), findings)


def concurrent_same_import(ctx: Ctx):
    f = ctx.write("rows.json", export_doc([make_row(m) for m in range(1, 2001)]), where=ctx.other)
    t0 = time.monotonic()
    ps = [popen(ctx.cli, ["db", "import", "--file", f], ctx.cwd, ctx.env()) for _ in range(8)]
    findings: List[Finding] = []
    for i, p in enumerate(ps):
        findings += findings_of("import %d" % i, finish(p, 120, t0))
    rows = export_rows(ctx)
    if rows is None or len(rows) != 2000:
        findings.append((LOST if rows is not None and len(rows) < 2000 else OTHER,
                         "%s rows afterwards, expected 2000" % (None if rows is None else len(rows))))
    return "8x `fp8jit db import --file rows.json` (the same 2000 rows) into a fresh database", findings


def concurrent_first_use(ctx: Ctx):
    """8 processes create the same fresh database at once (schema setup, WAL switch)."""
    files = [ctx.write("r%d.json" % i, export_doc([make_row(i + 1)]), where=ctx.other) for i in range(8)]
    t0 = time.monotonic()
    ps = [popen(ctx.cli, ["db", "import", "--file", f], ctx.cwd, ctx.env()) for f in files]
    findings: List[Finding] = []
    for i, p in enumerate(ps):
        findings += findings_of("import %d" % i, finish(p, 60, t0))
    rows = export_rows(ctx)
    if rows is None or len(rows) != 8:
        findings.append((LOST, "%s rows afterwards, expected 8" % (None if rows is None else len(rows))))
    return "8x `fp8jit db import` of one row each, all creating the database at once", findings


def concurrent_rebuild_damaged(ctx: Ctx):
    p = os.path.join(ctx.other, "bad.db")
    fp8jit_db_with(ctx, p, [make_row(m) for m in range(1, 2001)])
    damage(p)
    t0 = time.monotonic()
    ps = [popen(ctx.cli, ["db", "rebuild", "--db", p], ctx.cwd, ctx.env()) for _ in range(4)]
    findings: List[Finding] = []
    oks = 0
    for i, pr in enumerate(ps):
        r = finish(pr, 120, t0)
        findings += findings_of("rebuild %d" % i, r, want_ok=False)
        oks += r.rc == 0
    if oks == 0:
        findings.append((OTHER, "no rebuild succeeded"))
    moved = [n for n in os.listdir(ctx.other) if ".corrupt-" in n and not n.endswith(("-wal", "-shm"))]
    if len(moved) != 1:
        findings.append((OTHER, "expected one moved-aside file, found %s" % moved))
    r = ctx.run(["db", "rebuild", "--db", p])
    if r.rc != 0 or b"healthy" not in r.out:
        findings.append((OTHER, "a rebuild afterwards: %s: %s %s" % (r.status(), brief(r.out), brief(r.err))))
    return "4x `fp8jit db rebuild` of one damaged database at once", findings


def killed_import(ctx: Ctx):
    """An import killed part-way: the database stays readable and holds all of it or none."""
    ctx.import_rows([make_row(m, space="before") for m in range(1, 11)])
    f = ctx.write("rows.json", export_doc([make_row(m) for m in range(1, 20001)]), where=ctx.other)
    findings: List[Finding] = []
    for delay in (0.05, 0.2, 0.5):
        p = popen(ctx.cli, ["db", "import", "--file", f], ctx.cwd, ctx.env())
        time.sleep(delay)
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        rows = export_rows(ctx)
        if rows is None:
            findings.append((OTHER, "`db export` after an import killed at %.2f s failed" % delay))
            break
        before = sum(r["space_hash"] == "before" for r in rows)
        new = sum(r["space_hash"] == "catalogue" for r in rows)
        if before != 10:
            findings.append((LOST, "%d of the 10 earlier rows after an import killed at %.2f s" % (before, delay)))
        if new not in (0, 20000):
            findings.append((OTHER, "%d of 20000 rows after an import killed at %.2f s (not all or nothing)" % (
                new, delay)))
        r = ctx.run(["db", "rebuild"])
        if r.rc != 0 or b"healthy" not in r.out:
            findings.append((OTHER, "`db rebuild` after a killed import: %s: %s" % (r.status(), brief(r.out + r.err))))
    return "`fp8jit db import` of 20000 rows killed (SIGKILL) at 0.05, 0.2 and 0.5 s", findings


def concurrent_precompile(ctx: Ctx):
    shapes = ctx.write("one.csv", ONE_SHAPE, where=ctx.other)
    t0 = time.monotonic()
    ps = [popen(ctx.cli, ["precompile", "--shapes", shapes], ctx.cwd, ctx.env()) for _ in range(4)]
    findings: List[Finding] = []
    for i, p in enumerate(ps):
        findings += findings_of("precompile %d" % i, finish(p, 300, t0))
    entry = re.compile(r"^[0-9a-f]{2}/[0-9a-f]{16}\.cubin$")
    stray = [p for p, d in snapshot(ctx.cache).items() if not d.startswith("type=40") and not entry.match(p)]
    if stray:
        findings.append((OTHER, "left in the cache: %s" % stray[:5]))
    r = ctx.run(["precompile", "--shapes", shapes], timeout=300)
    findings += findings_of("precompile afterwards", r)
    if r.rc == 0 and b"(0 compiled" not in r.out:
        findings.append((OTHER, "precompile afterwards compiled again: %s" % brief(r.out)))
    return "4x `fp8jit precompile --shapes one.csv` with one cache folder", findings


def cache_entries_replaced(kind: str):
    def runner(ctx: Ctx):
        shapes = ctx.write("one.csv", ONE_SHAPE, where=ctx.other)
        ctx.must(["precompile", "--shapes", shapes], timeout=300)
        entries = [os.path.join(ctx.cache, p) for p, d in snapshot(ctx.cache).items() if p.endswith(".cubin")]
        findings: List[Finding] = []
        if not entries:
            return "precompile", [(OTHER, "precompile left no <cache>/<2 hex>/<16 hex>.cubin entries")]
        victim = ctx.write("victim", b"not a cubin\n" * 100, where=ctx.other)
        for e in entries:
            good = open(e, "rb").read()
            os.unlink(e)
            if kind == "fifo":
                os.mkfifo(e)
            elif kind == "dir":
                os.mkdir(e)
            elif kind == "garbage":
                open(e, "wb").write(bytes((i * 13) & 0xff for i in range(len(good))))
            elif kind == "truncated":
                open(e, "wb").write(good[:len(good) // 2])
            elif kind == "symlink":
                os.symlink(victim, e)
        r = ctx.run(["precompile", "--shapes", shapes], timeout=300)
        findings += findings_of("precompile", r, want_ok=kind in ("garbage", "truncated", "symlink"))
        for e in entries:
            st = os.lstat(e)
            if (kind == "fifo" and not stat.S_ISFIFO(st.st_mode)) or (kind == "dir" and not stat.S_ISDIR(st.st_mode)):
                findings.append((OTHER, "the %s at %s was replaced" % (kind, e)))
        if open(victim, "rb").read() != b"not a cubin\n" * 100:
            findings.append((STRAY, "the file a cache entry linked to was written"))
        if kind in ("garbage", "truncated"):
            r = ctx.run(["precompile", "--shapes", shapes], timeout=300)
            findings += findings_of("precompile again", r)
            if r.rc == 0 and b"(0 compiled" not in r.out:
                findings.append((OTHER, "the damaged entry was not replaced: %s" % brief(r.out)))
        return "fp8jit precompile --shapes one.csv (each cache entry %s)" % {
            "fifo": "a FIFO", "dir": "a directory", "garbage": "garbage", "truncated": "cut in half",
            "symlink": "a symlink to another file"}[kind], findings
    return runner


def concurrent_compile_same_output(ctx: Ctx):
    t0 = time.monotonic()
    ps = [popen(ctx.cli, ["compile", "--spec", QSPEC, "--cubin", os.path.join(ctx.other, "k.cubin")], ctx.cwd,
                ctx.env()) for _ in range(4)]
    findings: List[Finding] = []
    for i, p in enumerate(ps):
        findings += findings_of("compile %d" % i, finish(p, 120, t0))
    left = sorted(os.listdir(ctx.other))
    if left != ["k.cubin"]:
        findings.append((OTHER, "files beside the output: %s" % left))
    elif open(os.path.join(ctx.other, "k.cubin"), "rb").read(4) != b"\x7fELF":
        findings.append((OTHER, "k.cubin is not an ELF file"))
    return "4x `fp8jit compile --spec Q --cubin k.cubin` into the same file", findings


def concurrent_export_same_file(ctx: Ctx):
    ctx.import_rows([make_row(m) for m in range(1, 2001)])
    out = os.path.join(ctx.other, "e.json")
    t0 = time.monotonic()
    ps = [popen(ctx.cli, ["db", "export", "--file", out], ctx.cwd, ctx.env()) for _ in range(6)]
    findings: List[Finding] = []
    for i, p in enumerate(ps):
        findings += findings_of("export %d" % i, finish(p, 60, t0))
    try:
        n = len(json.load(open(out))["rows"])
        if n != 2000:
            findings.append((LOST, "%d rows in the export, expected 2000" % n))
    except (OSError, ValueError, KeyError) as e:
        findings.append((OTHER, "the export is not readable: %s" % e))
    left = sorted(os.listdir(ctx.other))
    if left != ["e.json"]:
        findings.append((OTHER, "files beside the export: %s" % left))
    return "6x `fp8jit db export --file e.json` at once", findings


def killed_precompile(ctx: Ctx):
    shapes = ctx.write("three.csv", "m,n,k\n128,4096,7168\n256,2112,7168\n64,7168,2048\n", where=ctx.other)
    findings: List[Finding] = []
    p = popen(ctx.cli, ["precompile", "--shapes", shapes], ctx.cwd, ctx.env())
    time.sleep(0.4)
    os.killpg(p.pid, signal.SIGKILL)
    p.communicate()
    r = ctx.run(["precompile", "--shapes", shapes], timeout=300)
    findings += findings_of("precompile after a killed one", r)
    r2 = ctx.run(["precompile", "--shapes", shapes], timeout=300)
    findings += findings_of("precompile again", r2)
    if r2.rc == 0 and b"(0 compiled" not in r2.out:
        findings.append((OTHER, "the third precompile compiled again: %s" % brief(r2.out)))
    return "`fp8jit precompile` killed (SIGKILL) at 0.4 s, then run twice", findings


def options_covered(ctx: Ctx):
    """Every option that a command's --help lists is one this catalogue knows (and tests): a new
    option fails here until it is added to COMMANDS / DB_SUBS and given cases."""
    findings: List[Finding] = []
    listed = [([c], opts) for c, opts in COMMANDS.items() if c != "db"]
    listed += [(["db", s], opts) for s, opts in DB_SUBS.items()]
    for cmd, known in listed:
        r = ctx.run(cmd + ["--help"])
        if r.rc != 0:
            findings.append((OTHER, "`fp8jit %s --help`: %s" % (" ".join(cmd), r.status())))
            continue
        found = set(re.findall(r"^\s+(?:-\w,)?(--[a-z0-9][a-z0-9-]*)", r.out.decode("utf-8", "replace"), re.M))
        new = sorted(found - set(known) - {"--help"})
        if new:
            findings.append((OTHER, "`fp8jit %s` has options the catalogue does not know: %s" % (
                " ".join(cmd), ", ".join(new))))
    r = ctx.run(["--help"])
    subs = set(re.findall(r"^  ([a-z][a-z0-9-]*)\s", r.out.decode("utf-8", "replace"), re.M))
    new = sorted(subs - set(COMMANDS))
    if new:
        findings.append((OTHER, "commands the catalogue does not know: %s" % ", ".join(new)))
    return "every --help against the catalogue's option lists", findings


def faults():
    add(Case("help/options-covered", runner=options_covered),
        Case("conc/import-8x2000-with-rebuild-list-export", runner=concurrent_import, exclusive=True),
        Case("conc/import-same-file-8x", runner=concurrent_same_import, exclusive=True),
        Case("conc/first-use-8x", runner=concurrent_first_use, exclusive=True),
        Case("conc/rebuild-damaged-4x", runner=concurrent_rebuild_damaged, exclusive=True),
        Case("conc/precompile-4x-same-cache", runner=concurrent_precompile, exclusive=True),
        Case("conc/compile-same-cubin-4x", runner=concurrent_compile_same_output, exclusive=True),
        Case("conc/export-same-file-6x", runner=concurrent_export_same_file, exclusive=True),
        Case("fault/import-killed", runner=killed_import, exclusive=True),
        Case("fault/precompile-killed", runner=killed_precompile, exclusive=True, slow=True),
        Case("fault/cache-entries-are-fifos", runner=cache_entries_replaced("fifo")),
        Case("fault/cache-entries-are-directories", runner=cache_entries_replaced("dir")),
        Case("fault/cache-entries-are-garbage", runner=cache_entries_replaced("garbage")),
        Case("fault/cache-entries-are-truncated", runner=cache_entries_replaced("truncated")),
        Case("fault/cache-entries-are-symlinks", runner=cache_entries_replaced("symlink")),
        Case("fault/precompile-file-size-limit", ["precompile", "--shapes", "one.csv"], CLEAN, limits={"f": 8},
             setup=lambda c: c.write("one.csv", ONE_SHAPE), timeout=300, root_clean=False),
        Case("fault/db-list-few-descriptors", ["db", "list"], CLEAN, limits={"n": 6}, root_clean=False,
             setup=lambda c: c.import_rows([make_row(1)])))


def build_catalogue():
    CASES.clear()
    help_and_version()
    unknown_commands_and_options()
    integer_options()
    choice_options()
    spec_inputs()
    output_paths()
    arch_option()
    shapes_inputs()
    gpu_commands()
    db_paths()
    db_options()
    import_documents()
    settings_env()
    faults()
    names = [c.name for c in CASES]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise SystemExit("duplicate case names: %s" % sorted(dup)[:10])
    return CASES


# ----------------------------------------------------------------------------------------------


def detect_gpu(cli: str, base: str) -> Tuple[bool, str]:
    d = tempfile.mkdtemp(prefix="fp8cat-info-", dir=base)
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FP8JIT_")}
        env.update(HOME=d, FP8JIT_CACHE_DIR=os.path.join(d, "cache"), FP8JIT_DB=os.path.join(d, "db.sqlite"))
        r = run_cli(cli, ["info"], d, env, 60)
        line = next((l for l in r.out.decode("utf-8", "replace").splitlines() if l.startswith("gpu:")), "")
        if r.rc != 0 or not line:
            return False, "`fp8jit info` failed (%s: %s); assuming no GPU" % (r.status(), brief(r.err))
        return not line.startswith("gpu:        none ("), line
    finally:
        shutil.rmtree(d, ignore_errors=True)


def gemm_template(cli: str, base: str) -> Optional[dict]:
    d = tempfile.mkdtemp(prefix="fp8cat-tmpl-", dir=base)
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FP8JIT_")}
        env.update(HOME=d, FP8JIT_CACHE_DIR=os.path.join(d, "cache"), FP8JIT_DB=os.path.join(d, "db.sqlite"))
        r = run_cli(cli, ["select-gemm", "--m", "128", "--n", "4096", "--k", "7168"], d, env, 60)
        return json.loads(r.out) if r.rc == 0 else None
    except ValueError:
        return None
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", required=True, help="the fp8jit executable")
    ap.add_argument("--quick", action="store_true", help="the CI subset (no demo, no slow compiles)")
    ap.add_argument("--only", help="run only the cases whose name matches this regular expression")
    ap.add_argument("--jobs", type=int, default=max(2, os.cpu_count() or 2), help="cases run at once")
    ap.add_argument("--list", action="store_true", help="list the case names and exit")
    ap.add_argument("--keep", action="store_true", help="keep every case's temporary folder")
    ap.add_argument("--tmp", default=None, help="where the temporary folders go (default: the system's)")
    ap.add_argument("--verbose", action="store_true", help="print the commands of passing cases too")
    a = ap.parse_args()
    global GEMM_SPEC
    cli = os.path.abspath(a.cli)
    cases = [c for c in build_catalogue() if (not a.quick or not c.slow) and (not a.only or re.search(a.only, c.name))]
    if a.list:
        for c in cases:
            print(c.name)
        print("%d cases" % len(cases))
        return 0
    if not (os.path.isfile(cli) and os.access(cli, os.X_OK)):
        print("catalogue: %s is not an executable" % cli, file=sys.stderr)
        return 2
    base = tempfile.mkdtemp(prefix="fp8jit-catalogue-", dir=a.tmp)
    t_start = time.monotonic()
    gpu, gpu_line = detect_gpu(cli, base)
    spec = gemm_template(cli, base)
    print("catalogue: %s; %s; %s" % (cli, gpu_line, "GPU commands really run" if gpu else
                                     "GPU commands must answer \"needs a GPU\""))
    if spec is None:
        print("catalogue: `fp8jit select-gemm` failed; the tuning rows use a built-in gemm spec")
    else:
        GEMM_SPEC = spec
        cases = [c for c in build_catalogue() if (not a.quick or not c.slow) and (not a.only or re.search(a.only, c.name))]
    runner = Runner(cli, gpu, base, a.keep)
    counts = {k: 0 for k in SEVERITY}
    ok = skipped = 0
    skipped_notes = []
    pool_cases = [c for c in cases if not c.exclusive]
    alone = [c for c in cases if c.exclusive]
    sys.stdout.flush()

    def report(case: Case, result):
        nonlocal ok, skipped
        cmd, findings, note = result
        if note:
            skipped += 1
            skipped_notes.append(case.name)
            print("skip  %s  (%s)" % (case.name, note[6:]))
        elif not findings:
            ok += 1
            print("ok    %s%s" % (case.name, ("  " + cmd) if a.verbose else ""))
        else:
            worst = min(findings, key=lambda f: SEVERITY.index(f[0]))[0]
            counts[worst] += 1
            detail = "; ".join(m for _, m in sorted(findings, key=lambda f: SEVERITY.index(f[0])))
            print("FAIL  %s  [%s]  %s  -> %s" % (case.name, worst, cmd[:300], detail[:900]))
        sys.stdout.flush()

    def safe(case):
        try:
            return runner.run_case(case)
        except Exception as e:  # a bug in the catalogue itself: a failure, not a crash of the run
            return "", [(OTHER, "catalogue error: %r" % e)], ""

    with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
        for case, result in zip(pool_cases, ex.map(safe, pool_cases)):
            report(case, result)
    for case in alone:
        report(case, safe(case))
    if not a.keep:
        shutil.rmtree(base, ignore_errors=True)
    else:
        print("catalogue: temporary folders kept under %s" % base)
    n = len(cases) - skipped
    if skipped:
        print("(%d cases skipped, not counted: %s)" % (skipped, ", ".join(skipped_notes[:8]) +
                                                     (" ..." if skipped > 8 else "")))
    print("catalogue: %.0f s" % (time.monotonic() - t_start))
    print("%d cases: %d ok, %d hangs, %d crashes, %d lost rows, %d stray writes, %d bad values accepted, "
          "%d other failures" % (n, ok, counts[HANG], counts[CRASH], counts[LOST], counts[STRAY], counts[ACCEPTED],
                                 counts[OTHER]))
    return 0 if ok == n else 1


if __name__ == "__main__":
    sys.exit(main())
