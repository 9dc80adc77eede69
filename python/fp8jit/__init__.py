"""fp8jit: FP8 kernels for NVIDIA Hopper, generated, compiled and tuned at run time.

Specs and compilation (no GPU needed)::

    import fp8jit
    spec = fp8jit.select_gemm(4096, 7168, 2048)        # the kernel gemm() would take, as a dict
    print(fp8jit.emit(spec))                             # its generated CUDA source
    cubin = fp8jit.compile(spec)                         # NVRTC -> sm_90a cubin (disk-cached)

Operations on CUDA tensors (torch; the current stream unless ``stream`` is given)::

    q, s = fp8jit.quantize(x)                            # bf16 [M, K] -> e4m3 + 1x128 scales
    d = fp8jit.gemm(q, w, s, w_s)                        # block-scaled GEMM, bf16 out
    fp8jit.tune(q, w, s, w_s)                            # time candidates, keep the fastest (FP8JIT_DB)

Bad arguments raise ValueError and launch nothing; other failures raise RuntimeError. The runtime
is process-wide and thread-safe; it is configured by the FP8JIT_* environment variables (cache
directory, tuning database, ...), read once when it is first used.
"""

from __future__ import annotations

import json as _json
from typing import Any, Iterable, Mapping, Sequence, Union

try:
    # torch, where installed, is loaded before the extension: both link CUDA's NVRTC and fmt, and
    # with the extension's copies loaded first `import torch` aborted ("free(): invalid pointer";
    # torch 2.11+cu130 on an H100 machine, `import fp8jit, torch`).
    import torch as _torch_first  # noqa: F401
except ImportError:  # the spec functions work without torch
    pass

from . import _fp8jit  # noqa: E402
from ._ops import TuneResult, dequantize, gemm, grouped_gemm, quantize, tune, tune_grouped

__version__: str = _fp8jit.__version__

Spec = Union[Mapping[str, Any], str]

__all__ = [
    "__version__",
    "cache_dir",
    "cache_stats",
    "compile",
    "dequantize",
    "emit",
    "gemm",
    "grouped_gemm",
    "has_gpu",
    "log_to_python",
    "precompile",
    "precompile_model",
    "quantize",
    "pdl",
    "reset_cache_stats",
    "select_gemm",
    "select_grouped_gemm",
    "set_pdl",
    "spec_name",
    "tune",
    "tune_grouped",
    "TuneResult",
]


def _spec_json(spec: Spec) -> str:
    if isinstance(spec, str):
        return spec
    if isinstance(spec, Mapping):
        return _json.dumps(spec)
    raise ValueError(f"spec: expected a dict or a JSON string, got {type(spec).__name__}")


def spec_name(spec: Spec) -> str:
    """The kernel's canonical name, e.g. ``gemm_sm90_e4m3e4m3_bf16_block_128x256x128_s3_g16``."""
    return _fp8jit.spec_name(_spec_json(spec))


def emit(spec: Spec) -> str:
    """The generated CUDA source of a kernel spec (a dict as ``select_gemm`` returns, or JSON)."""
    return _fp8jit.emit(_spec_json(spec))


def compile(spec: Spec) -> bytes:  # noqa: A001 - the CLI's verb
    """The sm_90a cubin of a spec: from the disk cache, else compiled by NVRTC. Needs no GPU."""
    return _fp8jit.compile(_spec_json(spec))


def select_gemm(m: int, n: int, k: int, *, a_format: str = "e4m3", b_format: str = "e4m3", out: str = "bf16",
                scale: str = "block", bias: bool = False, fast_accum: bool = False) -> dict:
    """The spec ``gemm`` takes for D[m, n] = A[m, k] B[n, k]^T: the tuning database's row for this
    GPU, else the nearest tuned M, else the heuristic (for an H100/H200 without a GPU)."""
    return _json.loads(_fp8jit.select_gemm(m, n, k, a_format, b_format, out, scale, bias, fast_accum))


def select_grouped_gemm(layout: str, groups: int, expected_m: int, n: int, k: int, *, a_format: str = "e4m3",
                        b_format: str = "e4m3", out: str = "bf16", scale: str = "block",
                        fast_accum: bool = False) -> dict:
    """The spec ``grouped_gemm`` takes for ``groups`` experts of about ``expected_m`` rows each
    (layout ``contiguous``, ``masked`` or ``indexed``) against their own N x K weights."""
    return _json.loads(
        _fp8jit.select_grouped_gemm(layout, groups, expected_m, n, k, a_format, b_format, out, scale, fast_accum))


