#include "storage/values.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "storage/keys.h"
#include "storage/store_error.h"

namespace lookalike {
namespace store_detail {

using encoding::Reader;

// "<what>: checksum mismatch (stored …, computed …)": the words the CLI and
// the tests look for, with both hashes so a report says which side changed.
encoding::CorruptValue ChecksumMismatch(const std::string& what, uint64_t stored,
                                        uint64_t computed) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "stored %016llx, computed %016llx",
                static_cast<unsigned long long>(stored), static_cast<unsigned long long>(computed));
  return encoding::CorruptValue((what.empty() ? "" : what + ": ") + "checksum mismatch (" + buf +
                                ")");
}

SearchIndexMeta DecodeSearchIndexMeta(const std::string& value) {
  Reader r(value, "search index header (m:xindex)");
  const uint32_t format = r.Fixed32();
  if (format != kSearchIndexFormat && format != kSearchIndexFnvFormat)
    throw encoding::CorruptValue("search index header: format " + std::to_string(format) +
                                 ", this build reads " + std::to_string(kSearchIndexFnvFormat) +
                                 " and " + std::to_string(kSearchIndexFormat));
  SearchIndexMeta m;
  m.checksum_kind = format == kSearchIndexFormat ? HashKind::kXxh3_64 : HashKind::kFnv1a64;
  m.size = r.Fixed64();
  m.chunks = r.Fixed32();
  m.checksum = r.Fixed64();
  r.ExpectEnd();
  if (m.chunks != (m.size + kSearchIndexChunk - 1) / kSearchIndexChunk)
    throw encoding::CorruptValue("search index header: " + std::to_string(m.chunks) +
                                 " chunks cannot hold " + std::to_string(m.size) + " bytes");
  return m;
}
// Puts f:<id> or t:<id> = blob, u64 hash of the blob. The blob goes into
// the batch straight from the caller's string (no intermediate copy).
void PutImageBlob(rocksdb::WriteBatch* batch, const std::string& key, const std::string& blob,
                  HashKind kind) {
  std::string tail;
  encoding::PutFixed64(&tail, Hash64(kind, blob.data(), blob.size()));
  const rocksdb::Slice key_part(key);
  const rocksdb::Slice parts[2] = {rocksdb::Slice(blob), rocksdb::Slice(tail)};
  batch->Put(rocksdb::SliceParts(&key_part, 1), rocksdb::SliceParts(parts, 2));
}

// Throws CorruptValue unless an f: or t: value ends with the hash of its
// blob; returns the blob's size.
size_t CheckImageBlob(const char* data, size_t size, HashKind kind, const char* what) {
  if (size < 8) throw encoding::CorruptValue(std::string(what) + ": too short");
  const size_t n = size - 8;
  const uint64_t stored = Reader(data + n, 8, what).Fixed64();
  const uint64_t computed = Hash64(kind, data, n);
  if (stored != computed) throw ChecksumMismatch(what, stored, computed);
  return n;
}

// Puts v:<id> = u32 dim, dim x f32 little-endian, u64 hash of the float
// bytes. On a little-endian host the floats go into the batch straight from
// `v`: the 256 KiB value is copied once, by the batch, and never encoded
// into a string first.
void PutVector(rocksdb::WriteBatch* batch, const std::string& key, const float* v, uint64_t dim,
               bool half, HashKind kind) {
  std::string head, swapped, tail;
  encoding::PutFixed32(&head, static_cast<uint32_t>(dim));
  rocksdb::Slice floats(reinterpret_cast<const char*>(v), dim * 4);
  if (half) {
    encoding::PutHalves(&swapped, v, dim);
    floats = rocksdb::Slice(swapped);
  } else if (!encoding::kLittleEndianHost) {
    swapped.reserve(dim * 4);
    encoding::PutFloats(&swapped, v, dim);
    floats = rocksdb::Slice(swapped);
  }
  encoding::PutFixed64(&tail, Hash64(kind, floats.data(), floats.size()));
  const rocksdb::Slice key_part(key);
  const rocksdb::Slice parts[3] = {rocksdb::Slice(head), floats, rocksdb::Slice(tail)};
  batch->Put(rocksdb::SliceParts(&key_part, 1), rocksdb::SliceParts(parts, 3));
}

