# Sourced by the GPU scripts that need only the CLI: builds build-gpu/fp8jit (Release), with the
# SQLite header from .carry where the machine lacks it; logs to $OUT/$1-{cmake,build}.log.
B=build-gpu
sqlite_args=()
if [ ! -f /usr/include/sqlite3.h ] && [ -f .carry/sqlite/sqlite3.h ]; then
  sqlite_args=(-DSQLite3_INCLUDE_DIR="$PWD/.carry/sqlite" -DSQLite3_LIBRARY=/lib/x86_64-linux-gnu/libsqlite3.so.0)
fi
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release "${sqlite_args[@]}" > "$OUT/$1-cmake.log" 2>&1 || { tail -30 "$OUT/$1-cmake.log"; exit 1; }
cmake --build $B -j"$(nproc)" --target fp8jit_cli > "$OUT/$1-build.log" 2>&1 || { tail -40 "$OUT/$1-build.log"; exit 1; }
