"""The two DeepGEMM providers of the peer benchmark (gemm_peers.py): v1 (8dfa329, pure-Python JIT,
imported as deep_gemm from its source tree) and 2.6.1 (54e2261, a torch C++ extension built in
place, imported as deep_gemm2 beside it). Each prepares the shared inputs in the layout DeepGEMM
wants, JIT-compiles ahead of the timed calls and hands back one callable per shape."""
import ctypes
import glob
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))  # the compile workers import this module from here

from peer_util import NotApplicable, log, read_text, short_error  # noqa: E402


class DeepGemmProvider:
    name = "deepgemm"

    def __init__(self, torch, path, jobs):
        self.torch = torch
        if not os.path.isdir(os.path.join(path, "deep_gemm")):
            raise RuntimeError(f"--deepgemm {path}: no deep_gemm package there")
        os.environ.setdefault("DG_JIT_CACHE_DIR", "/tmp/deepgemm-cache")
        cuda_home = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
        os.environ.setdefault("CUDA_HOME", cuda_home)
        if os.path.exists(os.path.join(cuda_home, "bin", "nvcc")):
            os.environ.setdefault("DG_JIT_NVCC_COMPILER", os.path.join(cuda_home, "bin", "nvcc"))
        sys.path.insert(0, path)
        import deep_gemm  # noqa: E402
        from deep_gemm.jit_kernels import gemm as dg_gemm  # noqa: E402
        from deep_gemm.jit_kernels import runtime as dg_runtime  # noqa: E402
        self.dg, self.dg_gemm, self.dg_runtime = deep_gemm, dg_gemm, dg_runtime
        self.jobs = jobs or os.cpu_count() or 8
        self.commit = read_text(os.path.join(path, "DEEPGEMM_COMMIT")) or "unknown"
        self.cutlass = read_text(os.path.join(path, "CUTLASS_COMMIT")) or "unknown"
        self._launch_shim = False

    def config(self, M, N, K):
        num_sms, bm, bn, stages, mc, smem = self.dg_gemm.get_best_configs(M, N, K, 1, self.dg.get_num_sms())
        return dict(num_sms=num_sms, block_m=bm, block_n=bn, stages=stages, multicast=mc, smem=smem)

    def config_text(self, c):
        return (f"{c['block_m']}x{c['block_n']} s{c['stages']} mc{c['multicast'][0]}"
                f"{'A' if c['multicast'][1] else 'B'} sms{c['num_sms']}")

    def _code(self, M, N, K):
        """The generated source gemm_fp8_fp8_bf16_nt builds for this shape (same template
        arguments, so the same cache entry)."""
        c = self.config(M, N, K)
        kwargs = {
            "GEMM_TYPE": self.dg_runtime.GemmType.Normal, "NUM_TMA_THREADS": 128,
            "NUM_MATH_THREADS_PER_GROUP": 128, "M": M, "N": N, "K": -(-K // 128) * 128, "NUM_GROUPS": 1,
            "BLOCK_M": c["block_m"], "BLOCK_N": c["block_n"], "BLOCK_K": 128,
            "SWIZZLE_D_MODE": c["smem"][1], "BLOCK_N_PADDING": c["smem"][2], "NUM_STAGES": c["stages"],
            "NUM_TMA_MULTICAST": c["multicast"][0], "IS_TMA_MULTICAST_ON_A": c["multicast"][1],
        }
        return self.dg_runtime.FP8GemmRuntime.generate(kwargs), kwargs

    def precompile(self, shapes):
        """Compiles every shape's kernel in parallel (nvcc subprocesses) into DeepGEMM's cache."""
        from deep_gemm.jit import build
        codes = {}
        for s in shapes:
            code, kwargs = self._code(*s.mnk())
            codes.setdefault(code, kwargs)
        t = time.time()

        def one(item):
            code, kwargs = item
            try:
                build("gemm_fp8_fp8_bf16_nt", code, self.dg_runtime.FP8GemmRuntime, kwargs)
                return None
            except BaseException as e:  # noqa: BLE001 - reported, the shape's call fails later
                return f"{type(e).__name__}: {e}"
        with ThreadPoolExecutor(max_workers=self.jobs) as ex:
            errors = [e for e in ex.map(one, codes.items()) if e]
        log(f"DeepGEMM: {len(codes)} kernels for {len(shapes)} shapes compiled ({self.jobs} jobs) in "
            f"{time.time() - t:.1f} s; {len(errors)} failed" + (f": {errors[0][:300]}" if errors else ""))

    def _install_launch_shim(self):
        """cuda-bindings versions that refuse a CUkernel where cuLaunchKernelEx takes a CUfunction:
        hand it the kernel's function (cuKernelGetFunction, same kernel)."""
        import cuda.bindings.driver as cbd
        rt = self.dg_runtime
        real = cbd.cuLaunchKernelEx

        class Proxy:
            def __getattr__(self, item):
                return getattr(cbd, item)

            @staticmethod
            def cuLaunchKernelEx(config, kernel, args, extra):
                if isinstance(kernel, cbd.CUkernel):
                    res, fn = cbd.cuKernelGetFunction(kernel)
                    if res != cbd.CUresult.CUDA_SUCCESS:
                        raise RuntimeError(f"cuKernelGetFunction: {res}")
                    kernel = fn
                return real(config, kernel, args, extra)
        rt.cbd = Proxy()
        self._launch_shim = True

    def prepare(self, inp, scale, D):
        if scale != "block":
            raise NotApplicable("DeepGEMM v1 has block scaling only")
        A, sa, B, sb = inp.A, inp.sa, inp.B, inp.sb
        gemm = self.dg.gemm_fp8_fp8_bf16_nt

        def call():
            res = gemm((A, sa), (B, sb), D)
            return res
        # DeepGEMM asserts on a failed launch result only where it checks it: check it here.
        config = self.config_text(self.config(inp.M, inp.N, inp.K))
        try:
            self._checked(call)
        except TypeError:
            if self._launch_shim:
                raise
            self._install_launch_shim()
            self._checked(call)
            config += " (launch shim)"
        return call, config, D

    def _checked(self, call):
        import cuda.bindings.driver as cbd
        rt = self.dg_runtime.FP8GemmRuntime
        orig = rt.launch
        results = []

        def launch(kernel, kwargs):
            r = orig(kernel, kwargs)
            results.append(r)
            return r
        rt.launch = staticmethod(launch)
        try:
            call()
        finally:
            rt.launch = staticmethod(orig)
        for r in results:
            code = r[0] if isinstance(r, tuple) else r
            if code != cbd.CUresult.CUDA_SUCCESS:
                raise RuntimeError(f"cuLaunchKernelEx: {code}")


DG2_VERSION = "2.6.1"
DG2_MODULE = "deep_gemm2"  # v1's package is deep_gemm in the same process
DG2_CONFIG = re.compile(r"block_m=(\d+), block_n=(\d+).*?cluster_m=(\d+), cluster_n=(\d+).*?"
                        r"num_stages=(\d+).*?num_sms=(\d+)")


def deepgemm2_config_text(printed):
    """The config in DeepGEMM 2.6.1's DG_PRINT_CONFIGS line ('GemmDesc(...): GemmConfig(layout=
    Layout(... block_m=.., block_n=.., ..., cluster_m=.., cluster_n=..), ..., num_stages=..),
    launch_config=LaunchConfig(num_sms=.., ...)), LayoutInfo(...)') in v1's style,
    e.g. '128x112 s5 mc2A sms132'; None when there is none."""
    m = DG2_CONFIG.search(printed or "")
    if not m:
        return None
    bm, bn, cm, cn, stages, sms = (int(x) for x in m.groups())
    # sm90_fp8_gemm_1d2d multicasts over its cluster of cm x cn CTAs, A when the cluster spans N.
    return f"{bm}x{bn} s{stages} mc{cm * cn}{'A' if cn > 1 else 'B'} sms{sms}"


def load_deepgemm2(path):
    """DeepGEMM 2.6.1's package from PATH/deep_gemm (its _C extension built in place), imported
    under another name: v1's pure-Python package already holds the name deep_gemm. The package
    imports its parts relatively, and _C finds its JIT headers from its own directory."""
    pkg = os.path.join(path, "deep_gemm")
    if not os.path.isfile(os.path.join(pkg, "__init__.py")):
        raise RuntimeError(f"--deepgemm2 {path}: no deep_gemm package there "
                           "(bench/peers/setup_deepgemm2.py lays it out)")
    if not glob.glob(os.path.join(pkg, "_C*.so")):
        raise RuntimeError(f"--deepgemm2 {path}: its extension is not built (run.sh builds it: "
                           f"cd {path} && python3 setup.py build_ext --inplace)")
    if not os.path.isdir(os.path.join(pkg, "include", "cute")):
        raise RuntimeError(f"--deepgemm2 {path}: no CUTLASS headers in deep_gemm/include "
                           "(setup_deepgemm2.py puts them there)")
    if DG2_MODULE in sys.modules:
        return sys.modules[DG2_MODULE]
    for var, default in (("DG_JIT_CACHE_DIR", "/tmp/deepgemm-cache"), ("CUDA_HOME", "/usr/local/cuda")):
        os.environ.setdefault(var, default)  # _C reads CUDA_HOME at import, the cache at the first compile
    spec = importlib.util.spec_from_file_location(DG2_MODULE, os.path.join(pkg, "__init__.py"),
                                                  submodule_search_locations=[pkg])
    mod = importlib.util.module_from_spec(spec)
    sys.modules[DG2_MODULE] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        del sys.modules[DG2_MODULE]
        raise
    return mod


def deepgemm2_args(torch, M, N, K, dev="cuda"):
    """Zero operands and unit scales in the layouts the benchmark passes (A's scales MN-major,
    M padded to 4; B's [N/128, K/128] row-major): for compiling, not for timing."""
    kb, nb, m4 = -(-K // 128), -(-N // 128), -(-M // 4) * 4
    A = torch.zeros(M, K, dtype=torch.uint8, device=dev).view(torch.float8_e4m3fn)
    B = torch.zeros(N, K, dtype=torch.uint8, device=dev).view(torch.float8_e4m3fn)
    sa = torch.ones(kb, m4, device=dev)[:, :M].t()
    sb = torch.ones(nb, kb, device=dev)
    return A, sa, B, sb, torch.empty(M, N, dtype=torch.bfloat16, device=dev)


def deepgemm2_compile_worker(path, shape_texts):
    """A child process of DeepGemm2Provider.precompile: one call of each MxNxK makes DeepGEMM pick
    its config and JIT-compile the kernel into DG_JIT_CACHE_DIR. Prints 'ok SHAPE' or
    'fail SHAPE: why' per shape; the status is 0 when all passed."""
    import torch
    dg = load_deepgemm2(path)
    failed = 0
    for text in shape_texts:
        M, N, K = (int(x) for x in text.split("x"))
        try:
            A, sa, B, sb, D = deepgemm2_args(torch, M, N, K)
            dg.fp8_gemm_nt((A, sa), (B, sb), D, recipe=(1, 128, 128))
            torch.cuda.synchronize()
            print(f"ok {text}", flush=True)
        except Exception as e:  # noqa: BLE001 - reported to the parent, the shape fails again there
            failed += 1
            print(f"fail {text}: {short_error(e, 400)}", flush=True)
    return 1 if failed else 0


def capture_fd1(fn):
    """Runs fn with file descriptor 1 in a temporary file and returns what was written there:
    DeepGEMM's C++ side prints its configs to stdout (std::cout, through C stdio)."""
    libc = ctypes.CDLL(None)
    sys.stdout.flush()
    libc.fflush(None)
    saved = os.dup(1)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 1)
        try:
            fn()
        finally:
            libc.fflush(None)
            os.dup2(saved, 1)
            os.close(saved)
            tmp.seek(0)
            text = tmp.read().decode("utf-8", "replace")
            if text.strip():  # into the log as well
                for line in text.strip().splitlines():
                    log(f"  DeepGEMM {DG2_VERSION} says: {line[:600]}")
    return text


class DeepGemm2Provider:
    """DeepGEMM 2.6.1 (C++ extension, JIT with nvcc unless DG_JIT_USE_NVRTC=1): fp8_gemm_nt with
    recipe (1, 128, 128) on sm_90 runs sm90_fp8_gemm_1d2d, A's 1x128 scales MN-major and
    TMA-aligned (the shared buffer already is: no transform kernel), B's 128x128 scales as they
    are; the config from its own heuristic (no autotuning)."""
    name = "deepgemm2"

    def __init__(self, torch, path, jobs):
        self.torch, self.path = torch, os.path.abspath(path)  # the compile processes get it too
        self.dg = load_deepgemm2(self.path)
        version = getattr(self.dg, "__version__", "unknown")
        if version != DG2_VERSION:
            raise RuntimeError(f"--deepgemm2 {path}: version {version}, expected {DG2_VERSION}")
        if not hasattr(self.dg, "fp8_gemm_nt"):
            raise RuntimeError(f"--deepgemm2 {path}: this build has no fp8_gemm_nt (CUDA or torch too old for it)")
        self.jobs = jobs or os.cpu_count() or 8
        self.commit = read_text(os.path.join(path, "DEEPGEMM_COMMIT")) or "unknown"
        self.cutlass = read_text(os.path.join(path, "CUTLASS_COMMIT")) or "unknown"
        self.configs = {}  # (M, N, K) -> config text: DeepGEMM prints a shape's config once per process

    def describe(self):
        jit = "NVRTC" if os.environ.get("DG_JIT_USE_NVRTC", "0") not in ("", "0") else \
            f"nvcc {os.environ.get('DG_JIT_NVCC_COMPILER') or os.path.join(os.environ['CUDA_HOME'], 'bin', 'nvcc')}"
        return (f"{self.commit[:7]} (CUTLASS {self.cutlass[:7]}), fp8_gemm_nt recipe (1, 128, 128) "
                f"with its own heuristic, {self.dg.get_num_sms()} SMs, PDL {'on' if self.dg.get_pdl() else 'off'}, "
                f"JIT {jit}, cache {os.environ.get('DG_JIT_CACHE_DIR')}")

    def precompile(self, shapes, budget_s=420):
        """Compiles every shape's kernel before the run, in --jobs child processes (the JIT runs
        inside the extension under the GIL, one kernel at a time): sorted by (N, K, M) and cut
        into contiguous chunks, so shapes likely to share a kernel share a process and the second
        finds it in the cache. The parent then loads the cubins from DG_JIT_CACHE_DIR."""
        texts = [f"{m}x{n}x{k}" for n, k, m in sorted({(s.n, s.k, s.m) for s in shapes})]
        jobs = max(1, min(self.jobs, len(texts)))
        chunks = [texts[i * len(texts) // jobs:(i + 1) * len(texts) // jobs] for i in range(jobs)]
        code = (f"import sys; sys.path.insert(0, {HERE!r}); import deepgemm_peers as g; "
                "sys.exit(g.deepgemm2_compile_worker(sys.argv[1], sys.argv[2:]))")
        t = time.time()
        procs = [subprocess.Popen([sys.executable, "-c", code, self.path, *c], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True) for c in chunks if c]
        ok, errors, first_bad = 0, [], None
        for p in procs:
            try:
                out, _ = p.communicate(timeout=max(1.0, budget_s - (time.time() - t)))
            except subprocess.TimeoutExpired:
                p.kill()
                out, _ = p.communicate()
                errors.append(f"a compile process ran past {budget_s} s")
            lines = out.splitlines()
            ok += sum(1 for line in lines if line.startswith("ok "))
            errors += [line for line in lines if line.startswith("fail ")]
            if p.returncode and not any(line.startswith(("ok ", "fail ")) for line in lines):
                errors.append(f"a compile process failed (status {p.returncode})")
            if p.returncode and first_bad is None:
                first_bad = out
        log(f"DeepGEMM {DG2_VERSION}: {ok} of {len(texts)} shapes compiled ({len(procs)} processes) in "
            f"{time.time() - t:.1f} s" + (f"; {len(errors)} problems, first: {errors[0][:400]}" if errors else ""))
        if first_bad:  # what DeepGEMM printed (nvcc's errors go to its stdout): the shapes fail again later
            log("  the first failing compile process said: " + first_bad.strip()[-1500:].replace("\n", "\n    "))

    def prepare(self, inp, scale, D):
        if scale != "block":
            raise NotApplicable(f"DeepGEMM {DG2_VERSION} on sm_90 has block scaling only")
        torch = self.torch
        A, sa, B, sb = inp.A, inp.sa, inp.B, inp.sb
        # Its wrapper transforms A's scales unless they are MN-major and TMA-aligned already: that
        # would add a kernel to every timed call. Ours are; make sure it agrees.
        if self.dg.get_mn_major_tma_aligned_tensor(sa).data_ptr() != sa.data_ptr():
            raise RuntimeError("DeepGEMM 2.6.1 would transform A's scales on every call")
        gemm = self.dg.fp8_gemm_nt

        def call():
            gemm((A, sa), (B, sb), D, recipe=(1, 128, 128))
        key = (inp.M, inp.N, inp.K)
        if key not in self.configs:
            # DG_PRINT_CONFIGS: the chosen config is printed at the first call of a shape only.
            old = os.environ.get("DG_PRINT_CONFIGS")
            os.environ["DG_PRINT_CONFIGS"] = "1"
            try:
                text = capture_fd1(lambda: (call(), torch.cuda.synchronize()))
            finally:
                if old is None:
                    del os.environ["DG_PRINT_CONFIGS"]
                else:
                    os.environ["DG_PRINT_CONFIGS"] = old
            self.configs[key] = deepgemm2_config_text(text) or "(config not printed)"
        return call, self.configs[key], D
