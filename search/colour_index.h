// The colour first stage: every indexed image's colour histogram
// (indexer/colour.h, kColourBins bytes) held in memory and scanned whole per
// query, so an image whose colours match the query's can join the short
// list wherever its VLAD similarity put it.
//
// Why: a copy shrunk to a thumbnail, blurred and cropped keeps too few local
// features for its VLAD vector or its visual words to say anything, but its
// colours survive. Among thousands of unrelated images its VLAD rank is
// random, so it never reached colour fusion, which only sees the VLAD short
// list (search/README.md, "Colour candidates"). The scan costs kColourBins
// byte products per image (about 10 ms per query at 100,000 images) and
// kColourBins bytes of memory per image.
#pragma once

#include <cstdint>
#include <vector>

namespace lookalike {

class ColourIndex {
 public:
  // indexer/colour.h's kColourBins (checked where both are seen: this
  // library does not build against OpenCV).
  static constexpr int kRowBytes = 288;

  // Appends the next row (the image at this position of the manifest it is
  // kept with): a histogram from ColourHistogram, or an empty one for an
  // image without colour (a zero row, never a candidate).
  // Throws std::invalid_argument for any other size.
  void Append(const std::vector<uint8_t>& colour);
  // Adopts `table` (rows x kRowBytes bytes, as table() returns it).
  // Throws std::invalid_argument if its size is not a whole number of rows.
  void Assign(std::vector<uint8_t> table);

  int64_t rows() const { return static_cast<int64_t>(table_.size() / kRowBytes); }
  const std::vector<uint8_t>& table() const { return table_; }

  // The rows of the (at most) n images whose colour is most similar to
  // `colour` (the largest Bhattacharyya coefficient; ties by row), best first.
  // Zero rows and a query without colour (empty) give none.
  std::vector<int64_t> Search(const std::vector<uint8_t>& colour, int n) const;

 private:
  std::vector<uint8_t> table_;
};

}  // namespace lookalike
