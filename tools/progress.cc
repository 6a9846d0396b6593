#include "tools/progress.h"

#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "tools/output.h"

namespace lookalike {

ProgressObserver::ProgressObserver(std::ostream& err, bool tty, bool verbose, bool quiet,
                                   std::ostream* errors_jsonl, std::ostream* committed)
    : err_(err),
      tty_(tty && !quiet),
      verbose_(verbose),
      errors_jsonl_(errors_jsonl),
      committed_(committed) {}

void ProgressObserver::OnPhase(const std::string& phase) {
  phase_ = phase;
  if (verbose_) {
    ClearLine();
    err_ << "lookalike: " << phase << "\n";
  } else if (tty_) {
    ClearLine();
    err_ << "\r" << phase.substr(0, 78) << std::flush;
    drawn_ = true;
  }
}

void ProgressObserver::OnStart(int64_t) {
  start_ = Clock::now();
  last_draw_ = Clock::time_point{};
}

void ProgressObserver::OnProgress(int64_t done, int64_t total) {
  if (!tty_) return;
  const auto now = Clock::now();
  // Redrawn at most 10 times a second; the last one always.
  if (done != total && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double rate = elapsed > 0 ? done / elapsed : 0;
  const double eta = rate > 0 ? (total - done) / rate : NAN;
  constexpr int kWidth = 30;
  const int filled = total > 0 ? static_cast<int>(kWidth * done / total) : kWidth;
  std::ostringstream line;
  line << "\r" << Label() << " [" << std::string(filled, '#') << std::string(kWidth - filled, '.')
       << "] " << done << "/" << total << "  " << std::fixed << std::setprecision(1) << rate
       << " img/s  ETA " << FormatSeconds(eta) << "   ";
  err_ << line.str() << std::flush;
  drawn_ = true;
}

void ProgressObserver::OnFileError(const FileError& e) {
  ClearLine();
  err_ << "lookalike: " << FileErrorLine(e) << "\n";
  if (errors_jsonl_) WriteJsonLine(*errors_jsonl_, FileErrorJson(e));
}

void ProgressObserver::OnCommitted(const ImageRecord& record) {
  // Flushed per image: a line here means the image survives a crash. The
  // whole line goes to the stream in one piece: `path << endl` let a file
  // buffer flush part of a path, so a SIGKILL between two writes left a torn
  // last line (seen once in tests/e2e/kill_test.cc's kill loop).
  if (!committed_) return;
  const std::string line = EscapeField(record.path) + "\n";
  committed_->write(line.data(), static_cast<std::streamsize>(line.size()));
  committed_->flush();
}

void ProgressObserver::ClearLine() {
  if (drawn_) err_ << "\r" << std::string(79, ' ') << "\r";
  drawn_ = false;
}

}  // namespace lookalike
