// Command-line flags of the subcommands (the only Boost.Program_options code
// in the project). Each flag is declared once, bound to the option-struct
// field it sets, and shows in --help the value that field has in a
// default-constructed struct, so defaults are never typed twice.
#pragma once

#include <boost/program_options.hpp>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace lookalike {

// A usage error: printed with a hint to --help, exit code 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The shortest decimal that reads back as the float `v` (0.04f prints as
// 0.04, not 0.0399999991); integers print without a fraction.
std::string Shortest(double v);

// One group of flags ("run", "model (...)") shown under its caption in --help.
// Not thread-safe; lives for one command invocation.
class FlagGroup {
 public:
  explicit FlagGroup(const std::string& caption) : desc_(caption) {}

  // --name VALUE into *field; default `def` (the default struct's value).
  template <class T>
  void Value(const char* name, T* field, const T& def, const char* help) {
    *field = def;
    desc_.add_options()(name, boost::program_options::value(field)->default_value(def), help);
    names_.push_back(LongName(name));
  }
  // A float or double: the default is shown as its shortest decimal.
  void Number(const char* name, float* field, float def, const char* help);
  void Number(const char* name, double* field, double def, const char* help);
  // --name on|off (also true/false, 1/0, yes/no) into a bool.
  void OnOff(const char* name, bool* field, bool def, const char* help);
  // --name TEXT parsed after the command line is read (an enum, a unit
  // conversion): `parse` gets the text and throws std::invalid_argument
  // naming the flag on a bad value.
  void Text(const char* name, const std::string& def, const char* help,
            std::function<void(const std::string&)> parse);
  // --name VALUE without a default (a path); empty when not given.
  void Path(const char* name, std::string* field, const char* help);
  // --name VALUE, repeatable: every value in order; empty when not given.
  void Paths(const char* name, std::vector<std::string>* field, const char* help);
  // --help/-h; ParsedArgs::help tells whether it was given.
  void Help();
  // A flag without a value (--verbose); true when given.
  void Switch(const char* name, bool* field, const char* help);

  const boost::program_options::options_description& description() const { return desc_; }
  // Long names of the flags in this group, in declaration order.
  const std::vector<std::string>& names() const { return names_; }
  // Runs the deferred parsers of Text and OnOff flags; throws UsageError.
  void Finish() const;

 private:
  static std::string LongName(const char* name);  // "verbose,v" -> "verbose"
  boost::program_options::options_description desc_;
  std::vector<std::string> names_;
  std::vector<std::function<void()>> finishers_;
  std::vector<std::unique_ptr<std::string>> texts_;  // storage for Text/OnOff values
};

// The parsed command line of one subcommand.
struct ParsedArgs {
  boost::program_options::variables_map vm;
  bool help = false;
  // True if the user typed --name (not just its default).
  bool Given(const std::string& name) const { return vm.count(name) && !vm[name].defaulted(); }
};

// Parses `args` against the groups plus hidden positional arguments
// (`positional` names, each taking `counts[i]` values, -1 = the rest), then
// finishes every group (unless --help was asked for). Throws UsageError.
ParsedArgs ParseArgs(const std::vector<std::string>& args, const std::vector<FlagGroup*>& groups,
                     const boost::program_options::options_description& hidden,
                     const std::vector<std::pair<const char*, int>>& positional);

// Parses "--shard I/N" (two decimal numbers); "" leaves both 0 (no
// sharding). Throws std::invalid_argument naming the flag; the range is
// checked by IndexOptions::Validate.
void ParseShard(const std::string& text, uint32_t* index, uint32_t* count);

// Prints `usage` and the groups' flags.
void PrintHelp(std::ostream& out, const std::string& usage, const std::vector<FlagGroup*>& groups);

}  // namespace lookalike