void ReadVector(const char* data, size_t size, uint64_t dim, bool half, HashKind kind, float* out) {
  Reader r(data, size, "vector");
  if (r.Fixed32() != dim) throw encoding::CorruptValue("wrong dimension");
  const size_t bytes = dim * (half ? 2 : 4);
  const char* raw = r.Raw(bytes);
  const uint64_t stored = r.Fixed64();
  r.ExpectEnd();
  const uint64_t computed = Hash64(kind, raw, bytes);
  if (stored != computed) throw ChecksumMismatch("", stored, computed);
  if (!half) {
    encoding::GetFloats(raw, dim, out);
    return;
  }
  encoding::GetHalves(raw, dim, out);
}

std::string WithChecksum(const std::string& blob) {
  std::string s = blob;
  encoding::PutFixed64(&s, encoding::Fnv1a64(blob.data(), blob.size()));
  return s;
}

std::string CheckedBlob(const std::string& value, const char* what) {
  if (value.size() < 8) throw encoding::CorruptValue(std::string(what) + ": too short");
  const size_t n = value.size() - 8;
  const uint64_t stored = Reader(value.data() + n, 8, what).Fixed64();
  const uint64_t computed = encoding::Fnv1a64(value.data(), n);
  if (stored != computed) throw ChecksumMismatch(what, stored, computed);
  return value.substr(0, n);
}

std::string WithXxh3(const std::string& blob) {
  std::string s;
  s.reserve(blob.size() + 8);
  s = blob;
  encoding::PutFixed64(&s, Hash64(HashKind::kXxh3_64, blob.data(), blob.size()));
  return s;
}

size_t CheckXxh3(const char* data, size_t size, const char* what) {
  if (size < 8) throw encoding::CorruptValue(std::string(what) + ": too short");
  const size_t n = size - 8;
  const uint64_t stored = Reader(data + n, 8, what).Fixed64();
  const uint64_t computed = Hash64(HashKind::kXxh3_64, data, n);
  if (stored != computed) throw ChecksumMismatch(what, stored, computed);
  return n;
}

std::string CheckedXxh3(const std::string& value, const char* what) {
  return value.substr(0, CheckXxh3(value.data(), value.size(), what));
}

std::string EncodeU64(uint64_t v) {
  std::string s;
  encoding::PutFixed64(&s, v);
  return s;
}

std::string EncodeTotals(const ImageTotals& t) {
  std::string s;
  encoding::PutFixed64(&s, t.descriptors);
  encoding::PutFixed64(&s, t.without_features);
  encoding::PutFixed64(&s, t.generation);
  return s;
}

ImageTotals DecodeTotals(const std::string& value) {
  Reader r(value, "image totals");
  ImageTotals t;
  t.descriptors = r.Fixed64();
  t.without_features = r.Fixed64();
  t.generation = r.Fixed64();
  r.ExpectEnd();
  return t;
}

namespace {

// Writes the fields of a record's Fields list (storage/model_record.h).
class FieldWriter {
 public:
  explicit FieldWriter(std::string* s) : s_(s) {}
  void Text(const std::string& v) { encoding::PutBytes(s_, v); }
  void U32(uint32_t v) { encoding::PutFixed32(s_, v); }
  void F32(float v) { encoding::PutFloat(s_, v); }
  void U64(uint64_t v) { encoding::PutFixed64(s_, v); }
  void Flags(bool bit1, bool bit2) { U32((bit1 ? 1u : 0u) | (bit2 ? 2u : 0u)); }

 protected:
  std::string* s_;
};

// Reads them back, bounds-checked (CorruptValue naming the value).
class FieldReader {
 public:
  explicit FieldReader(Reader* r) : r_(r) {}
  void Text(std::string& v) { v = r_->Bytes(); }
  void U32(uint32_t& v) { v = r_->Fixed32(); }
  void F32(float& v) { v = r_->Float(); }
  void U64(uint64_t& v) { v = r_->Fixed64(); }
  void Flags(bool& bit1, bool& bit2) {
    const uint32_t flags = r_->Fixed32();
    bit1 = flags & 1u;
    bit2 = flags & 2u;
  }

