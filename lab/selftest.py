#!/usr/bin/env python3
"""The GPU-free checks of lab/'s own tools, run by CI (ctest lab_tools_selftest): their answers
on good input, and on wrong, empty, huge and missing input a usage error (exit status 2) that
writes nothing.

  lab/cubin_text.py           two cubins' machine code compared (a real cubin from the CLI)
  lab/scripts/peers_ab.py     two peers CSVs, or one with --lib-base columns, joined per line
  lab/probes/nvrtc_options.py cold NVRTC compiles under extra options (a quantize kernel)
  lab/scripts/cold_compile.sh and lab/scripts/patch_check.sh: their argument checks
  lab/scripts/merge_shipped_rows.py  re-tuned rows merged into a shipped tuning document
  lab/probes/k_loop_sass.py and deepgemm_sass.sh: their argument checks (and, where cuobjdump is
                              on PATH, the K loop of a real cubin); default_spills.py's argument checks

Usage: FP8JIT_CLI=build/fp8jit python3 lab/selftest.py
"""
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile

LAB = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(LAB)
sys.path.insert(0, os.path.join(ROOT, "bench", "peers"))
from selftest import check, run_tests  # noqa: E402  (the peer benchmark's check counting)

CLI = os.environ.get("FP8JIT_CLI") or os.path.join(ROOT, "build", "fp8jit")
QUANTIZE = ('{"config":{"threads":64,"unroll":1,"vec":4},"family":"quantize","problem":{"format":"e4m3",'
            '"granularity":"tensor","input":"bf16","transpose":0}}')


def run(argv, env=None):
    e = dict(os.environ, **(env or {}))
    r = subprocess.run(argv, capture_output=True, text=True, env=e, cwd=ROOT, timeout=300)
    return r.returncode, r.stdout, r.stderr


def py(tool, *args, env=None):
    return run([sys.executable, os.path.join(LAB, tool), *args], env=env)


def test_cubin_text(d):
    cubin = os.path.join(d, "q.cubin")
    rc, _, err = run([CLI, "compile", "--spec", QUANTIZE, "--cubin", cubin])
    check(rc == 0 and os.path.getsize(cubin) > 0, f"the CLI compiles a quantize cubin: {err[-300:]}")
    with open(cubin, "rb") as f:
        data = bytearray(f.read())
    check(py("cubin_text.py", cubin, cubin)[0] == 0, "a cubin has its own machine code")
    # Another cubin whose .text differs in one byte: different code.
    sys.path.insert(0, LAB)
    from cubin_text import text_sections_of
    sections = text_sections_of(bytes(data))
    check(len(sections) >= 1 and all(sections.values()), f"the cubin's .text sections: {list(sections)}")
    name, body = next(iter(sections.items()))
    at = bytes(data).find(body)
    data[at] ^= 0xFF
    other = os.path.join(d, "other.cubin")
    with open(other, "wb") as f:
        f.write(data)
    check(py("cubin_text.py", cubin, other)[0] == 1, f"a changed byte of {name} is different code")
    notelf = os.path.join(d, "not.cubin")
    with open(notelf, "w") as f:
        f.write("not an ELF file")
    cut = os.path.join(d, "cut.cubin")
    with open(cut, "wb") as f:
        f.write(bytes(data[:80]))
    empty = os.path.join(d, "empty.cubin")
    open(empty, "wb").close()
    for bad in ([cubin, notelf], [cubin, cut], [cubin, empty], [cubin, os.path.join(d, "missing")],
                [cubin, "x" * 5000], [cubin], []):
        rc, _, err = py("cubin_text.py", *bad)
        check(rc == 2 and err.strip(), f"cubin_text.py {[b[:40] for b in bad]}: exit {rc}, want 2 with a message")


def write_csv(path, rows, base=False):
    fields = ["list", "label", "m", "n", "k", "scale", "fp8jit_us", "fp8jit_status", "fp8jit_rel_err",
              "deepgemm_best_us", "cublaslt_us", "cublaslt_status", "config_fp8jit"]
    if base:
        fields += ["fp8jit_base_us", "fp8jit_base_status", "fp8jit_base_rel_err", "config_fp8jit_base"]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in fields})


def row(m, us, dg, base=None, scale="block"):
    r = {"list": "l", "m": m, "n": 2048, "k": 768, "scale": scale, "fp8jit_us": us, "fp8jit_status": "ok",
         "deepgemm_best_us": dg, "config_fp8jit": "gemm_sm90_e4m3e4m3_bf16_block_128x96x128_s6_g8_tma"}
    if base is not None:
        r.update(fp8jit_base_us=base, fp8jit_base_status="ok", config_fp8jit_base=r["config_fp8jit"])
    return r


