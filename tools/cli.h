// The `lookalike` command line: parses arguments (the only Boost.Program_options
// code in the project), calls the library, prints results, returns the exit
// code. main() is a thin wrapper so tests can call RunCli directly.
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

// Escapes a path for one TSV field or table cell: backslash, tab, newline,
// carriage return and other control bytes become \\, \t, \n, \r, \xHH, so no
// byte in a file name can break a line. Other bytes (UTF-8 or not) pass as is.
std::string EscapeField(const std::string& s);

// JSON string literal (with quotes). Valid UTF-8 passes through; control
// characters are \u escaped; bytes that are not valid UTF-8 become \u00XX of
// the byte value with the string also marked lossy by the caller if needed.
std::string JsonString(const std::string& s);

}  // namespace lookalike