 protected:
  Reader* r_;
};

class ModelWriter : public FieldWriter {
 public:
  using FieldWriter::FieldWriter;
  void Codebook(const ModelRecord& m) {
    U64(m.centroids.size());
    for (float v : m.centroids) F32(v);
  }
  bool Appended() { return true; }
};

class ModelReader : public FieldReader {
 public:
  using FieldReader::FieldReader;
  void Codebook(ModelRecord& m) {
    const uint64_t n = r_->Fixed64();
    // The one check of a stored model's shape (the codebook trusts it).
    if (m.num_clusters < 1 || m.dim < 1)
      throw encoding::CorruptValue("model: K = " + std::to_string(m.num_clusters) +
                                   ", dim = " + std::to_string(m.dim) + ", both must be >= 1");
    if (n != m.vlad_dim() || n > (uint64_t{1} << 28))
      throw encoding::CorruptValue("model: codebook has " + std::to_string(n) +
                                   " values, expected K x dim = " + std::to_string(m.vlad_dim()));
    m.centroids.resize(n);
    for (float& v : m.centroids) v = r_->Float();
  }
  bool Appended() { return appended_ = r_->remaining() > 0; }
  bool appended() const { return appended_; }

 private:
  bool appended_ = false;
};

class ProjectionWriter : public FieldWriter {
 public:
  using FieldWriter::FieldWriter;
  void FlagsAndBits(const ProjectionRecord& p) {
    Flags(p.whiten, p.component_bits == 16);
    if (p.format() >= 2) U32(p.component_bits);
  }
  void Dimensions(const ProjectionRecord& p) {
    if (!p.SizesConsistent())
      throw StoreError(StoreError::Kind::kIo, "projection has inconsistent sizes");
  }
  void Floats(const std::vector<float>& v, uint32_t) {
    for (float x : v) F32(x);
  }
  void Mean(const ProjectionRecord& p) { Floats(p.format() == 4 ? p.projected_mean : p.mean, 0); }
  void Components(const ProjectionRecord& p) {
    const uint64_t n = p.components.size();
    std::string& s = *s_;
    if (ProjectionRecord::Gridded(p.component_bits)) {
      Floats(p.component_scales, p.out_dim);
      const uint32_t bits = p.component_bits, per_byte = 8 / bits;
      const uint64_t row_bytes = (uint64_t{p.in_dim} + per_byte - 1) / per_byte;
      const size_t codes = s.size();
      s.resize(codes + row_bytes * p.out_dim, '\0');
      for (uint32_t r = 0; r < p.out_dim; ++r) {
        const float* row = p.components.data() + uint64_t{r} * p.in_dim;
        const float step = p.component_scales[r];
        char* out = s.data() + codes + r * row_bytes;
        for (uint32_t j = 0; j < p.in_dim; ++j)
          out[j / per_byte] = static_cast<char>(
              static_cast<uint8_t>(out[j / per_byte]) |
              (ProjectionRecord::GridCode(row[j], step, bits) << (bits * (j % per_byte))));
      }
    } else if (p.component_bits == 16) {
      encoding::PutHalves(&s, p.components.data(), n);
    } else {
      encoding::PutFloats(&s, p.components.data(), n);
    }
  }
};

// row[b * kPerByte + k] = table[in[b]][k] for the first `bytes` bytes: a
// fixed-size copy per byte.
template <uint32_t kPerByte>
void ExpandBytes(const unsigned char* in, uint32_t bytes, const float (*table)[8], float* row) {
  for (uint32_t b = 0; b < bytes; ++b)
    std::memcpy(row + uint64_t{b} * kPerByte, table[in[b]], kPerByte * sizeof(float));
}

class ProjectionReader : public FieldReader {
 public:
  ProjectionReader(Reader* r, uint32_t format, uint64_t vlad_dim)
      : FieldReader(r), format_(format), vlad_dim_(vlad_dim) {}
  void FlagsAndBits(ProjectionRecord& p) {
    bool half = false;
    Flags(p.whiten, half);
    p.component_bits = half ? 16 : 32;
    if (format_ < 2) return;
    U32(p.component_bits);
    // Format 2 is 4-bit only (what builds before format 3 read); 3 is 2 or 1;
    // 4 any grid (its mean projected).
    const bool known = format_ == 2   ? p.component_bits == 4
                       : format_ == 3 ? p.component_bits == 2 || p.component_bits == 1
                                      : ProjectionRecord::Gridded(p.component_bits);
    if (!known)
      throw encoding::CorruptValue("projection: format " + std::to_string(format_) + " with " +
                                   std::to_string(p.component_bits) + "-bit components");
  }
  void Dimensions(const ProjectionRecord& p) {
    if (!p.Maps(vlad_dim_))
      throw encoding::CorruptValue(
          "projection: maps " + std::to_string(p.in_dim) + " -> " + std::to_string(p.out_dim) +
          " dimensions, the model's VLAD has " + std::to_string(vlad_dim_));
  }
  void Floats(std::vector<float>& v, uint32_t count) {
    v.resize(count);
    for (float& x : v) x = r_->Float();
  }
  void Mean(ProjectionRecord& p) {
    if (format_ == 4)
      Floats(p.projected_mean, p.out_dim);
    else
      Floats(p.mean, p.in_dim);
  }
  void Components(ProjectionRecord& p) {
    const uint64_t n = uint64_t{p.out_dim} * p.in_dim;
    p.components.resize(n);
    if (ProjectionRecord::Gridded(p.component_bits)) {
      Floats(p.component_scales, p.out_dim);
      const uint32_t bits = p.component_bits, per_byte = 8 / bits, mask = (1u << bits) - 1;
      const uint64_t row_bytes = (uint64_t{p.in_dim} + per_byte - 1) / per_byte;
      const auto* raw = reinterpret_cast<const unsigned char*>(r_->Raw(row_bytes * p.out_dim));
      for (uint32_t r = 0; r < p.out_dim; ++r) {
        const float step = p.component_scales[r];
        if (!(step > 0.0f) || !std::isfinite(step))
          throw encoding::CorruptValue("projection: bad step " + std::to_string(step) +
                                       " of component " + std::to_string(r));
        float values[16];
        for (uint8_t c = 0; c <= mask; ++c) values[c] = ProjectionRecord::GridValue(c, step, bits);
        // Value j is the code at bit bits x (j % per_byte) of byte j / per_byte:
        // each byte's values from a table of all 256 bytes (a matrix row is
        // 65,536 values at K = 512, read by every run that opens it).
        float table[256][8];
        for (uint32_t b = 0; b < 256; ++b)
          for (uint32_t k = 0; k < per_byte; ++k) table[b][k] = values[(b >> (bits * k)) & mask];
        float* row = p.components.data() + uint64_t{r} * p.in_dim;
        const unsigned char* in = raw + r * row_bytes;
        const uint32_t whole = p.in_dim / per_byte;
        switch (per_byte) {
          case 8:
            ExpandBytes<8>(in, whole, table, row);
            break;
          case 4:
            ExpandBytes<4>(in, whole, table, row);
            break;
          default:
            ExpandBytes<2>(in, whole, table, row);
        }
        for (uint32_t j = whole * per_byte; j < p.in_dim; ++j)
          row[j] = table[in[whole]][j - whole * per_byte];
      }
    } else if (p.component_bits == 16) {
      encoding::GetHalves(r_->Raw(2 * n), n, p.components.data());
    } else {
      encoding::GetFloats(r_->Raw(4 * n), n, p.components.data());
    }
  }

