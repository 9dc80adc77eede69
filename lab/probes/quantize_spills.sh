#!/usr/bin/env bash
# Registers and local memory of the register-tile quantize kernels (1x128 / 128x128, 256 and 512
# threads, every vector width, bf16 and fp32 input), from `fp8jit compile` and cuobjdump.
# Usage (repo root, on the device, after tests/gpu/verify-all.sh build): bash lab/probes/quantize_spills.sh
for g in 1x128 128x128; do for t in 256 512; do for v in 4 8 16; do for i in bf16 fp32; do for tr in 0 1; do
  [ $g = 1x128 ] && [ $tr = 0 ] && continue  # 1x128 without a transpose streams
  spec="{\"family\":\"quantize\",\"problem\":{\"input\":\"$i\",\"format\":\"e4m3\",\"granularity\":\"$g\",\"transpose\":$tr},\"config\":{\"vec\":$v,\"threads\":$t,\"unroll\":1}}"
  ./build-gpu/fp8jit compile --spec "$spec" --cubin /tmp/q.cubin > /dev/null 2>&1 || { echo "skip $g $i v$v t$t"; continue; }
  echo "$g $i v$v t$t tr$tr: $(cuobjdump -res-usage /tmp/q.cubin 2>/dev/null | grep -A1 fp8jit_quantize | grep -o 'REG:[0-9]* STACK:[0-9]*\|LOCAL:[0-9]*' | tr '\n' ' ')"
done; done; done; done; done
