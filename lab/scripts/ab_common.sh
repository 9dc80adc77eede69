# Shared by ab.sh, ab_tune.sh and session.sh in lab/scripts/ (sourced from the repo root, OUT
# set): builds one CMake target per variant — the tree as it is, then a plain copy with each patch
# applied — and hands each build tree to the caller's `measure NAME BUILD_DIR`.

# call_log: a device call's log and clock (tree_check.sh, patch_check.sh): from here on all output
# goes to $OUT/check.log too; `step` prints a line with the seconds since, `left` the seconds
# before LIMIT_S (default 585, under the device tool's 600).
call_log() {
  mkdir -p "$OUT" || return 1
  start=$(date +%s)
  limit=${LIMIT_S:-585}
  exec > >(tee -a "$OUT/check.log") 2>&1
}
step() { echo "[$(($(date +%s) - start)) s] $*"; }
left() { echo $((limit - ($(date +%s) - start))); }
# wait_builds LOG_PREFIX NAME:PID...: waits for each background build; of one that failed, the
# tail of /tmp/<LOG_PREFIX><NAME>.log; 1 if any failed.
wait_builds() {
  local prefix=$1 b rc=0
  shift
  for b in "$@"; do
    [ -n "${b#*:}" ] || continue
    wait "${b#*:}" || { step "build ${b%%:*} failed:"; tail -20 "/tmp/$prefix${b%%:*}.log"; rc=1; }
  done
  return $rc
}

# call_seconds VALUE: whether VALUE is whole seconds a device call can give a step (1 to 600, its
# limit); for the scripts' checks of their arguments, before anything is written.
call_seconds() { [[ $1 =~ ^[0-9]{1,3}$ ]] && [ "$1" -ge 1 ] && [ "$1" -le 600 ]; }
# time_configs LIST SECONDS: lab/scripts/configs.sh over LIST on the tree's CLI (build-gpu) into
# $OUT/configs.md, within SECONDS, its own cache of kernels.
time_configs() {
  step "configs $1 within $2 s"
  FP8JIT_CACHE_DIR=/tmp/fp8jit-configs-cache timeout "$2" bash lab/scripts/configs.sh "$1" build-gpu \
    > "$OUT/configs.md" 2>&1
  step "configs rc $? ($(grep -c '^| [0-9]' "$OUT/configs.md") lines)"
}

sqlite_args=()
if [ ! -f /usr/include/sqlite3.h ] && [ -f .carry/sqlite/sqlite3.h ]; then
  # A machine with the SQLite runtime but no headers: the header travels with the tree.
  sqlite_args=(-DSQLite3_INCLUDE_DIR="$PWD/.carry/sqlite" -DSQLite3_LIBRARY=/lib/x86_64-linux-gnu/libsqlite3.so.0)
fi

# gemm_args M N K SCALE: fills the array `args` with `fp8jit gemm`'s options for a line of a
# configs list. SCALE-fast: fast accumulation (--fast-accum); SCALE-rowscales: A's scales
# row-major (--scale-layout-a row_major); SCALE-bias: with a bias (--bias); suffixes combine.
gemm_args() {
  args=(gemm --m "$1" --n "$2" --k "$3" --scale "${4%%-*}" --iters 30)
  [[ "$4" == *-fast* ]] && args+=(--fast-accum)
  [[ "$4" == *-rowscales* ]] && args+=(--scale-layout-a row_major)
  [[ "$4" == *-bias* ]] && args+=(--bias)
  return 0
}

ab_variant() {  # target, name, source dir[, existing build tree]
  local target=$1 name=$2 src=$3 b=${4:-/tmp/fp8jit-ab-build/$2}
  cmake -S "$src" -B "$b" -DCMAKE_BUILD_TYPE=Release "${sqlite_args[@]}" > "$OUT/$name.cmake.log" 2>&1 &&
    cmake --build "$b" -j"$(nproc)" --target "$target" > "$OUT/$name.build.log" 2>&1 ||
    { echo "== $name: build failed"; tail -20 "$OUT/$name.build.log"; return 1; }
  measure "$name" "$b"
}

# ab_patch_tree PATCH: a plain copy of the tree (the device machine's may have no .git; build
# trees, results and lab/ left out) at /tmp/fp8jit-ab-src/<name> with PATCH applied; fails if it
# does not apply.
ab_patch_tree() {
  local dir=/tmp/fp8jit-ab-src/$(basename "$1" .patch)
  rm -rf "$dir" && mkdir -p "$dir" &&
    tar -c --exclude='./build*' --exclude=./.git --exclude='./bench/results' --exclude=./lab . | tar -x -C "$dir" &&
    patch -s -p1 -d "$dir" < "$1"
}

# ab_gemm_table NAME BUILD_DIR SHAPES SCALES: fp8jit_bench's GEMM suite against cuBLASLt into
# $OUT/NAME.txt (and $OUT/NAME/), its table printed.
ab_gemm_table() {
  FP8JIT_CACHE_DIR=/tmp/fp8jit-ab-cache/$1 "$2/bench/fp8jit_bench" --benchmark_filter='^Gemm/' --shapes="$3" \
    --scales="$4" --providers=fp8jit,cublaslt --out="$OUT/$1" > "$OUT/$1.txt" 2>&1
  echo "== $1"
  sed -n '/^| M/,$p' "$OUT/$1.txt" | cut -d'|' -f2-7,11
}

# ab_all TARGET PATCH...: the base (AB_BASE_BUILD=DIR reuses that build tree), then each patch.
ab_all() {
  local target=$1 patch name
  shift
  ab_variant "$target" base "$PWD" "${AB_BASE_BUILD:-}"
  for patch in "$@"; do
    name=$(basename "$patch" .patch)
    ab_patch_tree "$patch" || { echo "== $name: patch does not apply"; continue; }
    ab_variant "$target" "$name" "/tmp/fp8jit-ab-src/$name"
  done
}
