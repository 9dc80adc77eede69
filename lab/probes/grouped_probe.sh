#!/usr/bin/env bash
# Builds lab/probes/grouped_probe.cpp against build-peers/libfp8jit.so and times the grouped
# contiguous kernel against dense loops over specs (PROBE_CASES lines "G PER N K CONFIG [DENSE_CONFIG]",
# CONFIG the gemm config JSON fields), then profiles PROBE_NCU (one such line) under Nsight Compute.
# LIB: the build folder whose libfp8jit.so runs (default build-peers; e.g. a patch's build from
# grouped_probe_patches.sh); NCU_LAUNCHES: the launches profiled (default "0 19": the grouped
# kernel and the first dense one).
# Usage (repo root, device, after lab/scripts/grouped_session.sh built build-peers): OUT=... bash lab/probes/grouped_probe.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
OUT=${OUT:-/tmp/fp8jit-probe}
mkdir -p "$OUT"
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
LIB=$(cd "${LIB:-build-peers}" && pwd) || exit 1
g++ -std=c++20 -O2 -Iinclude -I"$LIB/generated/include" -I"$CUDA_HOME/include" lab/probes/grouped_probe.cpp \
  -L"$LIB" -lfp8jit -Wl,-rpath,"$LIB" -L"$CUDA_HOME/lib64/stubs" -lcuda -o /tmp/grouped_probe || exit 1
spec() {  # config fields, layout -> spec JSON
  echo "{\"family\":\"gemm\",\"config\":{$1},\"problem\":{\"a_format\":\"e4m3\",\"accum\":\"precise\",\"b_format\":\"e4m3\",\"bias\":0,\"out\":\"bf16\",\"scale\":\"block\"$2}}"
}
while read -r g per n k cfg dcfg; do
  [ -z "$g" ] && continue
  timeout 120 /tmp/grouped_probe "$g" "$per" "$n" "$k" "$(spec "$cfg" ',"layout":"contiguous"')" "$(spec "${dcfg:-$cfg}" '')" 2>&1
done <<< "${PROBE_CASES:-}"
if [ -n "${PROBE_NCU:-}" ]; then
  read -r g per n k cfg dcfg <<< "$PROBE_NCU"
  metrics=gpu__time_duration.sum,smsp__inst_executed.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed
  metrics+=,lts__t_bytes.sum,lts__t_sectors_srcunit_tex.sum,lts__t_sectors_srcunit_ltcfabric.sum,lts__t_sector_hit_rate.pct
  metrics+=,dram__bytes_read.sum,l1tex__m_xbar2l1tex_read_bytes.sum,smsp__cycles_active.avg
  metrics+=,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum
  metrics+=,lts__t_sectors_srcunit_tex_op_atom.sum,lts__t_sectors_srcunit_tex_op_red.sum
  metrics+=,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum
  metrics+=,l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum
  metrics+=,smsp__inst_executed_op_global_ld.sum,smsp__inst_executed_op_generic_ld.sum,smsp__inst_executed_op_generic_st.sum
  metrics+=,smsp__inst_executed_op_ldgsts.sum,smsp__inst_executed_op_shared_ld.sum
  # Launch 0: the grouped kernel; launch 19: the first dense one (after 18 timed grouped calls).
  for skip in ${NCU_LAUNCHES:-0 19}; do
    timeout 300 ncu --clock-control none --kernel-name fp8jit_gemm --launch-skip $skip --launch-count 1 --metrics "$metrics" \
      --section WarpStateStats --section SourceCounters --print-units base -o "$OUT/probe_$skip" \
      /tmp/grouped_probe "$g" "$per" "$n" "$k" "$(spec "$cfg" ',"layout":"contiguous"')" "$(spec "${dcfg:-$cfg}" '')" \
      > "$OUT/probe_ncu_$skip.log" 2>&1
    echo "ncu (launch $skip) exit $?"
    ncu -i "$OUT/probe_$skip.ncu-rep" --print-units base > "$OUT/probe_ncu_$skip.txt" 2>&1
    # Per-instruction executed counts and sectors, to find what one kernel runs that the other does not.
    ncu -i "$OUT/probe_$skip.ncu-rep" --page source --csv --print-source sass > "/tmp/probe_src_$skip.csv" 2>&1
    echo "source page exit $?"
    python3 lab/probes/top_stalls.py "/tmp/probe_src_$skip.csv" 60 > "$OUT/probe_stalls_$skip.txt" 2>&1
    gzip -c "/tmp/probe_src_$skip.csv" > "$OUT/probe_src_$skip.csv.gz"
    rm -f "$OUT/probe_$skip.ncu-rep"
  done
fi
