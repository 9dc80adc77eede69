"""The package without a GPU (CI): it imports, names, renders, selects and compiles kernels, and
refuses bad arguments with the documented exception types."""

import json
import os

import pytest

import fp8jit
from fp8jit import _fp8jit

GEMM_SPEC = {
    "family": "gemm",
    "problem": {"a_format": "e4m3", "b_format": "e4m3", "out": "bf16", "scale": "block", "bias": 0,
                "accum": "precise"},
    "config": {"block_m": 128, "block_n": 128, "stages": 4, "group_m": 8, "cluster_m": 1, "cluster_n": 1},
}
QUANT_SPEC = {
    "family": "quantize",
    "problem": {"input": "bf16", "format": "e4m3", "granularity": "1x128", "transpose": 0},
    "config": {"vec": 8, "threads": 256, "unroll": 2},
}


def test_version_matches_the_library():
    assert fp8jit.__version__ == _fp8jit.__version__
    assert fp8jit.__version__.count(".") == 2


def test_spec_name_and_emit():
    assert fp8jit.spec_name(GEMM_SPEC) == "gemm_sm90_e4m3e4m3_bf16_block_128x128x128_s4_g8"
    assert fp8jit.spec_name(json.dumps(QUANT_SPEC)) == "quant_sm90_bf16_e4m3_1x128_v8_t256_u2"
    src = fp8jit.emit(GEMM_SPEC)
    assert "gemm_sm90_e4m3e4m3_bf16_block_128x128x128_s4_g8" in src
    assert "#include" in src


def test_select_gemm_is_the_heuristic_without_a_gpu():
    if fp8jit.has_gpu():
        pytest.skip("with a GPU the database may answer")
    spec = fp8jit.select_gemm(4096, 7168, 2048)
    assert spec["family"] == "gemm" and spec["problem"]["scale"] == "block"
    assert fp8jit.spec_name(spec).startswith("gemm_sm90_e4m3e4m3_bf16_block_")
    t = fp8jit.select_gemm(64, 2112, 7168, scale="tensor", out="fp16", fast_accum=True)
    assert t["problem"]["out"] == "fp16" and t["problem"]["accum"] == "fast"
    g = fp8jit.select_grouped_gemm("masked", 32, 64, 4096, 7168)
    assert g["problem"]["layout"] == "masked"


def test_compile_returns_a_cubin_and_caches_it():
    before = fp8jit.cache_stats()
    cubin = fp8jit.compile(QUANT_SPEC)
    assert cubin[:4] == b"\x7fELF"
    again = fp8jit.compile(QUANT_SPEC)
    assert again == cubin
    after = fp8jit.cache_stats()
    assert after["compiles"] + after["disk_hits"] >= before["compiles"] + before["disk_hits"] + 1
    if fp8jit.cache_dir():
        assert os.path.isdir(fp8jit.cache_dir())
    fp8jit.reset_cache_stats()
    assert fp8jit.cache_stats()["compiles"] == 0


def test_precompile_compiles_the_selected_kernels():
    assert fp8jit.precompile([(64, 256, 512), (64, 256, 512)], scale="tensor", jobs=1) == 1  # one kernel
    assert fp8jit.precompile([]) == 0
    with pytest.raises(ValueError, match="triples"):
        fp8jit.precompile([(64, 256)])


@pytest.mark.parametrize("call, match", [
    (lambda: fp8jit.select_gemm(0, 16, 16), "m = 0"),
    (lambda: fp8jit.select_gemm(1 << 40, 16, 16), "m = 1099511627776"),
    (lambda: fp8jit.select_grouped_gemm("masked", 1 << 40, 16, 256, 256), "groups"),
    (lambda: fp8jit.emit(""), "not valid JSON"),
    (lambda: fp8jit.emit({}), "family"),
    (lambda: fp8jit.select_gemm(16, 16, 16, scale="bogus"), "scale"),
    (lambda: fp8jit.select_gemm(16, 16, 16, out="int8"), "out"),
    (lambda: fp8jit.select_gemm(16, 16, 16, a_format="e3m4"), "a_format"),
    (lambda: fp8jit.select_grouped_gemm("dense", 4, 16, 256, 256), "layout"),
    (lambda: fp8jit.select_grouped_gemm("masked", 0, 16, 256, 256), "groups"),
    (lambda: fp8jit.select_grouped_gemm("masked", 4, 0, 256, 256), "expected_m"),
    (lambda: fp8jit.select_grouped_gemm("masked", 4, 16, 256, 256, scale="group"), "scale"),
    (lambda: fp8jit.emit({"family": "gemm", "config": {"block_m": 7}}), "gemm"),
    (lambda: fp8jit.emit({**GEMM_SPEC, "config": {**GEMM_SPEC["config"], "block_n": 100}}), "block_n"),
    (lambda: fp8jit.emit("{not json"), "not valid JSON"),
    (lambda: fp8jit.emit(42), "spec"),
    (lambda: fp8jit.compile({"family": "nope"}), "family"),
])
def test_bad_arguments_raise_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_raw_operations_check_arguments_before_any_launch():
    # Null pointers: refused by the runtime's checks (ValueError), before it needs a GPU.
    with pytest.raises(ValueError):
        _fp8jit.gemm(0, "e4m3", 0, 0, "e4m3", 0, 0, "bf16", 0, 128, 128, 128, "block", 0, 0, "col_major_tma", 0, 0,
                     "row_major", 0, False, 0, 0)
    with pytest.raises(ValueError, match="max_sms"):
        _fp8jit.gemm(16, "e4m3", 0, 16, "e4m3", 0, 16, "bf16", 0, 128, 128, 128, "block", 16, 1, "row_major", 16, 1,
                     "row_major", 0, False, -1, 0)
    with pytest.raises(ValueError, match="scale_mode"):
        _fp8jit.gemm(16, "e4m3", 0, 16, "e4m3", 0, 16, "bf16", 0, 128, 128, 128, "nope", 16, 1, "row_major", 16, 1,
                     "row_major", 0, False, 0, 0)
    with pytest.raises(ValueError):
        _fp8jit.quantize(0, "bf16", 128, 128, 0, 0, "e4m3", 0, 0, "1x128", "row_major", False, 0, 0, 0, 0, 0, 0)
    with pytest.raises(ValueError, match="granularity"):
        _fp8jit.dequantize(16, "e4m3", 128, 128, 0, 16, "64x64", "row_major", 16, "bf16", 0, 0)


