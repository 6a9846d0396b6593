// Crop-tolerant correlation of a query's grey thumbnail with stored ones
// (indexer/grey_thumbnail.h): the evidence search gives a candidate that
// spatial verification cannot judge (search/ranking.h, "t";
// search/README.md, "Thumbnail correlation").
#pragma once

#include <map>
#include <mutex>
#include <opencv2/core.hpp>
#include <utility>
#include <vector>

#include "indexer/grey_thumbnail.h"

namespace lookalike {

// The best zero-mean normalised cross-correlation of `templ` slid over
// `target` (both CV_32FC1, templ no larger): what cv::matchTemplate's
// TM_CCOEFF_NORMED gives at its best position, computed directly. Windows of
// `target` whose grey levels vary by less than half a level (standard
// deviation) are skipped: their correlation is rounding noise. -1 when every
// window is skipped or the template is flat.
float BestNormalisedCorrelation(const cv::Mat& target, const cv::Mat& templ);
// Its two implementations, for tests: the portable one, and on CPUs with
// AVX2 and FMA (chosen by the one above where the CPU has them) one that
// computes 8 positions per vector; they differ by float rounding only.
// The second returns false, without running, where this CPU or build has
// no AVX2 and FMA.
float BestNormalisedCorrelationPortable(const cv::Mat& target, const cv::Mat& templ);
bool BestNormalisedCorrelationAvx2(const cv::Mat& target, const cv::Mat& templ, float* best);

class ThumbnailMatcher {
 public:
  // `query`: the query's thumbnail (kQueryThumbnailSide); copied.
  explicit ThumbnailMatcher(const GreyThumbnail& query);

  // The best zero-mean normalised cross-correlation, in [-1, 1], of the query
  // shrunk (aspect kept, fitted inside) to cover 100, 70, 50 or 35 % of
  // `stored`'s area and slid over it, both blurred by a Gaussian of 1 px:
  // a copy that is a crop of a stored image matches at the fraction it
  // kept. -1 when either is empty, no placement is 6 px a side or more, or
  // the query is flat (nothing to correlate). The query's placements are
  // made once per stored size (most thumbnails share a few sizes: 48 x 36,
  // 36 x 48, 48 x 32 ...) and kept; Match and CoarseMatch may be called from
  // several threads at once.
  float Match(const GreyThumbnail& stored);
  // Match at half the resolution (the stored thumbnail blurred and halved,
  // the placements made for that size): about a tenth of the cost, and a
  // score that ranks thumbnails as Match does closely enough to choose which
  // few deserve Match among many.
  float CoarseMatch(const GreyThumbnail& stored);

 private:
  // The query shrunk and blurred for each area fraction on a stored
  // thumbnail of `width` x `height`; empty for a placement that is too small
  // or flat.
  struct Placement {
    cv::Mat zero_mean;  // CV_32FC1, its mean subtracted; empty: no placement
    double norm = 0;    // L2 norm of zero_mean
  };
  const std::vector<Placement>& Placements(int width, int height);
  float Correlate(const GreyThumbnail& stored, bool halved);

  int width_ = 0, height_ = 0;
  std::vector<float> pixels_;  // the query, as floats
  // By stored (width, height); a map, so a placement found stays where it
  // is while others are added.
  std::map<std::pair<int, int>, std::vector<Placement>> placements_;
  std::mutex placements_mutex_;  // guards placements_
};

}  // namespace lookalike
