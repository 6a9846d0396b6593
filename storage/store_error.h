// The one exception the store throws: what failed, as a kind the CLI maps to
// an exit code, and a message that already says what to do.
#pragma once

#include <stdexcept>
#include <string>

namespace lookalike {

// Failure to open or write a database. kind() lets the CLI choose the exit
// code and message; what() already says what to do.
class StoreError : public std::runtime_error {
 public:
  enum class Kind {
    kNotFound,
    kNotADatabase,
    kLocked,
    kSchema,
    kModel,
    kCorrupt,
    kIo,
    kConflict,  // merge: an image path held by two inputs
  };
  StoreError(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

}  // namespace lookalike