def test_peers_ab(d):
    tree, patch, one = (os.path.join(d, f) for f in ("tree.csv", "patch.csv", "one.csv"))
    write_csv(tree, [row(700, 7.6, 5.44), row(64, 4.0, 3.0)])
    write_csv(patch, [row(700, 6.8, 5.44), row(64, 4.0, 3.3)])
    rc, out, err = py("scripts/peers_ab.py", tree, patch)
    check(rc == 0 and "| l | block | 2 | " in out, f"two runs joined: {err[-300:]}")
    gain = (7.6 / 6.8 * 1.0) ** 0.5
    check(f"| {gain:.4f} |" in out and "| 1.118 |" in out, "tree / patch per list and per line")
    write_csv(one, [row(700, 6.8, 5.44, base=7.6), row(64, 4.0, 3.3, base=4.0)], base=True)
    rc, out, _ = py("scripts/peers_ab.py", one)
    check(rc == 0 and f"| l | block | 2 | {gain:.4f} | 1.0000 | - |" in out,
          f"one --lib-base run: the same gains, no drift between runs: {out[:900]}")
    garbage = os.path.join(d, "garbage.csv")
    with open(garbage, "w") as f:
        f.write("a,b\n1,2\n")
    other = os.path.join(d, "other.csv")
    write_csv(other, [row(1, 1.0, 1.0, scale="tensor")])
    empty = os.path.join(d, "empty.csv")
    open(empty, "w").close()
    for bad in ([tree], [garbage, patch], [tree, empty], [tree, os.path.join(d, "missing.csv")], [tree, other],
                ["x" * 5000], [], [tree, patch, one]):
        rc, out, err = py("scripts/peers_ab.py", *bad)
        check(rc == 2 and err.strip() and not out, f"peers_ab.py {[os.path.basename(b)[:30] for b in bad]}: exit {rc}")


def test_nvrtc_options(d):
    rc, out, err = py("probes/nvrtc_options.py", "--fp8jit", CLI, "--rounds", "1",
                      "--variant", "nomin=-DNOTHING_DEFINED=1", QUANTIZE)
    check(rc == 0 and "| quant_sm90_bf16_e4m3_tensor_v4_t64_u1 |" in out, f"a quantize kernel timed: {err[-400:]}")
    check("nomin: yes" in out and "base: 1 kernels" in out, f"same code and a summary: {out[-300:]}")
    for bad in (["--rounds", "0", QUANTIZE], ["--rounds", "1000", QUANTIZE], ["--rounds", "x", QUANTIZE],
                ["--variant", "=-DX", QUANTIZE], ["--variant", "a=", QUANTIZE], ["--variant", "base=-DX", QUANTIZE],
                ["--variant", "noequals", QUANTIZE], ["--fp8jit", os.path.join(d, "nope"), QUANTIZE],
                ['{"family":"gemm"}'], ["x" * 5000], []):
        rc, out, err = py("probes/nvrtc_options.py", *(["--fp8jit", CLI] if "--fp8jit" not in bad else []), *bad)
        check(rc == 2 and err.strip(), f"nvrtc_options.py {[b[:30] for b in bad]}: exit {rc}, want 2")
    for templates in ("/no/such/dir", d, os.path.join(ROOT, "README.md"), "x" * 5000):
        rc, out, err = py("probes/nvrtc_options.py", "--fp8jit", CLI, QUANTIZE,
                          env=dict(os.environ, TEMPLATES=templates))
        check(rc == 2 and "TEMPLATES=" in err and not out, f"nvrtc_options.py TEMPLATES={templates[:30]}: exit {rc}")


