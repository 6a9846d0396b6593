// Store::Verify: the full consistency check behind `lookalike verify`, as a
// few named checks over one read of the database.
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "storage/keys.h"
#include "storage/store_impl.h"
#include "storage/values.h"

namespace lookalike {
using namespace store_detail;
using encoding::Reader;

namespace {

// Collects problem lines up to a limit.
class Problems {
 public:
  explicit Problems(size_t max) : max_(max) {}
  void Add(std::string p) {
    if (lines_.size() < max_) lines_.push_back(std::move(p));
  }
  std::vector<std::string> Take() { return std::move(lines_); }

 private:
  size_t max_;
  std::vector<std::string> lines_;
};

// What every check reads with: the database, checksum-verifying reads and the
// facts of the open store.
struct VerifyContext {
  rocksdb::DB* db;
  rocksdb::ReadOptions ro;
  uint64_t vlad_dim;
  uint64_t vector_dim;  // of v: values; 0 = the database stores none
  bool half_vectors;
  HashKind hash_kind;
  uint64_t next_id;
  Problems* problems;
  const FeaturesCheck* check_features;  // null: blobs are only checksummed
};

void CheckProjection(const VerifyContext& c) {
  std::string value;
  const rocksdb::Status s = c.db->Get(c.ro, kProjectionKey, &value);
  if (s.IsNotFound()) {
    if (c.half_vectors && c.vector_dim > 0)
      c.problems->Add("stored vectors have " + std::to_string(c.vector_dim) +
                      " dimensions (m:vdim), but there is no projection (m:pca) to map queries "
                      "to them");
    return;
  }
  if (!s.ok()) {
    c.problems->Add("projection (m:pca) unreadable (" + s.ToString() + ")");
    return;
  }
  try {
    const ProjectionRecord p = DecodeProjection(value, c.vlad_dim);
    for (const auto* v :
         {&p.mean, &p.projected_mean, &p.eigenvalues, &p.components, &p.component_scales})
      for (float x : *v)
        if (!std::isfinite(x)) throw encoding::CorruptValue("projection: non-finite value");
    if (c.half_vectors && p.out_dim != c.vector_dim)
      throw encoding::CorruptValue("projection: " + std::to_string(p.out_dim) +
                                   " components, but stored vectors have " +
                                   std::to_string(c.vector_dim) + " (m:vdim)");
  } catch (const encoding::CorruptValue& e) {
    c.problems->Add(e.what());
  }
}

// A v: value: checksum, size, finite, unit norm (zero without features).
void CheckVectorValue(const std::string& value, const ImageRecord& rec, const VerifyContext& c,
                      std::vector<float>* floats) {
  ReadVector(value.data(), value.size(), c.vector_dim, c.half_vectors, c.hash_kind, floats->data());
  // float16 keeps 11 significant bits: a unit vector's squared norm comes
  // back within ~1e-3 of 1.
  const double tolerance = c.half_vectors ? 4e-3 : 1e-3;
  double norm2 = 0;
  bool finite = true;
  for (const float v : *floats) {
    finite = finite && std::isfinite(v);
    norm2 += double{v} * v;
  }
  if (!finite) throw encoding::CorruptValue("non-finite value");
  if (rec.status == ImageStatus::kNoFeatures ? norm2 != 0 : std::fabs(norm2 - 1.0) > tolerance)
    throw encoding::CorruptValue("squared norm " + std::to_string(norm2) +
                                 (rec.status == ImageStatus::kNoFeatures
                                      ? ", expected 0 for an image without features"
                                      : ", expected 1"));
}

// One image: its key, id range, path entry, vector, local features and
// thumbnail.
void CheckImage(const rocksdb::Slice& key, const ImageRecord& rec, const VerifyContext& c,
                std::vector<float>* floats) {
  const std::string where = "image " + std::to_string(rec.id) + " (" + rec.path + ")";
  if (key.size() != 10 || encoding::ParseBigEndian64(key.data() + 2) != rec.id)
    c.problems->Add(where + ": record stored under another id's key");
  if (rec.id == 0 || rec.id >= c.next_id)
    c.problems->Add(where + ": id outside the allocated range 1.." + std::to_string(c.next_id - 1));
  std::string value;
  rocksdb::Status s = c.db->Get(c.ro, PathKey(rec.path), &value);
  if (!s.ok() || value.size() != 8 || Reader(value, "path entry").Fixed64() != rec.id)
    c.problems->Add(where + ": path entry missing or pointing elsewhere");
  s = c.db->Get(c.ro, VectorKey(rec.id), &value);
  if (c.vector_dim == 0) {
    if (s.ok()) c.problems->Add(where + ": a vector is stored, but the database keeps none");
  } else if (!s.ok()) {
    c.problems->Add(where + ": vector missing (" + s.ToString() + ")");
    return;
  } else {
    try {
      CheckVectorValue(value, rec, c, floats);
    } catch (const encoding::CorruptValue& e) {
      c.problems->Add(where + ": vector: " + e.what());
    }
  }
  s = c.db->Get(c.ro, FeaturesKey(rec.id), &value);
  if (s.ok()) {
    try {
      value.resize(CheckImageBlob(value.data(), value.size(), c.hash_kind, kFeaturesWhat));
      if (c.check_features && *c.check_features) {
        const std::string problem = (*c.check_features)(rec, value);
        if (!problem.empty()) c.problems->Add(where + ": local features: " + problem);
      }
    } catch (const encoding::CorruptValue& e) {
      c.problems->Add(where + ": " + e.what());
    }
  } else if (s.IsNotFound()) {
    // Schema 3 without stored vectors derives them from the features.
    if (c.half_vectors && c.vector_dim == 0 && rec.status == ImageStatus::kOk)
      c.problems->Add(where + ": no local features, and its vector is derived from them");
  } else {
    c.problems->Add(where + ": local features unreadable (" + s.ToString() + ")");
  }
  // Optional (images indexed before thumbnails existed have none).
  s = c.db->Get(c.ro, ThumbnailKey(rec.id), &value);
  if (s.ok()) {
    try {
      CheckImageBlob(value.data(), value.size(), c.hash_kind, kThumbnailWhat);
    } catch (const encoding::CorruptValue& e) {
      c.problems->Add(where + ": " + e.what());
    }
  } else if (!s.IsNotFound()) {
    c.problems->Add(where + ": thumbnail unreadable (" + s.ToString() + ")");
  }
}

// Every record; returns how many there are and their totals.
uint64_t CheckImages(const VerifyContext& c, ImageTotals* totals) {
  std::vector<float> floats(c.vector_dim);
  uint64_t num_records = 0;
  std::unique_ptr<rocksdb::Iterator> it(c.db->NewIterator(c.ro));
  for (it->Seek("i:"); it->Valid() && it->key().starts_with("i:"); it->Next()) {
    ++num_records;
    try {
      const ImageRecord rec = DecodeRecord(it->value().data(), it->value().size());
      totals->descriptors += rec.num_descriptors;
      totals->without_features += rec.status == ImageStatus::kNoFeatures;
      CheckImage(it->key(), rec, c, &floats);
    } catch (const encoding::CorruptValue& e) {
      c.problems->Add("record key " + it->key().ToString(true) + ": " + e.what());
    }
  }
  if (!it->status().ok()) c.problems->Add("reading records: " + it->status().ToString());
  return num_records;
}

// Path entries, vectors, local features and thumbnails without their record.
void CheckOrphans(const VerifyContext& c) {
  std::string value;
  std::unique_ptr<rocksdb::Iterator> it(c.db->NewIterator(c.ro));
  for (it->Seek("p:"); it->Valid() && it->key().starts_with("p:"); it->Next()) {
    const std::string path = it->key().ToString().substr(2);
    if (it->value().size() != 8) {
      c.problems->Add("path entry " + path + ": malformed");
      continue;
    }
    const uint64_t id = Reader(it->value().data(), 8, "path entry").Fixed64();
    if (!c.db->Get(c.ro, ImageKey(id), &value).ok())
      c.problems->Add("path entry " + path + ": no record for id " + std::to_string(id));
  }
  for (const char* prefix : {"v:", "f:", "t:"}) {
    const char* what = prefix[0] == 'v'   ? "vector"
                       : prefix[0] == 'f' ? kFeaturesWhat
                                          : kThumbnailWhat;
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      if (it->key().size() != 10) {
        c.problems->Add(std::string(what) + " key " + it->key().ToString(true) + ": malformed");
        continue;
      }
      const uint64_t id = encoding::ParseBigEndian64(it->key().data() + 2);
      if (!c.db->Get(c.ro, ImageKey(id), &value).ok())
        c.problems->Add(std::string(what) + " of id " + std::to_string(id) + " has no record");
    }
  }
  if (!it->status().ok()) c.problems->Add("reading: " + it->status().ToString());
}

// The persisted search index: header, every chunk present (the blob itself
// is checked by `read_blob`), no stray chunks.
void CheckSearchIndex(const VerifyContext& c, const std::function<void()>& read_blob) {
  uint32_t expected = 0;
  std::string header;
  const rocksdb::Status hs = c.db->Get(c.ro, kSearchIndexKey, &header);
  if (hs.ok()) {
    try {
      expected = DecodeSearchIndexMeta(header).chunks;
      read_blob();
    } catch (const encoding::CorruptValue& e) {
      c.problems->Add(std::string("persisted search index: ") + e.what());
    } catch (const StoreError& e) {
      c.problems->Add(e.what());
    }
  } else if (!hs.IsNotFound()) {
    c.problems->Add("persisted search index header unreadable (" + hs.ToString() + ")");
  }
  std::unique_ptr<rocksdb::Iterator> it(c.db->NewIterator(c.ro));
  for (it->Seek("x:"); it->Valid() && it->key().starts_with("x:"); it->Next()) {
    const bool well_formed = it->key().size() == 6;
    uint32_t chunk = 0;
    for (size_t i = 2; well_formed && i < 6; ++i)
      chunk = (chunk << 8) | static_cast<unsigned char>(it->key()[i]);
    if (!well_formed || chunk >= expected)
      c.problems->Add("search index chunk key " + it->key().ToString(true) +
                      " is not part of the persisted index");
  }
}

// The word index's keys (w:): each well formed and whole (its checksum).
// Which segments the table lists, and what the values hold, search/
// stored_word_index.h checks (VerifyWordIndex).
void CheckWordKeys(const VerifyContext& c) {
  std::unique_ptr<rocksdb::Iterator> it(c.db->NewIterator(c.ro));
  for (it->Seek("w:"); it->Valid() && it->key().starts_with("w:"); it->Next()) {
    const std::string key = it->key().ToString();
    const bool list = key.size() == 11 && key.compare(0, 3, kWordListPrefix) == 0;
    if (!list && key != kWordTableKey && key != kWordVocabularyKey) {
      c.problems->Add("word index key " + it->key().ToString(true) + ": malformed");
      continue;
    }
    try {
      CheckedXxh3(it->value().ToString(), "word index value");
    } catch (const encoding::CorruptValue& e) {
      c.problems->Add("word index key " + it->key().ToString(true) + ": " + e.what());
    }
  }
  if (!it->status().ok()) c.problems->Add("reading the word index: " + it->status().ToString());
}

}  // namespace

