#!/usr/bin/env python3
"""Lays out DeepGEMM 2.6.1 (the second DeepGEMM peer) for the GPU machine, from local git mirrors;
standard library only, no GPU, no network.

  python3 bench/peers/setup_deepgemm2.py [--dest .carry/deepgemm2] [--full-cutlass]
      [--deepgemm GIT_DIR] [--cutlass GIT_DIR] [--fmt GIT_DIR]

The mirrors default to /work/.mirror/{deepseek-ai+DeepGEMM,NVIDIA+cutlass,fmtlib+fmt}/repo (the
fetch tool's github:deepseek-ai/DeepGEMM, github:NVIDIA/cutlass, github:fmtlib/fmt). What lands in
--dest (replaced whole, through a temporary directory):
  - DeepGEMM at 54e2261 (git archive: setup.py, csrc/, deep_gemm/, scripts/, tests/, ...);
  - its submodule fmt at 553ec11: include/ only, into third-party/fmt/include (setup.py compiles
    fmt header-only: csrc/utils/format.hpp defines FMT_HEADER_ONLY);
  - its submodule CUTLASS at f3fde58: the headers under include/ that DeepGEMM's sources reach
    (the transitive #include closure from csrc/ and deep_gemm/include/, every #include line
    counted whatever #if surrounds it, so a superset of what any build or JIT compile opens), or
    all of include/ with --full-cutlass. They go to deep_gemm/include/{cute,cutlass}, where
    develop.sh's symbolic links would point: the JIT compiles with -I deep_gemm/include, and
    setup.py's build has deep_gemm/include among its include directories too, so no link and no
    second copy is needed (the carried tree must stay small: it travels beside .carry/deepgemm);
  - DEEPGEMM_COMMIT, CUTLASS_COMMIT, FMT_COMMIT and LAYOUT.txt (how it was made).
The submodule commits are checked against DeepGEMM's own tree (git ls-tree third-party).
Build it on the GPU machine (bench/peers/run.sh does): cd DEST && python3 setup.py build_ext --inplace
"""
import argparse
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
MIRRORS = "/work/.mirror"
DEEPGEMM_COMMIT = "54e22612409371d6364144b69086735beb54e98b"  # v2.6.1
CUTLASS_COMMIT = "f3fde58372d33e9a5650ba7b80fc48b3b49d40c8"
FMT_COMMIT = "553ec11ec06fbe0beebfbb45f9dc3c9eabd83d28"
VERSION = "2.6.1"
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
SOURCE_EXT = (".h", ".hpp", ".cuh", ".cpp", ".cu", ".inl")


def git(git_dir, *args):
    return subprocess.run(["git", "--git-dir", git_dir, *args], check=True, capture_output=True).stdout


def extract(git_dir, treeish, dest, prefix=""):
    """git archive of a commit or a commit:path tree into dest (a tree-ish names only the objects
    below it: the mirrors may lack blobs elsewhere, e.g. CUTLASS's media/)."""
    data = git(git_dir, "archive", "--format=tar", f"--prefix={prefix}", treeish)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4: no links or paths out of dest
            tar.extractall(dest, filter="data")
        else:
            tar.extractall(dest)


def write_commits(dest, **commits):
    """One file per commit (DEEPGEMM_COMMIT, ...): the benchmark reports name the commits from
    them, a layout having no .git."""
    for name, commit in commits.items():
        with open(os.path.join(dest, name), "w", encoding="utf-8") as f:
            f.write(commit + "\n")


def submodule_commits(git_dir):
    out = git(git_dir, "ls-tree", DEEPGEMM_COMMIT, "third-party/").decode()
    return {line.split("\t")[1]: line.split()[2] for line in out.splitlines() if line.split()[1] == "commit"}


def include_closure(include_root, seed_dirs):
    """Files under include_root that the sources under seed_dirs include, transitively. "..."
    resolves against the including file's directory first, then include_root; headers that are
    not under include_root (CUDA's, the C++ library's, torch's) are not followed."""
    include_root = os.path.realpath(include_root)
    found, todo = set(), []

    def scan(path):
        with open(path, encoding="utf-8", errors="replace") as f:
            names = INCLUDE_RE.findall(f.read())
        for name in names:
            for base in (os.path.dirname(path), include_root):
                p = os.path.realpath(os.path.join(base, name))
                if p.startswith(include_root + os.sep) and os.path.isfile(p):
                    if p not in found:
                        found.add(p)
                        todo.append(p)
                    break
    for d in seed_dirs:
        for dirpath, _, files in os.walk(d):
            for f in files:
                if f.endswith(SOURCE_EXT):
                    scan(os.path.join(dirpath, f))
    while todo:
        scan(todo.pop())
    return sorted(os.path.relpath(p, include_root) for p in found)


