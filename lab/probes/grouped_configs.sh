#!/usr/bin/env bash
# Builds lab/probes/grouped_configs.cpp against LIB/libfp8jit.so (default build-peers) and times
# the MoE suite's masked cases (or CASES: lines "LAYOUT G M EXPECTED N K") with the runtime's
# choice and the configs of CONFIGS (one per line; default: pairs along M and along N of the
# tiles DeepGEMM 2.6.1's SM90 heuristic takes there), interleaved in one process per case.
# Usage (repo root, device, after lab/scripts/grouped_session.sh built build-peers):
#   bash lab/probes/grouped_configs.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
LIB=$(cd "${LIB:-build-peers}" && pwd) || exit 1
g++ -std=c++20 -O2 -Iinclude -I"$LIB/generated/include" -I"$CUDA_HOME/include" lab/probes/grouped_configs.cpp \
  -L"$LIB" -lfp8jit -Wl,-rpath,"$LIB" -L"$CUDA_HOME/lib64/stubs" -lcuda -o /tmp/grouped_configs || exit 1
CASES=${CASES:-"masked 32 128 16 4096 7168
masked 32 256 32 4096 7168
masked 32 256 64 4096 7168
masked 16 256 128 4096 7168
masked 8 1024 256 4096 7168
masked 32 128 16 7168 2048
masked 32 256 32 7168 2048
masked 32 256 64 7168 2048
masked 16 256 128 7168 2048
masked 8 1024 256 7168 2048"}
CONFIGS=${CONFIGS:-'"block_m":128,"block_n":192,"stages":4,"cluster_m":2
"block_m":128,"block_n":256,"stages":3,"cluster_m":2
"block_m":128,"block_n":128,"stages":5,"cluster_m":2
"block_m":128,"block_n":128,"stages":5,"cluster_n":2
"block_m":64,"block_n":128,"stages":8,"cluster_m":2
"block_m":64,"block_n":256,"stages":4,"cluster_m":2
"block_m":64,"block_n":192,"stages":6,"cluster_m":2'}
mapfile -t configs <<< "$CONFIGS"
# Masked cases run twice: with the probe's own draw of rows per group, and with the draw of
# bench/peers/grouped_peers.py (torch's generator), so that no rule fits one routing.
peers_counts() {
  python3 -c "import sys, torch; sys.path.insert(0, 'bench/peers'); from grouped_peers import masked_counts
print(' '.join(map(str, masked_counts(torch, $1, $2, $3).tolist())))"
}
while read -r layout g m e n k; do
  [ -z "$layout" ] && continue
  TABLE= timeout 120 /tmp/grouped_configs "$layout" "$g" "$m" "$e" "$n" "$k" heuristic "${configs[@]}" 2>&1
  [ "$layout" = masked ] && [ "${PEERS_ROUTING:-1}" = 1 ] &&
    TABLE=$(peers_counts "$g" "$m" "$e") timeout 120 /tmp/grouped_configs "$layout" "$g" "$m" "$e" "$n" "$k" \
      heuristic "${configs[@]}" 2>&1
done <<< "$CASES"