std::vector<std::string> Store::Verify(size_t max_problems,
                                       const FeaturesCheck& check_features) const {
  Problems problems(max_problems);
  const rocksdb::Status checksums = impl_->db->VerifyChecksum();
  if (!checksums.ok()) problems.Add("block checksums: " + checksums.ToString());
  VerifyContext c{impl_->db.get(), rocksdb::ReadOptions(), model_.vlad_dim(), vector_dim_,
                  half_vectors(),  layout_.image_hash,     next_id_,          &problems,
                  &check_features};
  c.ro.verify_checksums = true;
  CheckProjection(c);
  try {
    GetDescriptorQuantizer();
  } catch (const StoreError& e) {
    problems.Add(e.what());
  }
  try {
    GetModelWordVocabulary();
  } catch (const StoreError& e) {
    problems.Add(e.what());
  }
  try {
    GetModelSearchQuantizer();
  } catch (const StoreError& e) {
    problems.Add(e.what());
  }
  ImageTotals counted;
  const uint64_t num_records = CheckImages(c, &counted);
  if (num_records != num_images_)
    problems.Add("stored image count " + std::to_string(num_images_) + " but " +
                 std::to_string(num_records) + " records");
  if (auto kept = totals(); kept && !(kept->descriptors == counted.descriptors &&
                                      kept->without_features == counted.without_features))
    problems.Add("image totals (m:totals) say " + std::to_string(kept->descriptors) +
                 " descriptors and " + std::to_string(kept->without_features) +
                 " images without features, the records " + std::to_string(counted.descriptors) +
                 " and " + std::to_string(counted.without_features));
  CheckOrphans(c);
  CheckSearchIndex(c, [this] { GetSearchIndex(); });
  CheckWordKeys(c);
  return problems.Take();
}

}  // namespace lookalike
