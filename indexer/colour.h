// Global colour descriptor: a histogram of hue, saturation and value
// (18 x 4 x 4 bins over OpenCV's HSV), square-rooted so the dot product of
// two histograms is their Bhattacharyya coefficient (the Hellinger kernel),
// quantised to one byte per bin.
//
// Why it is in a SIFT engine: VLAD of SIFT describes texture and ignores
// colour. Where texture is scarce or changes with the viewpoint (indoor
// rooms, video frames, landmarks in other light), the colours of two photos
// of one place still agree; on the dev set, adding w x colour similarity to
// the VLAD cosine lifts the indoor pairs from 0.43 to about 0.67 mAP and the
// hard copies as well (search/README.md, "How search ranks"). Spatial verification still decides
// between verified and unverified results.
#pragma once

#include <cstdint>
#include <opencv2/core.hpp>
#include <vector>

namespace lookalike {

inline constexpr int kColourHueBins = 18;
inline constexpr int kColourSatBins = 4;
inline constexpr int kColourValBins = 4;
inline constexpr int kColourBins = kColourHueBins * kColourSatBins * kColourValBins;  // 288

// The copy ColourHistogram works on: `image` shrunk by area averaging so its
// longest side is at most kColourPreviewSide (a smaller image is kept as it
// is, not copied). Every decoded image keeps it (LoadedImage::colour_preview)
// so that a query's histogram can be taken again over a part of it
// (indexer/pasted_picture.h).
inline constexpr int kColourPreviewSide = 128;
cv::Mat ColourPreview(const cv::Mat& image);

// Histogram of an 8-bit BGR (3-channel) or grey (1-channel) image; grey
// images fall into the zero-saturation bins. Computed on ColourPreview(image)
// (a histogram does not need more; it keeps the cost at a few hundred
// microseconds). Returns kColourBins bytes; an empty image gives
// an empty vector.
std::vector<uint8_t> ColourHistogram(const cv::Mat& image);

// Bhattacharyya coefficient of two histograms from ColourHistogram, in
// [0, 1] (1 = the same colour distribution). 0 when either is empty or the
// sizes differ (no colour information: no evidence either way).
float ColourSimilarity(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b);

}  // namespace lookalike
