// `fp8jit tune --all-gpus`: one tuning process per visible GPU, each on its shard of the shapes,
// all into one WAL database.
#pragma once

#include <string>
#include <vector>

namespace fp8jit::cli {

// Runs this executable once per device d of `devices` with `args` (a complete `tune` command)
// plus `--device d --shard d/devices`, in parallel; then prints each process's output, in device
// order. Returns 0 when all succeeded, else the first failing status.
int tune_on_all_gpus(const std::vector<std::string>& args, int devices);

}  // namespace fp8jit::cli