def test_script_arguments(d):
    out = os.path.join(d, "never")
    for env in ({"ROUNDS": "0"}, {"ROUNDS": "many"}, {"ROUNDS": "9" * 50}, {"LISTS": ""}, {"LISTS": " "},
                {"LISTS": "/no/such.csv"}, {"LISTS": os.path.join(ROOT, "README.md")}):
        rc, _, err = run(["bash", "lab/scripts/cold_compile.sh"], dict(env, OUT=out, BUILD_DIR=os.path.join(d, "nb")))
        check(rc == 2 and err.strip() and not os.path.exists(out), f"cold_compile.sh {env}: exit {rc}, nothing written")
    for args, env in ((["/no/such.patch"], {}), (["x" * 5000], {}), ([""], {}),
                      ([os.path.join(ROOT, "README.md"), "/no/such/list.txt"], {}),
                      ([os.path.join(ROOT, "README.md")], {"PEERS_RUNS": "3"}),
                      ([os.path.join(ROOT, "README.md")], {"PEERS_RUNS": ""}),
                      ([os.path.join(ROOT, "README.md")], {"CONFIGS": "/no/such/configs.txt"}),
                      ([os.path.join(ROOT, "README.md")], {"CONFIGS": "x" * 5000}),
                      ([os.path.join(ROOT, "README.md")], {"CONFIGS": os.path.join(ROOT, "README.md"), "CONFIGS_S": "0"}),
                      ([os.path.join(ROOT, "README.md")], {"CONFIGS": os.path.join(ROOT, "README.md"), "CONFIGS_S": "soon"}),
                      ([os.path.join(ROOT, "README.md")], {"CONFIGS": os.path.join(ROOT, "README.md"), "CONFIGS_S": "9" * 30})):
        rc, _, err = run(["bash", "lab/scripts/patch_check.sh", *args], dict(env, OUT=out))
        check(rc == 2 and err.strip() and not os.path.exists(out), f"patch_check.sh {[a[:30] for a in args]} {env}: exit {rc}")
    # The peers' reserve is checked before the patch is: each refusal names it.
    for value in ("", "0", "-5", "2m", "9" * 30):
        rc, _, err = run(["bash", "lab/scripts/patch_check.sh", os.path.join(ROOT, "README.md")],
                         {"PEERS_RESERVE_S": value, "OUT": out})
        check(rc == 2 and "PEERS_RESERVE_S" in err and not os.path.exists(out),
              f"patch_check.sh PEERS_RESERVE_S={value[:30]!r}: exit {rc}, named, nothing written")
    for args, env in (([], {}), (["/no/such/list.txt", "base=-"], {}), (["x" * 5000, "base=-"], {}),
                      ([os.path.join(ROOT, "README.md"), "base=-"], {"LINE_TIMEOUT_S": "0"}),
                      ([os.path.join(ROOT, "README.md"), "base=-"], {"LINE_TIMEOUT_S": "x"}),
                      ([os.path.join(ROOT, "README.md"), "base=-"], {"LINE_TIMEOUT_S": "9" * 50}),
                      ([os.path.join(ROOT, "README.md"), "base=-"], {"LINE_TIMEOUT_S": "-5"})):
        rc, _, err = run(["bash", "lab/scripts/variants.sh", *args], dict(env, OUT=out))
        check(rc != 0 and err.strip() and not os.path.exists(out), f"variants.sh {[a[:30] for a in args]} {env}: exit {rc}")
    rc, _, _ = run(["bash", "lab/scripts/patch_check.sh"], {"OUT": out})
    check(rc != 0 and not os.path.exists(out), "patch_check.sh without PATCH refused")
    # first_call.py and memcheck.sh refuse before they need a GPU (none here) and write nothing.
    lib = os.path.join(os.path.dirname(CLI), "libfp8jit.so")
    report = os.path.join(d, "first_call.md")
    for args in ([], ["--lib", ""], ["--lib", "/no/such.so"], ["--lib", "x" * 5000],
                 ["--lib", lib, "--lists", ""], ["--lib", lib, "--lists", ","], ["--lib", lib, "--lists", "/no/such.csv"],
                 ["--lib", lib, "--lists", os.path.join(ROOT, "README.md")],
                 ["--lib", lib, "--out", "/no/such/dir/x.md"]):
        argv = args if "--out" in args else [*args, "--out", report]
        rc, _, err = py("probes/first_call.py", *argv)
        check(rc == 2 and "first_call.py: error: " in err and "unrecognized" not in err and not os.path.exists(report),
              f"first_call.py {[a[:30] for a in args]}: exit {rc} {err[-200:]}")
    for env in ({}, {"ROWS": ""}, {"ROWS": "^nothing"}, {"ROWS": "("}, {"ROWS": "x" * 5000},
                {"ROWS": "^masked", "SUITE": "/no/such.csv"}, {"ROWS": "^masked", "SUITE": os.path.join(ROOT, "README.md")}):
        rc, _, err = run(["bash", "lab/scripts/tune_rows.sh"], dict(env, OUT=out))
        check(rc == 2 and "tune_rows.sh: " in err and not os.path.exists(out), f"tune_rows.sh {env}: exit {rc}")
    for args in (["/no/such/build"], [""], ["x" * 5000]):
        rc, _, err = run(["bash", "tests/gpu/memcheck.sh", *args])
        check(rc == 2 and "memcheck.sh" in err, f"memcheck.sh {[a[:30] for a in args]}: exit {rc}")


