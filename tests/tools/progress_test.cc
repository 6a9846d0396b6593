// The --committed log of `index` (ProgressObserver::OnCommitted): each
// acknowledged path reaches the stream as one whole line in one write, so
// that a kill between two writes cannot leave a torn last line.
#include "tools/progress.h"

#include <gtest/gtest.h>

#include <sstream>
#include <streambuf>
#include <string>
#include <vector>

#include "storage/records.h"

namespace lookalike {
namespace {

// An unbuffered stream buffer that records each write it is asked for (as
// a file's unbuffered filebuf turns each into one write(2)).
class RecordingBuf : public std::streambuf {
 public:
  std::vector<std::string> writes;

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    writes.emplace_back(s, static_cast<size_t>(n));
    return n;
  }
  int_type overflow(int_type c) override {
    if (!traits_type::eq_int_type(c, traits_type::eof()))
      writes.emplace_back(1, static_cast<char>(c));
    return traits_type::not_eof(c);
  }
};

TEST(ProgressObserverTest, EachCommittedPathIsOneWholeLineInOneWrite) {
  RecordingBuf buf;
  std::ostream committed(&buf);
  std::ostringstream err;
  ProgressObserver observer(err, /*tty=*/false, /*verbose=*/false, /*quiet=*/true,
                            /*errors_jsonl=*/nullptr, &committed);
  ImageRecord record;
  record.path = "/photos/sub/img_001.png";
  observer.OnCommitted(record);
  record.path = "/photos/a name with\nnewline.jpg";  // escaped: still one line
  observer.OnCommitted(record);
  ASSERT_EQ(buf.writes.size(), 2u);
  EXPECT_EQ(buf.writes[0], "/photos/sub/img_001.png\n");
  EXPECT_EQ(buf.writes[1].back(), '\n');
  EXPECT_EQ(buf.writes[1].find('\n'), buf.writes[1].size() - 1) << buf.writes[1];
}

}  // namespace
}  // namespace lookalike
