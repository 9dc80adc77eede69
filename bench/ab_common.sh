# Shared by bench/ab.sh and bench/ab_tune.sh (sourced from the repo root, OUT set): builds one
# CMake target per variant — the tree as it is, then a plain copy with each patch applied — and
# hands each build tree to the caller's `measure NAME BUILD_DIR`.

sqlite_args=()
if [ ! -f /usr/include/sqlite3.h ] && [ -f .carry/sqlite/sqlite3.h ]; then
  # A machine with the SQLite runtime but no headers: the header travels with the tree.
  sqlite_args=(-DSQLite3_INCLUDE_DIR="$PWD/.carry/sqlite" -DSQLite3_LIBRARY=/lib/x86_64-linux-gnu/libsqlite3.so.0)
fi

ab_variant() {  # target, name, source dir[, existing build tree]
  local target=$1 name=$2 src=$3 b=${4:-/tmp/fp8jit-ab-build/$2}
  cmake -S "$src" -B "$b" -DCMAKE_BUILD_TYPE=Release "${sqlite_args[@]}" > "$OUT/$name.cmake.log" 2>&1 &&
    cmake --build "$b" -j"$(nproc)" --target "$target" > "$OUT/$name.build.log" 2>&1 ||
    { echo "== $name: build failed"; tail -20 "$OUT/$name.build.log"; return 1; }
  measure "$name" "$b"
}

# ab_all TARGET PATCH...: the base (AB_BASE_BUILD=DIR reuses that build tree), then each patch.
ab_all() {
  local target=$1 patch name dir
  shift
  ab_variant "$target" base "$PWD" "${AB_BASE_BUILD:-}"
  for patch in "$@"; do
    name=$(basename "$patch" .patch)
    dir=/tmp/fp8jit-ab-src/$name
    # A plain copy (the device machine's tree may have no .git), build trees left out.
    rm -rf "$dir" && mkdir -p "$dir" &&
      tar -c --exclude='./build*' --exclude=./.git --exclude='./bench/results' . | tar -x -C "$dir"
    patch -s -p1 -d "$dir" < "$patch" || { echo "== $name: patch does not apply"; continue; }
    ab_variant "$target" "$name" "$dir"
  done
}
