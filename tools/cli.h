// The `lookalike` command line: dispatches to one subcommand per file
// (tools/commands.h), turns usage errors and failures into messages and exit
// codes. main() is a thin wrapper so tests can call RunCli directly.
#pragma once

#include <atomic>
#include <iosfwd>
#include <string>
#include <vector>

namespace lookalike {

// Exit codes of every subcommand.
inline constexpr int kExitOk = 0;       // everything was processed
inline constexpr int kExitPartial = 1;  // finished, but some inputs were skipped
inline constexpr int kExitFatal = 2;    // usage error or fatal error

// Runs `lookalike <args>`; args excludes the program name. `stderr_is_tty`
// enables the interactive progress bar. `cancel` (may be null) stops an
// index run cleanly after the current batch.
int RunCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
           bool stderr_is_tty, const std::atomic<bool>* cancel);

}  // namespace lookalike