def test_training_ab(d):
    runs = os.path.join(d, "training")
    os.makedirs(runs)
    for variant, ms, gemms in (("tree", 22.0, [900.0, 850.5]), ("patch", 20.0, [800.0, 850.0])):
        split = {"casts": 100.0, "gemms": sum(gemms), "rest": 50.0, "gemm_each": gemms}
        with open(os.path.join(runs, f"ffn_{variant}_8192.json"), "w") as f:
            json.dump({"rows": [{"d": 8192, "bf16_ms": 33.5, "fp8jit_rowwise_ms": ms,
                                 "fp8jit_rowwise_split_us": split}]}, f)
    rc, out, err = py("scripts/training_ab_join.py", runs)
    check(rc == 0 and "| 8192 | rowwise | 22.00 | 20.00 | 1.100x | 33.50 / 33.50 |" in out, f"joined: {out} {err}")
    check("d=8192 patch rowwise: casts 100, GEMMs 1650 (800, 850), rest 50" in out, f"GEMMs listed: {out}")
    rc, out, err = py("scripts/training_ab_join.py", os.path.join(d, "empty-dir-missing"))
    check(rc == 2 and err.strip() and not out, f"training_ab_join.py on a missing folder: exit {rc}")
    out = os.path.join(d, "never")
    readme = os.path.join(ROOT, "README.md")
    patches = sorted(f for f in os.listdir(os.path.join(LAB, "patches")) if f.endswith(".patch"))
    some_patch = os.path.join(LAB, "patches", patches[0]) if patches else readme
    for args, env in (([], {}), (["/no/such.patch"], {}), (["x" * 5000], {}), ([readme], {}),
                      ([readme, "/no/such/list.txt"], {}), ([some_patch], {"DIMS": "4096;8192"}),
                      ([some_patch], {"DIMS": "x" * 5000})):
        rc, _, err = run(["bash", "lab/scripts/training_ab.sh", *args], dict(env, OUT=out))
        check(rc == 2 and err.strip() and not os.path.exists(out), f"training_ab.sh {[a[:30] for a in args]} {env}: exit {rc}")
    # training_check.sh: a bad list, widths or list share stop it before anything is written.
    for args, env in ((["/no/such/list.txt"], {}), (["x" * 5000], {}), ([], {"DIMS": "4096;8192"}),
                      ([], {"DIMS": "x" * 5000}), ([], {"LIST_S": "soon"}), ([], {"LIST_S": "0"}),
                      ([], {"LIST_S": "9" * 30}), ([], {"FFN": "no"}), ([], {"FFN": "x" * 5000})):
        rc, _, err = run(["bash", "lab/scripts/training_check.sh", *args], dict(env, OUT=out))
        check(rc == 2 and err.strip() and not os.path.exists(out),
              f"training_check.sh {[a[:30] for a in args]} {env}: exit {rc}")
    # torchao_cast_arithmetic.py refuses a bad --seeds before it imports torch.
    for bad in (["--seeds", "0"], ["--seeds", "-3"], ["--seeds", "9" * 30], ["--seeds", ""], ["--seeds"],
                ["--seeds", "many"]):
        rc, out_text, err = py("probes/torchao_cast_arithmetic.py", *bad)
        check(rc == 2 and "--seeds" in err and not out_text, f"torchao_cast_arithmetic.py {bad}: exit {rc} {err[-120:]}")


