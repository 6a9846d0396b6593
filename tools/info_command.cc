// `lookalike info`: what a database holds and how it was built.
#include <ostream>

#include "indexer/descriptor_quantizer.h"
#include "indexer/file_walker.h"
#include "indexer/projection.h"
#include "indexer/vlad.h"
#include "indexer/word_signatures.h"
#include "search/vector_index.h"
#include "storage/folder_swap.h"
#include "storage/store.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/db_command_flags.h"
#include "tools/output.h"

namespace lookalike {
namespace {

constexpr char kUsage[] =
    "usage: lookalike info --db DB [--format table|json]\n\n"
    "Describes a database: images, model settings, schema version, size on disk,\n"
    "and which VLAD backend this machine would use.\n\n";

}  // namespace

InfoReport MakeInfoReport(const Store& store, const std::string& db) {
  InfoReport r;
  r.path = AbsolutePath(db);
  r.schema_version = store.schema_version();
  r.image_hash = HashKindName(store.hash_kind());
  r.images = store.num_images();
  if (const auto totals = store.totals()) {
    // Counters kept with every write: no record is read.
    r.images_without_features = totals->without_features;
    r.descriptors = totals->descriptors;
  } else {
    store.ForEachImage([&](const ImageRecord& rec) {
      r.images_without_features += rec.status == ImageStatus::kNoFeatures;
      r.descriptors += rec.num_descriptors;
    });
  }
  r.size_bytes = store.SizeOnDisk();
  const ModelRecord& m = store.model();
  r.descriptor = m.descriptor_type;
  r.dim = m.dim;
  r.clusters = m.num_clusters;
  r.vlad_dim = m.vlad_dim();
  r.max_side = m.max_side;
  r.contrast_threshold = m.contrast_threshold;
  r.max_features = m.max_features;
  r.min_keypoints = m.min_keypoints;
  r.power = m.power_alpha;
  r.intra_norm = m.intra_normalize;
  r.residual_norm = m.residual_normalize;
  r.seed = m.seed;
  r.codebook_hash = m.codebook_hash;
  if (const std::optional<ProjectionRecord> pca = store.GetProjection()) {
    r.has_pca = true;
    r.pca_out_dim = pca->out_dim;
    r.pca_whiten = pca->whiten;
    r.pca_regularization = pca->eigen_regularization;
    r.pca_power = pca->power_alpha;
    r.pca_samples = pca->num_samples;
    r.pca_bits = pca->component_bits;
  }
  if (const std::optional<WordVocabulary> words = ModelWordVocabulary(store))
    r.word_vocabulary_words = static_cast<uint32_t>(words->num_words());
  if (const auto lists = store.GetModelSearchQuantizer())
    r.search_lists = static_cast<uint32_t>(VectorIndex::Deserialize(*lists)->nlist());
  if (const auto quantizer = store.GetDescriptorQuantizer())
    r.descriptor_code_bytes =
        static_cast<uint32_t>(DescriptorQuantizer::Deserialize(*quantizer).code_bytes());
  r.stored_vector_dim = store.vector_dim();
  r.stored_vector_half = store.half_vectors();
  const BackendReport backend = ProbeBackends();
  r.backend_auto = backend.cuda_usable ? "cuda" : "cpu";
  r.cuda_compiled = backend.cuda_compiled;
  r.backend_detail = backend.detail;
  return r;
}

int RunInfoCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  DbCommandOptions c;
  if (!ParseDbCommand(args, kUsage, "describe", out, &c)) return kExitOk;
  auto store = Store::Open(c.db, Store::Mode::kReadOnly);
  WriteInfo(out, MakeInfoReport(*store, c.db), c.format);
  // What an interrupted `migrate` left beside the database (changes nothing).
  const Sibling sibling = InspectSibling(c.db, kSchemaVersion);
  if (sibling == Sibling::kCopy || sibling == Sibling::kOriginal)
    err << "lookalike: note: " << SiblingPath(c.db) << " holds "
        << (sibling == Sibling::kCopy ? "the unfinished copy" : "the replaced original")
        << " of an interrupted migration; 'lookalike migrate --db " << c.db
        << "' finishes the job\n";
  return kExitOk;
}

}  // namespace lookalike
