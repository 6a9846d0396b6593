// What `index` shows while it runs. On a terminal: one self-updating line
// with the phase, a bar, images/s and ETA. Otherwise no control characters:
// phase lines only when verbose. Per-file errors always go to stderr (and as
// JSON lines to --errors FILE); committed paths to --committed FILE.
#pragma once

#include <chrono>
#include <iosfwd>
#include <string>

#include "indexer/pipeline.h"

namespace lookalike {

// Called from the thread that runs BuildIndex; not thread-safe.
class ProgressObserver final : public IndexObserver {
 public:
  // `errors_jsonl` and `committed` may be null. All streams must outlive it.
  ProgressObserver(std::ostream& err, bool tty, bool verbose, bool quiet,
                   std::ostream* errors_jsonl, std::ostream* committed);

  void OnPhase(const std::string& phase) override;
  void OnStart(int64_t num_to_process) override;
  void OnProgress(int64_t done, int64_t total) override;
  void OnFileError(const FileError& e) override;
  void OnCommitted(const ImageRecord& record) override;
  // Clears the progress line (call before printing anything else).
  void Finish() { ClearLine(); }

 private:
  using Clock = std::chrono::steady_clock;
  // First word of the phase ("sampling", "encoding") labels the bar.
  std::string Label() const { return phase_.substr(0, phase_.find(' ')); }
  void ClearLine();

  std::ostream& err_;
  bool tty_, verbose_;
  std::ostream* errors_jsonl_;
  std::ostream* committed_;
  bool drawn_ = false;
  std::string phase_;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_draw_{};
};

}  // namespace lookalike
