// A picture pasted, rotated or seen in perspective, onto a uniform border:
// the black corners a rotated copy gets, a photo of a print on a dark table.
// Search encodes such a query twice, as it is and with the picture
// rectified (warped back to an upright rectangle), because the border hurts
// every piece of evidence the original would give: SIFT keypoints on the
// border's edges, a perspective SIFT does not undo, black bins in the colour
// histogram, black triangles in the thumbnail (search/README.md, "Pasted
// pictures").
#pragma once

#include <array>
#include <opencv2/core.hpp>
#include <optional>

namespace lookalike {

// The picture's corners, in the pixels of the image it was found in:
// top-left, top-right, bottom-right, bottom-left of the upright picture.
// They may lie outside the image when the paste was clipped by its frame.
struct PastedPicture {
  std::array<cv::Point2f, 4> corners;
};

// Finds a picture pasted onto a uniform border in `grey` (CV_8UC1). The
// border is what floods, within a few grey levels, from at least two of the
// image's corners, is uniform (not a dark sky or a shadow) and covers 3-90 %
// of the image; the rest must be bounded, away from the image's frame, by
// four straight sides (an overlay crossing the border, such as a text band,
// is tolerated). nullopt when there is no such border, or the shape it
// leaves is not a quadrilateral.
std::optional<PastedPicture> FindPastedPicture(const cv::Mat& grey);

// The picture warped to an upright rectangle (width and height from the
// mean lengths of its opposite sides), from `image` (any type), whose size
// may differ from the one the picture was found in by the factor `scale`
// (image pixels per pixel of the search). Empty when the result would be
// smaller than 8 pixels a side.
cv::Mat RectifyPastedPicture(const cv::Mat& image, const PastedPicture& picture,
                             double scale = 1.0);

}  // namespace lookalike
