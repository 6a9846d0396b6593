// lookalike: find similar images. See README.md or `lookalike --help`.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <iostream>
#include <string>
#include <vector>

#include "tools/cli.h"

namespace {
std::atomic<bool> g_cancel{false};

extern "C" void OnSignal(int sig) {
  // First signal: finish the current batch and exit cleanly; second: default.
  g_cancel.store(true);
  std::signal(sig, SIG_DFL);
}
}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::vector<std::string> args(argv + 1, argv + argc);
  return lookalike::RunCli(args, std::cout, std::cerr, ::isatty(2) == 1, &g_cancel);
}
