// The checks option structs' Validate() are written with: one line per
// field, each naming the field and the command-line flag that sets it, so a
// refused value reads the same wherever it came from (a flag, the serve
// API, a test).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace lookalike {

// A field of an option struct ("rerank.depth") and the flag that sets it
// ("--rerank"; null when no flag does).
struct OptionName {
  const char* field;
  const char* flag = nullptr;
};

namespace option_checks {

inline std::string Describe(const OptionName& name) {
  std::string s = name.field;
  if (name.flag) s += std::string(" (") + name.flag + ")";
  return s;
}

template <class T>
std::string Show(T v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

[[noreturn]] inline void Refuse(const OptionName& name, const std::string& rule,
                                const std::string& got, const char* why) {
  std::string message = Describe(name) + " must be " + rule;
  if (why && *why) message += std::string(" (") + why + ")";
  throw std::invalid_argument(message + ", got " + got);
}

}  // namespace option_checks

// Throws std::invalid_argument unless lo <= value <= hi ("must be in
// 0..100" for integers, "[0, 1]" for floating point, which also refuses
// NaN). `why`, when given, is appended to the rule.
template <class T>
void CheckInRange(const OptionName& name, T value, T lo, T hi, const char* why = nullptr) {
  if (value >= lo && value <= hi) return;
  using option_checks::Show;
  const std::string rule = std::is_floating_point<T>::value
                               ? "in [" + Show(lo) + ", " + Show(hi) + "]"
                               : "in " + Show(lo) + ".." + Show(hi);
  option_checks::Refuse(name, rule, Show(value), why);
}

// Throws std::invalid_argument unless value >= lo ("must be >= 5").
template <class T>
void CheckAtLeast(const OptionName& name, T value, T lo, const char* why = nullptr) {
  if (value >= lo) return;
  option_checks::Refuse(name, ">= " + option_checks::Show(lo), option_checks::Show(value), why);
}

// Throws std::invalid_argument unless value > lo ("must be > 0").
template <class T>
void CheckAbove(const OptionName& name, T value, T lo, const char* why = nullptr) {
  if (value > lo) return;
  option_checks::Refuse(name, "> " + option_checks::Show(lo), option_checks::Show(value), why);
}

// Throws std::invalid_argument unless value <= hi ("must be <= 1").
template <class T>
void CheckAtMost(const OptionName& name, T value, T hi, const char* why = nullptr) {
  if (value <= hi) return;
  option_checks::Refuse(name, "<= " + option_checks::Show(hi), option_checks::Show(value), why);
}

}  // namespace lookalike
