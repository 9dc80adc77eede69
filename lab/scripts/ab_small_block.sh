#!/usr/bin/env bash
# A/B of the working tree against a tarball of the tree before a change (`git archive -o
# .carry/after.tar.gz HEAD` before editing; carry it) on block-scaled GEMMs, decode shapes of both
# lists plus two large ones, `fp8jit gemm` once per shape and build (median of 50, L2 flushed,
# checked against the reference). Also runs the GemmGpu tests on the changed build. Logs in $OUT.
set -uo pipefail
sq=(-DSQLite3_INCLUDE_DIR=$PWD/.carry/sqlite -DSQLite3_LIBRARY=/lib/x86_64-linux-gnu/libsqlite3.so.0)
mkdir -p /tmp/base-src && tar -xzf .carry/after.tar.gz -C /tmp/base-src
(cmake -S /tmp/base-src -B /tmp/base-build -DCMAKE_BUILD_TYPE=Release "${sq[@]}" >/dev/null && cmake --build /tmp/base-build -j8 --target fp8jit_cli >$OUT/build_base.log 2>&1) &
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release "${sq[@]}" >/dev/null && cmake --build build-gpu -j8 --target fp8jit_cli fp8jit_gpu_tests >$OUT/build_new.log 2>&1 || { tail -20 $OUT/build_new.log; exit 1; }
wait || exit 1
FP8JIT_CACHE_DIR=/tmp/c-new ./build-gpu/tests/fp8jit_gpu_tests --gtest_filter='GemmGpu.*:-GemmGpu.Ffma*:GemmGpu.*Tune*' --gtest_brief=1 >$OUT/gpu_tests.log 2>&1; tail -3 $OUT/gpu_tests.log
t() { "$1" gemm --m $2 --n $3 --k $4 --scale block --iters 50 ${5:+--config "$5"} 2>&1 | tail -1 | sed -n 's/^\([^ ]*\) .*: \([0-9.]*\) ms.*(\(within\|ABOVE\).*/\1 \2 \3/p'; }
echo "| shape | config | kernel | base µs | new µs | new/base |"
echo "| --- | --- | --- | ---: | ---: | --- |"
while read -r m n k cfg; do

    b=$(FP8JIT_CACHE_DIR=/tmp/c-base t /tmp/base-build/fp8jit $m $n $k "$cfg"); a=$(FP8JIT_CACHE_DIR=/tmp/c-new t ./build-gpu/fp8jit $m $n $k "$cfg")

  read -r kb bms bc <<<"$b"; read -r ka ams ac <<<"$a"
  echo "| ${m}x${n}x${k} | ${cfg:-default} | $ka | $(awk -v x=$bms 'BEGIN{printf "%.1f", x*1000}') | $(awk -v x=$ams 'BEGIN{printf "%.1f", x*1000}') | $(awk -v a=$ams -v b=$bms 'BEGIN{printf "%.3f", a/b}') $bc/$ac |"
done <<'LIST'
64 2112 7168
128 2112 7168
64 4096 7168
128 4096 7168
64 7168 2048
128 7168 2048
64 24576 1536
64 32768 512
128 32768 512
64 7168 16384
16 1536 2048
1 6144 4096
37 28672 4096
16 10240 8192
64 57344 8192
128 2112 7168 {"block_m":64,"block_n":32,"stages":8}
4096 4096 7168
4096 7168 2048
LIST