def precompile(shapes: Iterable[Sequence[int]], *, a_format: str = "e4m3", b_format: str = "e4m3",
               out: str = "bf16", scale: str = "block", bias: bool = False, fast_accum: bool = False,
               jobs: int = 0) -> int:
    """Compiles, in parallel, the kernels ``gemm`` would take for these (m, n, k) shapes, ahead of
    serving; returns how many were compiled."""
    triples = []
    for s in shapes:
        if len(s) != 3:
            raise ValueError(f"shapes: expected (m, n, k) triples, got {tuple(s)!r}")
        triples.append(tuple(int(v) for v in s))
    return _fp8jit.precompile(triples, a_format, b_format, out, scale, bias, fast_accum, jobs)


def precompile_model(config: Union[str, Mapping[str, Any]], ms: Iterable[int] = range(1, 4097), *, tp: int = 1,
                     a_format: str = "e4m3", b_format: str = "e4m3", out: str = "bf16", scale: str = "block",
                     jobs: int = 0) -> list:
    """Compiles every kernel a model runs before serving: ``config`` is the path of its Hugging Face
    config.json (or its dict), ``ms`` the batch sizes, ``tp`` the tensor-parallel ranks. Its
    GEMMs (fused QKV or DeepSeek's low-rank attention, MLPs, experts in the contiguous and masked
    layouts) and the activation quantize. Returns one dict per kernel: what it serves, its spec
    and the smallest and largest batch size that takes it. With FP8JIT_JIT=off afterwards, no
    request compiles."""
    if isinstance(config, Mapping):
        text = _json.dumps(config)
    elif isinstance(config, str):
        try:
            with open(config, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise ValueError(f"config: cannot read {config!r}: {e.strerror}") from e
    else:
        raise ValueError(f"config: expected a config.json path or a dict, got {type(config).__name__}")
    batch = []
    for m in ms:
        if isinstance(m, bool) or not isinstance(m, int):
            raise ValueError(f"ms: expected ints, got {m!r}")
        batch.append(m)
    rows = _fp8jit.precompile_model(text, batch, tp, a_format, b_format, out, scale, jobs)
    return [{"what": w, "spec": _json.loads(s), "m_min": lo, "m_max": hi} for w, s, lo, hi in rows]


def log_to_python(logger: Any = None) -> None:
    """Sends fp8jit's messages (compiles, the kernel chosen for each new shape, cache trouble) to a
    ``logging`` logger (default ``logging.getLogger("fp8jit")``) instead of stderr, at the level
    the logger lets through (WARNING, INFO, DEBUG). ``fp8jit.log_to_python(None)`` after
    ``_fp8jit.set_log_callback(None)`` restores stderr."""
    import atexit
    import logging

    log = logger if logger is not None else logging.getLogger("fp8jit")
    levels = {1: logging.WARNING, 2: logging.INFO, 3: logging.DEBUG}
    _fp8jit.set_log_callback(lambda level, message: log.log(levels.get(level, logging.INFO), message))
    effective = log.getEffectiveLevel()
    _fp8jit.set_log_level(3 if effective <= logging.DEBUG else 2 if effective <= logging.INFO else 1)
    atexit.register(_fp8jit.set_log_callback, None)  # no callback into a finalizing interpreter


def has_gpu() -> bool:
    """Whether a CUDA driver and a device are present (operations need one, specs do not)."""
    return _fp8jit.has_gpu()


def cache_dir() -> str:
    """The runtime's disk cache directory ('' when the disk cache is off)."""
    return _fp8jit.cache_dir()


def cache_stats() -> dict:
    """Kernel-cache counters: memory and disk hits and misses, NVRTC compiles and their seconds."""
    return _fp8jit.cache_stats()


def reset_cache_stats() -> None:
    _fp8jit.reset_cache_stats()


def set_pdl(enabled: bool) -> None:
    """Programmatic dependent launch for the calls that follow: each fp8jit kernel may start while
    the previous kernel in its stream still runs, and waits for it on the GPU before touching
    memory, which hides launch latency between back-to-back kernels (a quantize feeding a GEMM, a
    layer's GEMMs). Results are identical either way. Off unless ``FP8JIT_PDL=1``."""
    if not isinstance(enabled, bool):
        raise ValueError(f"enabled: {enabled!r}, expected True or False")
    _fp8jit.set_pdl(enabled)


def pdl() -> bool:
    """Whether programmatic dependent launch is on (``set_pdl``, ``FP8JIT_PDL``)."""
    return _fp8jit.pdl()