 private:
  uint32_t format_;
  uint64_t vlad_dim_;
};

}  // namespace

std::string EncodeModel(const ModelRecord& m) {
  std::string s;
  ModelWriter writer(&s);
  ModelRecord::Fields(m, writer);
  // Then an FNV-1a of the whole value: the codebook hash covers only the
  // centroids, and a flipped settings byte would otherwise change how
  // queries are encoded without a word.
  encoding::PutFixed64(&s, encoding::Fnv1a64(s.data(), s.size()));
  return s;
}

ModelRecord DecodeModel(const std::string& value) {
  Reader r(value, "model");
  ModelRecord m;
  ModelReader reader(&r);
  ModelRecord::Fields(m, reader);
  if (reader.appended()) {  // written by builds with min_keypoints: the checksum follows
    const uint64_t covered = value.size() - r.remaining();
    const uint64_t stored = r.Fixed64();
    const uint64_t computed = encoding::Fnv1a64(value.data(), covered);
    if (stored != computed) throw ChecksumMismatch("model", stored, computed);
  }
  r.ExpectEnd();
  const uint64_t hash = encoding::Fnv1a64(m.centroids.data(), m.centroids.size() * sizeof(float));
  if (hash != m.codebook_hash) throw ChecksumMismatch("model: codebook", m.codebook_hash, hash);
  return m;
}

