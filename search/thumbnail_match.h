// Crop-tolerant correlation of a query's grey thumbnail with stored ones
// (indexer/grey_thumbnail.h): the evidence search gives a candidate that
// spatial verification cannot judge (search/ranking.h, "t";
// search/README.md, "Thumbnail correlation").
#pragma once

#include <map>
#include <opencv2/core.hpp>
#include <utility>
#include <vector>

#include "indexer/grey_thumbnail.h"

namespace lookalike {

class ThumbnailMatcher {
 public:
  // `query`: the query's thumbnail (kQueryThumbnailSide); copied.
  explicit ThumbnailMatcher(const GreyThumbnail& query);

  // The best zero-mean normalised cross-correlation, in [-1, 1], of the query
  // shrunk (aspect kept, fitted inside) to cover 100, 70, 50 or 35 % of
  // `stored`'s area and slid over it, both blurred by a Gaussian of 1 px:
  // a copy that is a crop of a stored image matches at the fraction it
  // kept. -1 when either is empty, no placement is 6 px a side or more, or
  // the query is flat (nothing to correlate). Not thread-safe: the query's
  // placements are made once per stored size (most thumbnails share a few
  // sizes: 48 x 36, 36 x 48, 48 x 32 ...) and kept.
  float Match(const GreyThumbnail& stored);

 private:
  // The query shrunk and blurred for each area fraction on a stored
  // thumbnail of `width` x `height`; an empty Mat for a placement that is
  // too small or flat.
  const std::vector<cv::Mat>& Placements(int width, int height);

  int width_ = 0, height_ = 0;
  std::vector<float> pixels_;                                       // the query, as floats
  std::map<std::pair<int, int>, std::vector<cv::Mat>> placements_;  // by stored (width, height)
};

}  // namespace lookalike
