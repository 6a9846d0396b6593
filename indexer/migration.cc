#include "indexer/migration.h"

#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

#include "indexer/file_walker.h"
#include "indexer/image_file.h"
#include "indexer/local_features.h"
#include "indexer/model_training.h"
#include "indexer/projection.h"
#include "storage/encoding.h"
#include "storage/folder_swap.h"
#include "util/test_hooks.h"
#include "util/timing.h"

namespace lookalike {
namespace fs = std::filesystem;

void MigrationOptions::Validate() const {
  if (db_path.empty()) throw std::invalid_argument("--db must be given");
  if (train_images < 1)
    throw std::invalid_argument("train images must be >= 1, got " + std::to_string(train_images));
  if (quantizer.bytes <= 0)
    throw std::invalid_argument("--descriptor-bytes must be > 0 to convert to the compact layout");
}

namespace {

using Clock = SteadyClock;

// Whether the copy's record `b` is the converted record `a` of the original.
// A schema-1 original has neither colour nor XXH3 hashes, which the copy may
// have gained from the file (RefreshFromFile): those are not compared.
bool SameRecord(const ImageRecord& a, const ImageRecord& b, bool compare_content) {
  return a.id == b.id && a.path == b.path && a.size_bytes == b.size_bytes &&
         a.mtime_ns == b.mtime_ns && a.width == b.width && a.height == b.height &&
         a.num_descriptors == b.num_descriptors && a.status == b.status &&
         (!compare_content || (a.content_hash == b.content_hash && a.colour == b.colour));
}

// A schema-1 record gains what schema 3 keeps and it lacks, its colour
// histogram and the XXH3 content hash, from the file, when the file still
// holds the bytes it was indexed from (same size, mtime and FNV-1a hash).
// Otherwise it stays as it is: no colour (colour similarity 0) and an FNV-1a
// hash, which only makes `index` re-encode the file once its mtime changes.
void RefreshFromFile(const Store& original, ImageRecord* rec) {
  const ImageFileLimits limits;
  ReadResult read = ReadImageBytes(rec->path, limits);
  if (read.error || read.stat.size_bytes != rec->size_bytes ||
      read.stat.mtime_ns != rec->mtime_ns ||
      original.ContentHash(read.bytes.data(), read.bytes.size()) != rec->content_hash)
    return;
  const LoadResult loaded =
      DecodeImageBytes(rec->path, read.bytes, static_cast<int>(original.model().max_side), limits);
  if (!loaded.image) return;
  rec->colour = loaded.image->colour;
  rec->content_hash =
      Hash64(HashKindForSchema(kSchemaVersion), read.bytes.data(), read.bytes.size());
}

Descriptors DescriptorsOf(LocalFeatures&& f) {
  Descriptors d;
  d.num = f.num();
  d.dim = f.dim;
  d.values = std::move(f.descriptors);
  d.keypoints = std::move(f.keypoints);
  return d;
}

// The original's local features of `rec`, decoded (format 1), or nullopt.
std::optional<LocalFeatures> ReadFeatures(const Store& store, const ImageRecord& rec) {
  const auto blob = store.GetFeatures(rec.id);
  if (!blob) return std::nullopt;
  try {
    return DecodeLocalFeatures(*blob);
  } catch (const encoding::CorruptValue& e) {
    throw StoreError(StoreError::Kind::kCorrupt, "database " + store.path() + ": " + rec.path +
                                                     ": " + e.what() + "; run `lookalike verify`");
  }
}

// The descriptor quantizer, learned as creation learns it: a seeded sample
// of the images (the model's seed), a seeded share of each one's descriptors.
DescriptorQuantizer TrainQuantizer(const Store& original, const MigrationOptions& options,
                                   IndexObserver* observer) {
  const ModelRecord& model = original.model();
  const std::vector<size_t> picked =
      SeededIndices(original.num_images(), model.seed, options.train_images);
  CodebookOptions codebook;
  codebook.num_clusters = static_cast<int>(model.num_clusters);
  const int64_t quota = DescriptorQuota(codebook, static_cast<int64_t>(picked.size()));
  if (observer)
    observer->OnPhase("descriptor quantizer: " + std::to_string(options.quantizer.bytes) +
                      " bytes per descriptor, learned from the descriptors of " +
                      std::to_string(picked.size()) + " stored images");
  std::vector<float> sample;
  size_t index = 0, next = 0;
  original.ForEachImage([&](const ImageRecord& rec) {
    if (next < picked.size() && picked[next] == index++) {
      ++next;
      if (auto f = ReadFeatures(original, rec); f && f->num() > 0)
        SampleDescriptors(DescriptorsOf(std::move(*f)), quota,
                          model.seed ^ encoding::Fnv1a64(rec.path.data(), rec.path.size()),
                          &sample);
    }
  });
  const int64_t n = static_cast<int64_t>(sample.size()) / model.dim;
  if (n < kQuantizerMinDescriptors)
    throw std::runtime_error("cannot convert " + original.path() + ": its sampled images hold " +
                             std::to_string(n) + " descriptors, too few to learn the descriptor " +
                             "quantizer from (" + std::to_string(kQuantizerMinDescriptors) +
                             "); it stays schema " + std::to_string(original.schema_version()));
  QuantizerOptions q = options.quantizer;
  q.seed = model.seed;
  return DescriptorQuantizer::Train(sample.data(), n, static_cast<int>(model.dim), q);
}

// The copy of an interrupted run, if it was built from this database's model.
std::unique_ptr<Store> OpenCopy(const Store& original, const std::string& sibling,
                                uint64_t vector_dim) {
  auto copy = Store::Open(sibling, Store::Mode::kReadWrite);
  if (copy->model().codebook_hash != original.model().codebook_hash ||
      copy->vector_dim() != vector_dim || !copy->GetDescriptorQuantizer())
    throw StoreError(StoreError::Kind::kNotADatabase,
                     sibling + " holds a converted copy of another database than " +
                         original.path() + "; remove it, then run 'lookalike migrate --db " +
                         original.path() + "' again");
  return copy;
}

// What converting one image needs.
struct Conversion {
  const Store& original;
  Store* copy;
  const DescriptorQuantizer& quantizer;
  const SearchProjection& projection;
};

void ConvertImage(const Conversion& c, const ImageRecord& rec, std::vector<float>* vector) {
  std::string features;
  if (auto f = ReadFeatures(c.original, rec); f && f->num() > 0) {
    const uint32_t width = f->width, height = f->height;
    features = EncodeCompactFeatures(DescriptorsOf(std::move(*f)), width, height, c.quantizer);
  } else if (rec.status == ImageStatus::kOk && c.copy->vector_dim() == 0) {
    throw StoreError(StoreError::Kind::kCorrupt,
                     "database " + c.original.path() + ": " + rec.path +
                         " has no stored local features, and a database without a PCA derives "
                         "its vectors from them; re-index the folder into a new --db instead");
  }
  if (c.copy->vector_dim() > 0) {
    const auto vlad = c.original.GetVector(rec.id);
    if (!vlad)
      throw StoreError(StoreError::Kind::kCorrupt, "database " + c.original.path() + ": " +
                                                       rec.path +
                                                       " has no vector; run `lookalike verify`");
    // The search vector `index` stores: the VLAD of the exact descriptors,
    // projected.
    c.projection.Apply(vlad->data(), 1, vector->data());
  }
  ImageRecord converted = rec;
  if (!c.original.stores_colour()) RefreshFromFile(c.original, &converted);
  c.copy->PutImageWithId(converted, vector->data(), features);
}

// Brings the copy in step with the original: drops what is gone or changed
// there, converts what the copy lacks. Stops early when *cancel is set.
void SyncCopy(const Conversion& c, MigrationSummary* summary, IndexObserver* observer,
              const std::atomic<bool>* cancel) {
  const bool compare_content = c.original.stores_colour();
  std::vector<ImageRecord> stale;
  c.copy->ForEachImage([&](const ImageRecord& rec) {
    const auto now = c.original.FindById(rec.id);
    if (!now || !SameRecord(*now, rec, compare_content)) stale.push_back(rec);
  });
  for (const ImageRecord& rec : stale) c.copy->RemoveImage(rec);
  summary->dropped = static_cast<int64_t>(stale.size());
  const int64_t total = static_cast<int64_t>(c.original.num_images());
  if (observer) {
    observer->OnPhase("converting " + std::to_string(total) + " images");
    observer->OnStart(total);
  }
  std::vector<float> vector(c.copy->vector_dim());
  int64_t done = 0;
  c.original.ForEachImage([&](const ImageRecord& rec) {
    if (cancel && cancel->load()) return;
    if (const auto have = c.copy->FindById(rec.id);
        have && SameRecord(rec, *have, compare_content)) {
      ++summary->reused;
    } else {
      ConvertImage(c, rec, &vector);
      ++summary->converted;
    }
    if (++done == total / 2) TestStopPoint("half-converted");
    if (observer) observer->OnProgress(done, total);
  });
  summary->cancelled = cancel && cancel->load();
}

}  // namespace

MigrationSummary MigrateDatabase(const MigrationOptions& options, IndexObserver* observer,
                                 const FinishCopy& finish_copy, const std::atomic<bool>* cancel) {
  options.Validate();
  const auto start = Clock::now();
  MigrationSummary summary;
  // The folder itself, not a symbolic link to it: the copy is built and
  // exchanged beside the real folder.
  std::error_code ec;
  const fs::path real = fs::weakly_canonical(AbsolutePath(options.db_path), ec);
  const std::string db = ec ? AbsolutePath(options.db_path) : real.string();
  const std::string sibling = SiblingPath(db);
  summary.from_schema = summary.schema = Store::Open(db, Store::Mode::kReadOnly)->schema_version();
  if (summary.from_schema >= kSchemaVersion) {
    if (InspectSibling(db, kSchemaVersion) == Sibling::kOriginal) {
      if (observer) observer->OnPhase("removing the original an interrupted migration left");
      RemoveSibling(db);
      summary.leftover_removed = true;
    }
    auto store = Store::Open(db, Store::Mode::kReadOnly);
    summary.images = static_cast<int64_t>(store->num_images());
    summary.bytes_before = summary.bytes_after = store->SizeOnDisk();
    summary.seconds = SecondsBetween(start, Clock::now());
    return summary;
  }

  // No writer from here on: what is copied is what gets replaced.
  const WriterLock lock(db);
  auto original = Store::Open(db, Store::Mode::kReadOnly);
  options.quantizer.Validate(static_cast<int>(original->model().dim));
  summary.from_schema = summary.schema = original->schema_version();
  summary.images = static_cast<int64_t>(original->num_images());
  summary.bytes_before = original->SizeOnDisk();
  const auto projection_record = original->GetProjection();
  const SearchProjection projection =
      SearchProjection::FromRecord(projection_record ? &*projection_record : nullptr,
                                   static_cast<int64_t>(original->model().vlad_dim()));
  const uint64_t vector_dim = projection_record ? projection_record->out_dim : 0;

  std::unique_ptr<Store> copy;
  std::optional<DescriptorQuantizer> quantizer;
  const Sibling left = InspectSibling(db, kSchemaVersion);
  if (left == Sibling::kCopy) {
    if (observer) observer->OnPhase("continuing the copy an interrupted migration left");
    copy = OpenCopy(*original, sibling, vector_dim);
    quantizer = DescriptorQuantizer::Deserialize(*copy->GetDescriptorQuantizer());
    summary.resumed = true;
  } else if (left == Sibling::kNone) {
    quantizer = TrainQuantizer(*original, options, observer);
    const auto words = original->GetModelWordVocabulary();
    const auto lists = original->GetModelSearchQuantizer();
    copy =
        Store::Create(sibling, original->model(), projection_record ? &*projection_record : nullptr,
                      kSchemaVersion, quantizer->Serialize(), words ? *words : std::string(),
                      lists ? *lists : std::string());
  } else {
    throw StoreError(StoreError::Kind::kNotADatabase,
                     sibling + " exists and is not an unfinished migration of " + db +
                         "; move it away or remove it, then run 'lookalike migrate --db " + db +
                         "' again");
  }
  TestStopPoint("copy-ready");

  SyncCopy(Conversion{*original, copy.get(), *quantizer, projection}, &summary, observer, cancel);
  if (summary.cancelled) {
    summary.seconds = SecondsBetween(start, Clock::now());
    return summary;
  }
  copy->RaiseNextId(original->next_id());
  if (copy->num_images() != original->num_images())
    throw StoreError(StoreError::Kind::kCorrupt,
                     "database " + db + " counts " + std::to_string(original->num_images()) +
                         " images but its records are " + std::to_string(copy->num_images()) +
                         "; run `lookalike verify`");
  if (finish_copy) finish_copy(copy.get());
  copy->Flush();
  if (observer) observer->OnPhase("verifying the copy");
  std::vector<std::string> problems;
  const FeaturesCheck check_features = LocalFeaturesCheck(*copy, &problems);
  for (std::string& p : copy->Verify(100, check_features)) problems.push_back(std::move(p));
  if (!problems.empty())
    throw StoreError(StoreError::Kind::kCorrupt, "the converted copy " + sibling +
                                                     " fails verification (" + problems[0] + "); " +
                                                     db + " is unchanged: remove " + sibling +
                                                     " and keep using the database as it is");

  // Both closed before the exchange: an open RocksDB keeps writing by path.
  copy.reset();
  original.reset();
  if (observer) observer->OnPhase("replacing " + db + " by its copy");
  SyncFolder(sibling);
  TestStopPoint("synced");
  ExchangeFolders(sibling, db);
  summary.migrated = true;
  summary.schema = kSchemaVersion;
  TestStopPoint("exchanged");
  RemoveSibling(db);
  summary.bytes_after = Store::Open(db, Store::Mode::kReadOnly)->SizeOnDisk();
  summary.seconds = SecondsBetween(start, Clock::now());
  return summary;
}

}  // namespace lookalike