// m:pca: u32 format (ProjectionRecord::format()), then
// ProjectionRecord::Fields, then a u64 FNV-1a of everything before it.
std::string EncodeProjection(const ProjectionRecord& p) {
  const uint64_t n = uint64_t{p.out_dim} * p.in_dim;
  std::string s;
  s.reserve(44 + 4 * (p.in_dim + 2 * p.out_dim) + n * p.component_bits / 8 + p.out_dim + 8);
  encoding::PutFixed32(&s, p.format());
  ProjectionWriter writer(&s);
  ProjectionRecord::Fields(p, writer);
  encoding::PutFixed64(&s, encoding::Fnv1a64(s.data(), s.size()));
  return s;
}

ProjectionRecord DecodeProjection(const std::string& value, uint64_t vlad_dim) {
  if (value.size() < 8) throw encoding::CorruptValue("projection: too short");
  const size_t body = value.size() - 8;
  const uint64_t stored = Reader(value.data() + body, 8, "projection").Fixed64();
  const uint64_t computed = encoding::Fnv1a64(value.data(), body);
  if (stored != computed) throw ChecksumMismatch("projection (m:pca)", stored, computed);
  Reader r(value.data(), body, "projection");
  const uint32_t format = r.Fixed32();
  if (format < 1 || format > kProjectionFormat)
    throw encoding::CorruptValue("projection: format " + std::to_string(format) +
                                 ", this build reads 1 to " + std::to_string(kProjectionFormat));
  ProjectionRecord p;
  ProjectionReader reader(&r, format, vlad_dim);
  ProjectionRecord::Fields(p, reader);
  r.ExpectEnd();
  return p;
}

std::string EncodeRecord(const ImageRecord& r, bool with_colour) {
  std::string s;
  encoding::PutFixed64(&s, r.id);
  encoding::PutBytes(&s, r.path);
  encoding::PutFixed64(&s, r.size_bytes);
  encoding::PutFixed64(&s, static_cast<uint64_t>(r.mtime_ns));
  encoding::PutFixed64(&s, r.content_hash);
  encoding::PutFixed32(&s, r.width);
  encoding::PutFixed32(&s, r.height);
  encoding::PutFixed32(&s, r.num_descriptors);
  encoding::PutFixed32(&s, static_cast<uint32_t>(r.status));
  // Schema 2 appends the colour histogram (length-prefixed); schema-1 records
  // end here, as the builds that read schema 1 expect.
  if (with_colour) encoding::PutBytes(&s, std::string(r.colour.begin(), r.colour.end()));
  return s;
}

ImageRecord DecodeRecord(const char* data, size_t size) {
  Reader r(data, size, "image record");
  ImageRecord rec;
  rec.id = r.Fixed64();
  rec.path = r.Bytes();
  rec.size_bytes = r.Fixed64();
  rec.mtime_ns = static_cast<int64_t>(r.Fixed64());
  rec.content_hash = r.Fixed64();
  rec.width = r.Fixed32();
  rec.height = r.Fixed32();
  rec.num_descriptors = r.Fixed32();
  const uint32_t status = r.Fixed32();
  if (status > 1) throw encoding::CorruptValue("image record: unknown status");
  rec.status = static_cast<ImageStatus>(status);
  if (r.remaining() > 0) {
    const std::string colour = r.Bytes();
    rec.colour.assign(colour.begin(), colour.end());
  }
  r.ExpectEnd();
  return rec;
}

}  // namespace store_detail
}  // namespace lookalike