def test_tune_checks_its_options_before_anything_else():
    # Refused before torch is imported or a tensor looked at: the same error with or without either.
    for kw, match in (({"iters": 0}, "iters"), ({"top_k": -1}, "top_k"), ({"warmup": -2}, "warmup"),
                      ({"jobs": -1}, "jobs"), ({"iters": 2.5}, "iters"), ({"top_k": True}, "top_k")):
        with pytest.raises(ValueError, match=match):
            fp8jit.tune(object(), object(), object(), object(), **kw)
        with pytest.raises(ValueError, match=match):
            fp8jit.tune_grouped("masked", object(), object(), object(), object(), object(), **kw)
    for bad in ("t", 3, object()):  # more tables: a sequence of them, refused before any tensor is read
        with pytest.raises(ValueError, match="more_group_rows"):
            fp8jit.tune_grouped("masked", object(), object(), object(), object(), object(), more_group_rows=bad)
    args = (16, "e4m3", 128, 16, "e4m3", 128, 16, "bf16", 128, 128, 128, 128, "block", 16, 1, "row_major", 16, 1,
            "row_major", 0, False, 0)
    with pytest.raises(ValueError, match="iters"):
        _fp8jit.tune_gemm(*args, 8, 1, 0, 0)
    with pytest.raises(ValueError, match="scale_mode"):
        _fp8jit.tune_gemm(*args[:12], "nope", *args[13:], 8, 1, 5, 0)


def test_precompile_model_compiles_a_model_s_kernels(tmp_path):
    config = {"model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072, "num_attention_heads": 16,
              "num_key_value_heads": 4, "head_dim": 64}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    rows = fp8jit.precompile_model(str(path), [1, 2, 128], tp=2)
    whats = {r["what"] for r in rows}
    assert {"self_attn.qkv_proj", "self_attn.o_proj", "mlp.gate_up_proj", "mlp.down_proj"} <= whats
    assert rows[-1]["spec"]["family"] == "quantize"
    assert all(1 <= r["m_min"] <= r["m_max"] <= 128 for r in rows)
    assert fp8jit.precompile_model(config, [1, 2, 128], tp=2) == rows  # a dict works too
    with pytest.raises(ValueError, match="tp = 3"):
        fp8jit.precompile_model(config, [1], tp=3)
    with pytest.raises(ValueError, match="gpt2"):
        fp8jit.precompile_model({"model_type": "gpt2"}, [1])
    with pytest.raises(ValueError, match="cannot read"):
        fp8jit.precompile_model(str(tmp_path / "missing.json"), [1])
    with pytest.raises(ValueError, match="ms"):
        fp8jit.precompile_model(config, [1.5])


def test_messages_go_to_python_logging(caplog):
    import logging
    got = []
    try:
        _fp8jit.set_log_callback(lambda level, message: got.append((level, message)))
        _fp8jit.set_log_level(3)
        fp8jit.compile(QUANT_SPEC)  # compiled, or read from the disk cache: either is reported at debug
        assert any(fp8jit.spec_name(QUANT_SPEC) in m for _, m in got), got
        with pytest.raises(ValueError, match="callable"):
            _fp8jit.set_log_callback(42)
        with pytest.raises(ValueError, match="log level"):
            _fp8jit.set_log_level(7)
        caplog.set_level(logging.DEBUG, logger="fp8jit")
        fp8jit.log_to_python()
        fp8jit.compile(QUANT_SPEC)
        assert any(r.name == "fp8jit" and fp8jit.spec_name(QUANT_SPEC) in r.getMessage() for r in caplog.records)
    finally:
        _fp8jit.set_log_callback(None)
        _fp8jit.set_log_level(1)


