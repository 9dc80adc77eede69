// fp8jit: inspect, compile, tune and run the generated FP8 kernels.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <system_error>

#include "fp8jit/error.hpp"
#include "fp8jit/fp8jit.h"
#include "runtime/jit/driver.hpp"
#include "common/file_io.hpp"
#include "tools/cli.hpp"

namespace fp8jit::cli {
namespace {

int g_status = 0;

// "db rebuild" for `fp8jit db rebuild ...`: the subcommands that were selected, outermost first.
std::string command_path(const CLI::App& app) {
  std::string path;
  for (const CLI::App* a = &app; !a->get_subcommands().empty();) {
    a = a->get_subcommands().front();
    path += (path.empty() ? "" : " ") + a->get_name();
  }
  return path;
}

// The first word that names no command where a command is expected ("db vacuum": "vacuum"), so
// that it is named as unknown rather than reported as a missing subcommand.
std::string unknown_command(CLI::App& app, int argc, char** argv, std::string& parent) {
  CLI::App* at = &app;
  for (int i = 1; i < argc && argv[i][0] != '-'; ++i) {
    if (at->get_subcommands([](CLI::App*) { return true; }).empty()) break;  // a leaf takes no words
    const auto named = at->get_subcommands([&](CLI::App* a) { return a->check_name(argv[i]); });
    if (named.empty()) return argv[i];
    parent += (parent.empty() ? "" : " ") + named.front()->get_name();
    at = named.front();
  }
  return "";
}

}  // namespace

// One prefix, escaped text: an argument echoed back may hold control bytes.
void report(const std::string& command, const std::string& message) {
  std::string text;
  for (std::size_t start = 0; start <= message.size();) {  // keep line breaks, escape the rest
    std::size_t nl = std::min(message.find('\n', start), message.size());
    text += (start ? "\n" : "") + printable(std::string_view(message).substr(start, nl - start), 4000);
    start = nl + 1;
  }
  fmt::print(stderr, "fp8jit{}{}: {}\n", command.empty() ? "" : " ", command, text);
}

void on_run(CLI::App* sub, std::function<int()> body) {
  sub->callback([body = std::move(body)] { g_status = body(); });
}

void require_gpu() {
  if (!driver::available()) throw Error(ErrorKind::driver, "needs a GPU: " + driver::unavailable_reason());
}

}  // namespace fp8jit::cli

namespace {

// Set once a failed write to stdout has been reported: what is still buffered fails again at the
// final flush, and the user should read the reason once.
bool g_output_failure_reported = false;

// Output that could not be written (a full disk, a closed pipe) is a failure of the command.
int finish(int status) {
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    if (g_output_failure_reported) return status == 0 ? 1 : status;
    fmt::print(stderr, "fp8jit: cannot write the output: {}\n", std::strerror(errno));
    return 1;
  }
  return status;
}

int run(int argc, char** argv) {
  using namespace fp8jit::cli;
  CLI::App app{"fp8jit: generates, compiles (NVRTC, sm_90a), tunes and runs FP8 kernels for NVIDIA Hopper.\n"
               "Commands that run kernels need a GPU; the rest work anywhere.",
               "fp8jit"};
  app.set_version_flag("--version", std::string("fp8jit ") + fp8jit_version());
  app.require_subcommand(1, 1);
  app.fallthrough(false);
  add_kernel_commands(app);
  add_run_commands(app);
  add_gemm_commands(app);
  add_tune_commands(app);
  add_db_command(app);
  add_bench_command(app);
  add_cast_command(app);
  if (argc < 2) {
    fmt::print(stderr, "{}", app.help());
    return 2;
  }
  std::string parent;
  if (const std::string word = unknown_command(app, argc, argv, parent); !word.empty()) {
    report(parent, fmt::format("unknown command \"{}\"; `fp8jit {}{}--help` lists the commands", word, parent,
                               parent.empty() ? "" : " "));
    return 2;
  }
  try {
    app.parse(argc, argv);
    return g_status;
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    const std::string cmd = command_path(app);
    report(cmd, fmt::format("{}\nRun `fp8jit {}{}--help` for the options.", e.what(), cmd, cmd.empty() ? "" : " "));
    return 2;
  } catch (const fp8jit::Error& e) {
    report(command_path(app), e.what());
    return 1;
  } catch (const std::system_error& e) {  // fmt's failed writes to stdout
    report(command_path(app), std::string("cannot write the output: ") + e.code().message());
    g_output_failure_reported = true;
    return 1;
  } catch (const std::exception& e) {
    report(command_path(app), std::string("unexpected error: ") + e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return finish(run(argc, argv));
  } catch (const std::exception& e) {  // building the parser or printing help failed
    fp8jit::cli::report("", e.what());
    return 1;
  }
}
