#include "indexer/pasted_picture.h"

#include <algorithm>
#include <cmath>
#include <opencv2/imgproc.hpp>
#include <vector>

namespace lookalike {
namespace {

// The search runs on a copy at most this large: the border's shape needs no
// more, and it keeps the cost at a few milliseconds a query.
constexpr int kSearchSide = 512;
// A border pixel is within this many grey levels of the corner it floods
// from (after a 3 x 3 median, which removes JPEG speckle)...
constexpr int kFillTolerance = 10;
// ... and the border as a whole varies less than this (standard deviation):
// a dark sky or a night scene floods too, but is not uniform.
constexpr double kMaxFillDeviation = 6.0;
// Shares of the image: a corner's flood smaller than the first is noise; a
// border smaller than the second or larger than the third is no paste.
constexpr double kMinCornerShare = 0.003;
constexpr double kMinBorderShare = 0.03;
constexpr double kMaxBorderShare = 0.9;
// The picture's outline is simplified to within this share of its length,
// and sides within a few pixels of the image's frame are the frame's.
constexpr double kOutlineTolerance = 0.01;
constexpr float kFramePixels = 2.0f;
// Outline segments within this angle and distance of each other lie on one
// side of the picture (an overlay crossing a side splits it).
constexpr double kSideAngleDegrees = 6.0;
constexpr double kSideDistanceShare = 0.015;  // of the longest image side, at least 3 px
// The four longest sides must hold this share of the outline off the frame,
// and the quadrilateral they make must be the picture: this share of it
// within the image is picture, and it overlaps the picture by this much.
constexpr double kMinSidesShare = 0.8;
constexpr double kMinInsideShare = 0.95;
constexpr double kMinOverlap = 0.9;
// A picture whose corners all lie this close (share of the longest side) to
// the image's is the image in a thin frame (a camera's undistortion border,
// a letterbox): rectified it would be the image again.
constexpr double kMinCornerShift = 0.04;

struct Side {
  cv::Point2d direction, normal, point;
  double length = 0;
  std::vector<cv::Point2f> points;
};

// The uniform border flooded from the image's corners (255 inside), or an
// empty Mat when fewer than two corners are border.
cv::Mat FloodBorder(const cv::Mat& grey) {
  cv::Mat smooth;
  cv::medianBlur(grey, smooth, 3);
  const int w = grey.cols, h = grey.rows;
  cv::Mat border = cv::Mat::zeros(h, w, CV_8UC1);
  const cv::Point corners[4] = {{0, 0}, {w - 1, 0}, {0, h - 1}, {w - 1, h - 1}};
  int touched = 0;
  for (const cv::Point& corner : corners) {
    if (border.at<uint8_t>(corner)) {
      ++touched;
      continue;
    }
    cv::Mat mask = cv::Mat::zeros(h + 2, w + 2, CV_8UC1);
    cv::floodFill(smooth, mask, corner, cv::Scalar(), nullptr, cv::Scalar(kFillTolerance),
                  cv::Scalar(kFillTolerance),
                  4 | cv::FLOODFILL_MASK_ONLY | cv::FLOODFILL_FIXED_RANGE | (255 << 8));
    const cv::Mat region = mask(cv::Rect(1, 1, w, h));
    if (cv::countNonZero(region) < kMinCornerShare * w * h) continue;
    cv::Scalar mean, deviation;
    cv::meanStdDev(grey, mean, deviation, region);
    if (deviation[0] > kMaxFillDeviation) continue;
    border |= region;
    ++touched;
  }
  return touched >= 2 ? border : cv::Mat();
}

bool OnFrame(const cv::Point2f& a, const cv::Point2f& b, int w, int h) {
  const float right = static_cast<float>(w - 1) - kFramePixels;
  const float bottom = static_cast<float>(h - 1) - kFramePixels;
  return (a.x <= kFramePixels && b.x <= kFramePixels) || (a.x >= right && b.x >= right) ||
         (a.y <= kFramePixels && b.y <= kFramePixels) || (a.y >= bottom && b.y >= bottom);
}

// The picture's outline split into straight sides, longest first, and the
// length of the outline off the image's frame.
std::vector<Side> SidesOf(const std::vector<cv::Point>& outline, int w, int h,
                          double* free_length) {
  std::vector<cv::Point> simple;
  cv::approxPolyDP(outline, simple, kOutlineTolerance * cv::arcLength(outline, true), true);
  struct Segment {
    cv::Point2f a, b;
    double length;
  };
  std::vector<Segment> segments;
  *free_length = 0;
  for (size_t i = 0; i < simple.size(); ++i) {
    const cv::Point2f a = simple[i], b = simple[(i + 1) % simple.size()];
    const double length = cv::norm(b - a);
    if (length > 0 && !OnFrame(a, b, w, h)) {
      segments.push_back({a, b, length});
      *free_length += length;
    }
  }
  std::sort(segments.begin(), segments.end(),
            [](const Segment& x, const Segment& y) { return x.length > y.length; });
  const double max_cos = std::cos(kSideAngleDegrees * CV_PI / 180.0);
  const double max_distance = std::max(3.0, kSideDistanceShare * std::max(w, h));
  std::vector<Side> sides;
  for (const Segment& s : segments) {
    const cv::Point2d direction = cv::Point2d(s.b - s.a) / s.length;
    const cv::Point2d middle = (cv::Point2d(s.a) + cv::Point2d(s.b)) / 2.0;
    Side* joined = nullptr;
    for (Side& side : sides)
      if (std::abs(direction.dot(side.direction)) > max_cos &&
          std::abs((middle - side.point).dot(side.normal)) < max_distance) {
        joined = &side;
        break;
      }
    if (!joined) {
      joined = &sides.emplace_back();
      joined->direction = direction;
      joined->normal = {-direction.y, direction.x};
      joined->point = middle;
    }
    joined->length += s.length;
    joined->points.push_back(s.a);
    joined->points.push_back(s.b);
  }
  std::sort(sides.begin(), sides.end(),
            [](const Side& x, const Side& y) { return x.length > y.length; });
  return sides;
}

}  // namespace

std::optional<PastedPicture> FindPastedPicture(const cv::Mat& grey_in) {
  if (grey_in.empty() || grey_in.type() != CV_8UC1 || std::min(grey_in.cols, grey_in.rows) < 16)
    return std::nullopt;
  double scale = 1.0;  // search pixels per image pixel
  cv::Mat grey = grey_in;
  if (std::max(grey_in.cols, grey_in.rows) > kSearchSide) {
    scale = static_cast<double>(kSearchSide) / std::max(grey_in.cols, grey_in.rows);
    cv::resize(grey_in, grey,
               cv::Size(std::max(1, static_cast<int>(std::lround(grey_in.cols * scale))),
                        std::max(1, static_cast<int>(std::lround(grey_in.rows * scale)))),
               0, 0, cv::INTER_AREA);
  }
  const int w = grey.cols, h = grey.rows;
  const cv::Mat border = FloodBorder(grey);
  if (border.empty()) return std::nullopt;
  const double border_share = static_cast<double>(cv::countNonZero(border)) / (w * h);
  if (border_share < kMinBorderShare || border_share > kMaxBorderShare) return std::nullopt;

  // The picture: the largest connected piece of what is not border.
  cv::Mat labels, stats, centroids;
  const int n = cv::connectedComponentsWithStats(~border, labels, stats, centroids, 4);
  if (n < 2) return std::nullopt;
  int largest = 1;
  for (int i = 2; i < n; ++i)
    if (stats.at<int>(i, cv::CC_STAT_AREA) > stats.at<int>(largest, cv::CC_STAT_AREA)) largest = i;
  const cv::Mat picture = labels == largest;
  std::vector<std::vector<cv::Point>> outlines;
  cv::findContours(picture, outlines, cv::RETR_EXTERNAL, cv::CHAIN_APPROX_NONE);
  if (outlines.empty()) return std::nullopt;
  const auto& outline = *std::max_element(
      outlines.begin(), outlines.end(),
      [](const auto& a, const auto& b) { return cv::contourArea(a) < cv::contourArea(b); });

  double free_length = 0;
  std::vector<Side> sides = SidesOf(outline, w, h, &free_length);
  if (sides.size() < 4) return std::nullopt;
  sides.resize(4);
  double sides_length = 0;
  for (const Side& s : sides) sides_length += s.length;
  if (sides_length < kMinSidesShare * free_length) return std::nullopt;

  // Each side's line, fitted to its segments, in order around the picture.
  const cv::Point2d centre(centroids.at<double>(largest, 0), centroids.at<double>(largest, 1));
  struct Line {
    cv::Point2d point, direction;
    double angle;
  };
  std::vector<Line> lines;
  for (const Side& s : sides) {
    cv::Vec4f fit;
    cv::fitLine(s.points, fit, cv::DIST_L2, 0, 0.01, 0.01);
    const cv::Point2d direction(fit[0], fit[1]), point(fit[2], fit[3]);
    const cv::Point2d foot = point - centre - direction * (point - centre).dot(direction);
    lines.push_back({point, direction, std::atan2(foot.y, foot.x)});
  }
  std::sort(lines.begin(), lines.end(),
            [](const Line& a, const Line& b) { return a.angle < b.angle; });
  std::vector<cv::Point2f> quad;
  for (int i = 0; i < 4; ++i) {
    const Line& a = lines[i];
    const Line& b = lines[(i + 1) % 4];
    const double det = a.direction.x * -b.direction.y - a.direction.y * -b.direction.x;
    if (std::abs(det) < 1e-3) return std::nullopt;  // parallel neighbours: not a quadrilateral
    const cv::Point2d d = b.point - a.point;
    const double t = (d.x * -b.direction.y - d.y * -b.direction.x) / det;
    const cv::Point2d corner = a.point + a.direction * t;
    if (cv::norm(corner - centre) > 2.0 * std::max(w, h)) return std::nullopt;
    quad.emplace_back(static_cast<float>(corner.x), static_cast<float>(corner.y));
  }
  if (!cv::isContourConvex(quad)) return std::nullopt;

  // The quadrilateral must be the picture, not a shape that merely has four
  // long sides.
  cv::Mat inside = cv::Mat::zeros(h, w, CV_8UC1);
  std::vector<cv::Point> vertices;
  for (const cv::Point2f& p : quad) vertices.emplace_back(cvRound(p.x), cvRound(p.y));
  cv::fillConvexPoly(inside, vertices, cv::Scalar(255));
  const double in_quad = cv::countNonZero(inside);
  const double both = cv::countNonZero(inside & picture);
  const double either = cv::countNonZero(inside | picture);
  if (in_quad <= 0 || both < kMinInsideShare * in_quad || both < kMinOverlap * either)
    return std::nullopt;

  // Top-left first (the corner nearest the image's), then clockwise.
  int first = 0;
  for (int i = 1; i < 4; ++i)
    if (quad[i].x + quad[i].y < quad[first].x + quad[first].y) first = i;
  std::rotate(quad.begin(), quad.begin() + first, quad.end());
  const cv::Point2f ab = quad[1] - quad[0], ad = quad[3] - quad[0];
  if (ab.x * ad.y - ab.y * ad.x < 0) std::swap(quad[1], quad[3]);
  const cv::Point2f frame[4] = {{0, 0},
                                {static_cast<float>(w - 1), 0},
                                {static_cast<float>(w - 1), static_cast<float>(h - 1)},
                                {0, static_cast<float>(h - 1)}};
  double shift = 0;
  for (int i = 0; i < 4; ++i) shift = std::max(shift, cv::norm(quad[i] - frame[i]));
  if (shift < kMinCornerShift * std::max(w, h)) return std::nullopt;
  PastedPicture found;
  for (int i = 0; i < 4; ++i) found.corners[i] = quad[i] * static_cast<float>(1.0 / scale);
  return found;
}

cv::Mat RectifyPastedPicture(const cv::Mat& image, const PastedPicture& picture, double scale) {
  std::array<cv::Point2f, 4> c;
  for (int i = 0; i < 4; ++i) c[i] = picture.corners[i] * static_cast<float>(scale);
  const double width = (cv::norm(c[1] - c[0]) + cv::norm(c[2] - c[3])) / 2.0;
  const double height = (cv::norm(c[3] - c[0]) + cv::norm(c[2] - c[1])) / 2.0;
  // Never larger than twice the image: corners far outside a clipped paste
  // must not make a huge, mostly invented picture.
  const double limit = 2.0 * std::max(image.cols, image.rows);
  if (image.empty() || !(width >= 8 && height >= 8) || width > limit || height > limit)
    return cv::Mat();
  const int w = static_cast<int>(std::lround(width)), h = static_cast<int>(std::lround(height));
  const cv::Point2f upright[4] = {{0, 0},
                                  {static_cast<float>(w - 1), 0},
                                  {static_cast<float>(w - 1), static_cast<float>(h - 1)},
                                  {0, static_cast<float>(h - 1)}};
  const cv::Mat homography = cv::getPerspectiveTransform(c.data(), upright);
  cv::Mat out;
  cv::warpPerspective(image, out, homography, cv::Size(w, h), cv::INTER_LINEAR,
                      cv::BORDER_REPLICATE);
  return out;
}

}  // namespace lookalike