def test_scale_count_follows_the_layouts():
    assert _fp8jit.scale_count("1x128", "row_major", 5, 300) == 15
    assert _fp8jit.scale_count("1x128", "col_major_tma", 5, 300) == 24  # 5 rows padded to 8
    assert _fp8jit.scale_count("128x128", "row_major", 300, 300) == 9
    assert _fp8jit.scale_count("tensor", "row_major", 300, 300) == 1


def test_operations_without_torch_or_gpu_raise_clearly():
    try:
        import torch  # noqa: F401
    except ImportError:
        with pytest.raises(RuntimeError, match="torch"):
            fp8jit.quantize(object())
        return
    with pytest.raises(ValueError, match="CUDA"):
        fp8jit.quantize(torch.zeros(4, 128, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="torch.Tensor"):
        fp8jit.gemm([1], [2], [3], [4])


def test_pyproject_version_is_the_library_version():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    path = os.path.join(os.path.dirname(__file__), "..", "pyproject.toml")
    with open(path, "rb") as f:
        assert tomllib.load(f)["project"]["version"] == fp8jit.__version__


def test_the_committed_stubs_are_the_module_s(tmp_path):
    stubgen = pytest.importorskip("nanobind.stubgen")
    out = tmp_path / "_fp8jit.pyi"
    stubgen.main(["-q", "-m", "fp8jit._fp8jit", "-o", str(out)])
    committed = os.path.join(os.path.dirname(__file__), "..", "fp8jit", "_fp8jit.pyi")
    with open(committed, encoding="utf-8") as f:
        assert out.read_text(encoding="utf-8") == f.read(), \
            "python/fp8jit/_fp8jit.pyi is stale: python3 -m nanobind.stubgen -m fp8jit._fp8jit -o python/fp8jit/_fp8jit.pyi"


def test_deepseek_drop_in_checks_its_arguments_first():
    import fp8jit.deepseek as ds
    with pytest.raises(ValueError, match="block_size"):
        ds.act_quant(object(), block_size=64)
    with pytest.raises(ValueError, match="scale_fmt"):
        ds.act_quant(object(), scale_fmt="e8m0")
    with pytest.raises(ValueError, match="block_size"):
        ds.weight_dequant(object(), object(), block_size=256)


def test_deepseek_arithmetic_is_a_quantize_problem_parameter():
    ds = {**QUANT_SPEC, "problem": {**QUANT_SPEC["problem"], "arithmetic": "deepseek"}}
    assert fp8jit.spec_name(ds) == "quant_sm90_bf16_e4m3_1x128_ds_v8_t256_u2"
    src = fp8jit.emit(ds)
    assert "/*DEEPSEEK=*/true" in src
    assert fp8jit.compile(ds)[:4] == b"\x7fELF"
    # ieee is the value a spec without the parameter has (specs saved before it still name and
    # hash the same kernel), and it is left out of the JSON.
    ieee = {**QUANT_SPEC, "problem": {**QUANT_SPEC["problem"], "arithmetic": "ieee"}}
    assert fp8jit.spec_name(ieee) == fp8jit.spec_name(QUANT_SPEC)
    assert '"arithmetic"' not in fp8jit.emit(ieee).splitlines()[0]
    for problem in ({"granularity": "128x128"}, {"format": "e5m2"}, {"transpose": 1}, {"arithmetic": "triton"}):
        bad = {**ds, "problem": {**ds["problem"], **problem}}
        if "granularity" in problem:
            bad["config"] = {**bad["config"], "unroll": 1}
        with pytest.raises(ValueError, match="arithmetic"):
            fp8jit.emit(bad)
    with pytest.raises(ValueError, match="arithmetic"):
        _fp8jit.quantize(16, "bf16", 128, 128, 0, 16, "e4m3", 0, 16, "1x128", "row_major", False, 0, 0, 0, 0, 0, 0,
                         "deepseek-ish")


def test_importing_fp8jit_before_torch_works():
    """`import fp8jit, torch` aborted once (the extension's NVRTC and fmt loaded before torch's)."""
    pytest.importorskip("torch")
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", "import fp8jit, torch; print(torch.__version__)"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]


def test_max_sms_is_checked_and_huge_means_every_sm():
    from fp8jit import _ops

    assert _ops._max_sms(0) == 0 and _ops._max_sms(100) == 100
    assert _ops._max_sms(2**40) == 2**31 - 1  # more SMs than any GPU has: all of them
    for bad in (-1, True, 2.5, None, "8"):
        with pytest.raises(ValueError, match="max_sms"):
            _ops._max_sms(bad)


def test_set_pdl_switches_the_runtime_and_refuses_non_bools():
    was = fp8jit.pdl()
    try:
        fp8jit.set_pdl(True)
        assert fp8jit.pdl() is True
        fp8jit.set_pdl(False)
        assert fp8jit.pdl() is False
        for bad in (1, 0, "yes", None, 1.0):
            with pytest.raises(ValueError, match="enabled"):
                fp8jit.set_pdl(bad)
            assert fp8jit.pdl() is False  # unchanged
    finally:
        fp8jit.set_pdl(was)
