#include "indexer/index_options.h"

#include <stdexcept>
#include <string>

#include "util/option_checks.h"

namespace lookalike {

void ModelOptions::Validate() const {
  encoding.Validate();
  codebook.Validate();
  projection.Validate();
  quantizer.Validate(DescriptorDim(encoding.extractor));
  CheckInRange({"model.words.fine_per_word", "--subwords"}, words.fine_per_word, 1, 256);
  CheckAtLeast({"model.train_images", "--train-images"}, train_images, 1);
}

void IndexOptions::Validate() const {
  if (image_dir.empty()) throw std::invalid_argument("image folder must be given");
  if (db_path.empty()) throw std::invalid_argument("--db must be given");
  model.Validate();
  CheckInRange({"threads", "--threads"}, threads, 0, 1024, "0 = all cores");
  CheckAbove({"limits.max_seconds", "--max-seconds-per-file"}, limits.max_seconds, 0.0);
  if (num_shards > 0 && shard_index >= num_shards)
    throw std::invalid_argument(
        "shard_index/num_shards (--shard) must be I/N with 0 <= I < N, got " +
        std::to_string(shard_index) + "/" + std::to_string(num_shards));
  CheckAtMost({"num_shards", "--shard"}, num_shards, kMaxShards);
  if (num_shards > 0 && model_from.empty())
    throw std::invalid_argument(
        "--shard needs --model-from BASE: shards merge only when they share one model "
        "(make BASE with 'lookalike train')");
  CheckInRange({"batch_images", "--batch"}, batch_images, 1, 4096);
}

}  // namespace lookalike