def copy_headers(src_root, files, dest_root):
    """The files (paths relative to src_root) to the same paths under dest_root."""
    for rel in files:
        os.makedirs(os.path.dirname(os.path.join(dest_root, rel)), exist_ok=True)
        shutil.copy2(os.path.join(src_root, rel), os.path.join(dest_root, rel))


def lay_out(dest, prefix, fill):
    """fill(tmp) lays a tree out in a temporary directory beside dest, which then replaces dest
    whole; on any failure nothing is left. Returns what fill returns."""
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=prefix, dir=os.path.dirname(dest))
    try:
        result = fill(tmp)
        if os.path.exists(dest):
            shutil.rmtree(dest)
        os.rename(tmp, dest)
        return result
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def dir_size(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dest", default=os.path.join(ROOT, ".carry", "deepgemm2"))
    p.add_argument("--deepgemm", default=os.path.join(MIRRORS, "deepseek-ai+DeepGEMM", "repo"))
    p.add_argument("--cutlass", default=os.path.join(MIRRORS, "NVIDIA+cutlass", "repo"))
    p.add_argument("--fmt", default=os.path.join(MIRRORS, "fmtlib+fmt", "repo"))
    p.add_argument("--full-cutlass", action="store_true", help="all of CUTLASS's include/ (about 25 MiB)")
    a = p.parse_args(argv)

    subs = submodule_commits(a.deepgemm)
    want = {"third-party/cutlass": CUTLASS_COMMIT, "third-party/fmt": FMT_COMMIT}
    if any(subs.get(k) != v for k, v in want.items()):
        sys.exit(f"setup_deepgemm2: DeepGEMM {DEEPGEMM_COMMIT[:7]} pins {subs}, this script expects {want}")

    dest = os.path.abspath(a.dest)

    def fill(tmp):
        extract(a.deepgemm, DEEPGEMM_COMMIT, tmp)
        with open(os.path.join(tmp, "deep_gemm", "__init__.py"), encoding="utf-8") as f:
            version = re.search(r"^__version__\s*=\s*'([^']+)'", f.read(), re.M)
        if not version or version.group(1) != VERSION:
            sys.exit(f"setup_deepgemm2: {DEEPGEMM_COMMIT[:7]} is version {version and version.group(1)}, not {VERSION}")

        extract(a.fmt, f"{FMT_COMMIT}:include", tmp, "third-party/fmt/include/")
        with open(os.path.join(tmp, "third-party", "fmt", "LICENSE"), "wb") as f:
            f.write(git(a.fmt, "show", f"{FMT_COMMIT}:LICENSE"))

        cutlass_tmp = os.path.join(tmp, ".cutlass-include")
        extract(a.cutlass, f"{CUTLASS_COMMIT}:include", cutlass_tmp)
        inc = os.path.join(tmp, "deep_gemm", "include")
        if a.full_cutlass:
            files = sorted(os.path.relpath(os.path.join(d, f), cutlass_tmp)
                           for d, _, fs in os.walk(cutlass_tmp) for f in fs)
        else:
            files = include_closure(cutlass_tmp, [os.path.join(tmp, "csrc"), inc])
        copy_headers(cutlass_tmp, files, inc)
        shutil.rmtree(cutlass_tmp)
        os.makedirs(os.path.join(tmp, "third-party", "cutlass"), exist_ok=True)  # git archive leaves submodules out
        with open(os.path.join(tmp, "third-party", "cutlass", "LICENSE.txt"), "wb") as f:
            f.write(git(a.cutlass, "show", f"{CUTLASS_COMMIT}:LICENSE.txt"))

        write_commits(tmp, DEEPGEMM_COMMIT=DEEPGEMM_COMMIT, CUTLASS_COMMIT=CUTLASS_COMMIT, FMT_COMMIT=FMT_COMMIT)
        with open(os.path.join(tmp, "LAYOUT.txt"), "w", encoding="utf-8") as f:
            f.write(f"DeepGEMM {VERSION} ({DEEPGEMM_COMMIT}), laid out by bench/peers/setup_deepgemm2.py.\n"
                    f"third-party/fmt/include: fmt {FMT_COMMIT} include/.\n"
                    f"deep_gemm/include/{{cute,cutlass}}: CUTLASS {CUTLASS_COMMIT}, "
                    + ("all of include/" if a.full_cutlass else
                       f"{len(files)} headers of include/ (the #include closure of csrc/ and deep_gemm/include/)")
                    + "; third-party/cutlass holds its licence only.\n"
                    "Build (GPU machine, torch): python3 setup.py build_ext --inplace -> deep_gemm/_C*.so\n")
        return files

    files = lay_out(dest, ".deepgemm2.", fill)
    print(f"{dest}: DeepGEMM {VERSION} {DEEPGEMM_COMMIT[:7]}, CUTLASS {CUTLASS_COMMIT[:7]} "
          f"({'all of include/' if a.full_cutlass else f'{len(files)} headers'}), fmt {FMT_COMMIT[:7]}; "
          f"{dir_size(dest) / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
