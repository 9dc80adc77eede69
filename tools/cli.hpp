// The `fp8jit` command-line tool: each subcommand is declared once with CLI11, and that one
// declaration parses its options, checks their types and ranges, and writes its `--help`.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <string>

#include "fp8jit/kernel_spec.hpp"

namespace fp8jit::cli {

// Registers each command family on the application.
void add_kernel_commands(CLI::App& app);  // info, list, emit, compile, compile-all
void add_run_commands(CLI::App& app);     // quantize, dequantize, demo
void add_gemm_commands(CLI::App& app);    // gemm, select-gemm
void add_tune_commands(CLI::App& app);    // tune, precompile
void add_db_command(CLI::App& app);       // db list|show|export|import|prune|rebuild
void add_bench_command(CLI::App& app);    // bench
void add_cast_command(CLI::App& app);     // cast

// Runs `body` as the subcommand's action; its return value becomes the process's exit status.
void on_run(CLI::App* sub, std::function<int()> body);

// A spec from inline JSON or from a regular file holding it.
KernelSpec read_spec(const std::string& json_or_path);

// Prints "fp8jit <command>: <message>" on stderr, control bytes escaped: the one error format.
void report(const std::string& command, const std::string& message);

// Throws Error(driver) "needs a GPU: <why>" where no CUDA device can be used. Commands call it
// after every other check, so a typo is reported on any machine.
void require_gpu();

}  // namespace fp8jit::cli