def test_sass_tools(d):
    cubin = os.path.join(d, "gemm.cubin")
    spec = ('{"config":{"block_m":64,"block_n":32,"cluster_m":1,"cluster_n":1,"epilogue":"tma","group_m":8,'
            '"stages":16},"family":"gemm","problem":{"a_format":"e4m3","accum":"precise","b_format":"e4m3",'
            '"bias":0,"out":"bf16","scale":"block"}}')
    rc, _, err = run([CLI, "compile", "--spec", spec, "--cubin", cubin])
    check(rc == 0 and os.path.isfile(cubin), f"a gemm cubin to read: exit {rc} {err[-200:]}")
    for args in (["--ksteps", "0", cubin], ["--ksteps", "65", cubin], ["/no/such.cubin"], ["x" * 5000], []):
        rc, out, err = py("probes/k_loop_sass.py", *args)
        check(rc == 2 and err.strip() and not out.strip(), f"k_loop_sass.py {[a[:30] for a in args]}: exit {rc}")
    rc, out, err = py("probes/k_loop_sass.py", cubin)
    if shutil.which("cuobjdump"):
        check(rc == 0 and "*loop" in out and "QGMMA 4" in out, f"k_loop_sass.py on a cubin: exit {rc} {out[:300]}")
        rc, _, _ = py("probes/k_loop_sass.py", os.path.join(ROOT, "README.md"))
        check(rc == 2, "k_loop_sass.py on a file that is no cubin: exit 2")
    else:
        check(rc == 2 and "cuobjdump" in err, f"k_loop_sass.py without cuobjdump: exit {rc}")
    # default_spills.py: a wrong templates copy or CLI is refused before anything is compiled.
    for args in (["--templates", "/no/such/dir", CLI], ["--templates", d, CLI], ["--templates", "", CLI],
                 ["--templates", os.path.join(ROOT, "README.md"), CLI], ["--templates", "x" * 5000, CLI],
                 ["--templates"], [os.path.join(d, "no-cli")], ["x" * 5000], []):
        rc, out, err = py("probes/default_spills.py", *args)
        want = "--templates" if "--templates" in args and len(args) > 1 else ""
        check(rc == 2 and want in err and err.strip() and not out.strip(),
              f"default_spills.py {[a[:30] for a in args]}: exit {rc}, {err[-120:]!r}")
    out_dir = os.path.join(d, "never")
    good = {"N": "2112", "K": "7168", "BLOCK_M": "128", "BLOCK_N": "192", "STAGES": "4", "MULTICAST": "2"}
    for bad in ({"N": "x"}, {"K": ""}, {"BLOCK_M": "0"}, {"STAGES": "9" * 50}, {"ON_A": "maybe"},
                {"MATH_THREADS": "-1"}, {"MATH_THREADS": "x" * 5000}, {"MULTICAST": ""}):
        rc, _, err = run(["bash", "lab/probes/deepgemm_sass.sh"], dict(good, **bad, OUT=out_dir))
        check(rc == 2 and err.strip() and not os.path.exists(out_dir), f"deepgemm_sass.sh {bad}: exit {rc}")


def shipped_row(m, block_n, us):
    problem = {"a_format": "e4m3", "layout": "masked", "scale": "block"}
    return {"gpu": "G|9.0|132", "op": "gemm", "problem_key": json.dumps(problem), "m": m, "n": 4096,
            "k": 7168, "space_hash": "h", "best_us": us,
            "best_config": {"config": {"block_m": 128, "block_n": block_n, "stages": 3, "group_m": 16},
                            "family": "gemm", "problem": problem}}


def test_merge_shipped_rows(d):
    shipped, new = os.path.join(d, "ship.json"), os.path.join(d, "new.json")
    # The shipped file's own odd layout (as clang-format left it) must survive around the change.
    rows = [shipped_row(16, 128, 1.0), shipped_row(32, 256, 2.0)]
    text = ('{\n  "format": "fp8jit-tuning",\n  "version": 3,\n  "rows":\n      [\n        '
            + ",\n        ".join(json.dumps(r) for r in rows) + "\n      ]\n}\n")
    with open(shipped, "w") as f:
        f.write(text)
    with open(new, "w") as f:
        json.dump({"format": "fp8jit-tuning", "version": 3,
                   "rows": [shipped_row(32, 192, 1.5), shipped_row(64, 128, 3.0)]}, f)
    rc, out, err = py("scripts/merge_shipped_rows.py", shipped, new)
    with open(shipped) as f:
        merged = f.read()
    got = json.loads(merged)["rows"]
    check(rc == 0 and [(r["m"], r["best_config"]["config"]["block_n"]) for r in got] == [(16, 128), (32, 192), (64, 128)],
          f"replaced in place, added at the end: {out} {err}")
    check(merged.startswith(text[:text.index(json.dumps(rows[1]))]) and "replaced" in out and "added" in out,
          "the untouched rows' text kept byte for byte")
    for args in ([], [shipped], [shipped, os.path.join(d, "missing.json")], [os.path.join(d, "missing.json"), new]):
        before = open(shipped).read()
        rc, _, err = py("scripts/merge_shipped_rows.py", *args)
        check(rc == 2 and err.strip() and open(shipped).read() == before, f"merge_shipped_rows.py {len(args)} args refused")
    with open(new, "w") as f:
        f.write("{not json")
    rc, _, _ = py("scripts/merge_shipped_rows.py", shipped, new)
    check(rc == 2 and open(shipped).read() == merged and not os.path.exists(shipped + ".tmp"), "bad JSON refused")


def main():
    if not os.path.isfile(CLI):
        print(f"lab/selftest.py: {CLI}: no CLI (set FP8JIT_CLI)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as d:
        return run_tests((test_cubin_text, test_peers_ab, test_nvrtc_options, test_script_arguments,
                          test_merge_shipped_rows, test_sass_tools, test_training_ab), d)


if __name__ == "__main__":
    sys.exit(main())
