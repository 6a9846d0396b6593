#include "search/search_options.h"

#include "util/option_checks.h"

namespace lookalike {

void FusionOptions::Validate() const {
  CheckInRange({"fusion.colour_weight", "--colour-weight"}, colour_weight, 0.0f, 100.0f);
  CheckInRange({"fusion.colour_depth", "--colour-depth"}, colour_depth, 0, 100000);
  CheckInRange({"fusion.colour_candidates", "--colour-candidates"}, colour_candidates, 0, 10000);
  CheckInRange({"fusion.word_weight", "--word-weight"}, word_weight, 0.0f, 100.0f);
  CheckInRange({"fusion.word_assignments", "--word-assignments"}, word_assignments, 1, 8);
  CheckAtLeast({"fusion.word_min_images", "--word-fusion-min-images"}, word_min_images, int64_t{0});
}

void RerankOptions::Validate() const {
  CheckInRange({"rerank.depth", "--rerank"}, depth, -1, 10000);
  CheckInRange({"rerank.vlad_depth", "--rerank-vlad"}, vlad_depth, -1, 10000);
  CheckInRange({"rerank.word_depth", "--rerank-words"}, word_depth, 0, 10000);
  CheckInRange({"rerank.word_postings", "--word-postings"}, word_postings, int64_t{0},
               int64_t{10000000000});
  CheckAtLeast({"rerank.min_inliers", "--min-inliers"}, min_inliers, 5,
               "four matches always fit a homography");
  if (min_consistent != 0)
    CheckInRange({"rerank.min_consistent", "--min-consistent"}, min_consistent, 2, min_inliers);
  if (weak_inliers != 0) {
    CheckInRange({"rerank.weak_inliers", "--weak-inliers"}, weak_inliers, 5, 10000);
    CheckInRange({"rerank.weak_consistent", "--weak-consistent"}, weak_consistent, 2, weak_inliers);
  }
  CheckInRange({"rerank.verify_keypoints", "--verify-keypoints"}, verify_keypoints, 0, 1000000);
  verify.Validate();
}

void ThumbnailOptions::Validate() const {
  CheckInRange({"thumbnail.weight", "--thumbnail-weight"}, weight, 0.0f, 1.0f);
  CheckInRange({"thumbnail.depth", "--thumbnail-depth"}, depth, 0, 10000);
  CheckInRange({"thumbnail.candidates", "--thumbnail-candidates"}, candidates, 0, 10000);
}

void ExpansionOptions::Validate() const {
  CheckInRange({"expansion.results", "--expansion"}, results, 0, 100);
  CheckInRange({"expansion.hubs", "--hubs"}, hubs, 0, 20);
  CheckInRange({"expansion.hub_depth", "--hub-depth"}, hub_depth, 1, 1000);
  CheckInRange({"expansion.hub_neighbours", "--hub-neighbours"}, hub_neighbours, 0, 1000);
  CheckInRange({"expansion.hub_steps", "--hub-steps"}, hub_steps, 1, 2);
}

void SearchOptions::Validate() const {
  CheckInRange({"k", "-k"}, k, 1, 100000);
  CheckAtLeast({"threads"}, threads, 0);
  fusion.Validate();
  rerank.Validate();
  thumbnail.Validate();
  expansion.Validate();
  if (expansion.hub_inliers != 0)
    CheckInRange({"expansion.hub_inliers", "--hub-inliers"}, expansion.hub_inliers,
                 rerank.min_inliers, 10000);
  index.Validate();
  levels.Validate();
}

}  // namespace lookalike
