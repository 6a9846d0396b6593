#include "search/searcher.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <future>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "indexer/colour.h"
#include "indexer/file_walker.h"
#include "indexer/model.h"
#include "indexer/projection.h"
#include "indexer/search_vectors.h"
#include "search/colour_index.h"
#include "search/ranking.h"
#include "search/search_index.h"
#include "search/tiny_index.h"
#include "util/threads.h"

namespace lookalike {
namespace fs = std::filesystem;

struct Searcher::Impl {
  SearchOptions options;
  std::unique_ptr<Store> store;
  std::unique_ptr<ImageEncoder> encoder;
  std::unique_ptr<lookalike::SearchVectors>
      vectors;                              // each image's search vector; query VLAD -> index
  std::unique_ptr<FeatureReader> features;  // stored local features, for re-ranking
  std::unique_ptr<VectorIndex> index;       // keyed by image id
  std::vector<uint64_t> ids;                // the images the index holds, ascending
  // The selective first stage (lists read per query from `store`); null = none.
  std::unique_ptr<StoredWordIndex> words;
  // Every indexed image's colour, for colour candidates and fusion; no rows
  // = neither (a schema-1 database, or an index saved before colour tables:
  // fusion then reads the candidates' records).
  ColourIndex colours;
  TinyIndex tiny;  // empty: no thumbnail candidates
  // Loads the search index and tables (once; Open does unless the query is
  // encoded first); every search calls it before it reads them.
  std::once_flag load_once;
  // `first`: the query about to be searched, looked up in the tables a
  // search of one image leaves in the store as they are read past.
  void Load(const ImageEncoder::Result* first = nullptr);
  // The two tables were left in the persisted index (SearchOptions::
  // tables_in_memory off): each query reads them (SearchStoredTables).
  bool stored_tables = false;
  uint64_t generation = 0;  // of the persisted index `ids` came from
  // The last stored-table scan: the one made as the index was loaded for
  // the first query, reused by that query's searches (its mirrored search
  // has the same colour and wants no thumbnail candidates).
  mutable std::mutex scan_mutex;
  mutable std::optional<std::pair<TableQuery, StoredCandidates>> last_scan;
  StoredCandidates ScanStored(const TableQuery& q) const {
    std::lock_guard<std::mutex> lock(scan_mutex);
    const bool hit =
        last_scan &&
        (q.colour_n == 0 || (last_scan->first.colour_n == q.colour_n &&
                             last_scan->first.colour.colour == q.colour.colour)) &&
        (q.tiny_n == 0 || (last_scan->first.tiny_n == q.tiny_n && last_scan->first.tiny == q.tiny));
    if (!hit) last_scan.emplace(q, SearchStoredTables(*store, ids, generation, q));
    StoredCandidates c = last_scan->second;
    if (q.colour_n == 0) c.by_colour.clear();
    if (q.tiny_n == 0) c.by_thumbnail.clear();
    return c;
  }
  // The unit of the fusion weights when the short list cannot hold the
  // whole collection: the search vectors of up to kSpreadSample images
  // spread evenly over `ids` (row-major, spread_rows x vectors->dim()),
  // read at the first query that needs them.
  mutable std::once_flag spread_once;
  mutable std::vector<float> spread_sample;
  mutable int64_t spread_rows = 0;
  void ReadSpreadSample() const;

  // RobustSpread of a query's similarities (a search vector) over the
  // collection: over `short_list` when it holds all of it (depth >= the
  // index's size), else over the sample.
  float Spread(const float* query, const std::vector<Candidate>& short_list,
               bool whole_collection) const;

  // The path of image `id`; nullopt if a writer removed it since the index
  // was loaded (the hit is then dropped).
  std::optional<std::string> PathOf(uint64_t id) const {
    auto record = store->FindById(id);
    if (!record) return std::nullopt;
    return std::move(record->path);
  }
  int64_t num_zero = 0;

  // Position of image `id` in `ids`; -1 if the records do not list it.
  int64_t RowOf(int64_t id) const {
    const auto it = std::lower_bound(ids.begin(), ids.end(), static_cast<uint64_t>(id));
    return it != ids.end() && *it == static_cast<uint64_t>(id) ? it - ids.begin() : -1;
  }

  // n full-VLAD query vectors as search vectors (n x vectors->dim()).
  std::vector<float> ToSearch(const float* vlad, int64_t n) const {
    const SearchProjection& p = vectors->projection();
    if (p.identity()) return std::vector<float>(vlad, vlad + n * p.in_dim());  // already unit
    std::vector<float> out(static_cast<size_t>(n * p.out_dim()));
    p.Apply(vlad, n, out.data());
    return out;
  }

  // The k most similar images of each of n search vectors: inner products
  // in scores[q·k ..], rows of `ids` in rows[q·k ..] (-1 pads).
  void Search(const float* queries, int64_t n, int64_t k, float* scores, int64_t* rows) const {
    index->Search(queries, n, k, scores, rows);
    for (int64_t i = 0; i < n * k; ++i)
      if (rows[i] >= 0) rows[i] = RowOf(rows[i]);
  }

  // The VLAD short list of one query (a search vector): its `depth` most
  // similar images, best first, scored by similarity alone.
  std::vector<Candidate> ShortList(const float* query, int64_t depth) const;

  // Whether the word similarity is fused into the short list's order: its
  // weight is on and the collection has fusion.word_min_images images.
  bool FusesWords() const {
    return options.fusion.word_weight > 0 &&
           static_cast<int64_t>(ids.size()) >= options.fusion.word_min_images;
  }

  // The word index's most similar images for a query, best first, with
  // their similarity over the best one's: the `rerank.word_depth` to verify, and
  // as many as the colour depth for word fusion when it is on.
  std::vector<std::pair<uint64_t, float>> WordList(const LocalFeatures& features) const;
  // The inner products of `query` (a search vector) with `rows` stored
  // search vectors (row-major, rows x vectors->dim()).
  std::vector<float> InnerProducts(const float* query, const float* stored, size_t rows) const {
    const int64_t dim = vectors->dim();
    std::vector<float> out(rows);
    for (size_t i = 0; i < rows; ++i) {
      const float* v = stored + i * static_cast<size_t>(dim);
      float dot = 0;
      for (int64_t j = 0; j < dim; ++j) dot += query[j] * v[j];
      out[i] = dot;
    }
    return out;
  }
  // Appends to `list` the images of `ids` it does not hold, scored by their
  // VLAD similarity with `query` (a search vector).
  void AddMissing(const float* query, const std::vector<uint64_t>& ids,
                  std::vector<Candidate>* list) const;
};

static_assert(ColourIndex::kBins == kColourBins, "a colour table row is one histogram");

namespace {
// The sample the fusion weights' unit comes from in a large collection: as
// many images as the default colour depth's short list holds in a small
// one, in at most 16 MiB of vectors.
constexpr int64_t kSpreadSample = 1000;
constexpr int64_t kSpreadSampleBytes = int64_t{16} << 20;
}  // namespace

void Searcher::Impl::ReadSpreadSample() const {
  // Every n-th image, so the same images at every open of an unchanged
  // collection; images without features (zero vectors) are left out, as
  // they are never compared.
  const int64_t dim = vectors->dim();
  const int64_t rows = std::min<int64_t>(
      {kSpreadSample, static_cast<int64_t>(ids.size()),
       std::max<int64_t>(1, kSpreadSampleBytes / (dim * static_cast<int64_t>(sizeof(float))))});
  std::vector<uint64_t> sample;
  for (int64_t r = 0; r < rows; ++r)
    sample.push_back(ids[static_cast<size_t>(r * static_cast<int64_t>(ids.size()) / rows)]);
  std::vector<float> v(sample.size() * static_cast<size_t>(dim));
  vectors->Read(sample, v.data());
  for (size_t r = 0; r < sample.size(); ++r) {
    const float* row = v.data() + r * static_cast<size_t>(dim);
    if (std::any_of(row, row + dim, [](float x) { return x != 0.0f; })) {
      spread_sample.insert(spread_sample.end(), row, row + dim);
      ++spread_rows;
    }
  }
}

float Searcher::Impl::Spread(const float* query, const std::vector<Candidate>& short_list,
                             bool whole_collection) const {
  if (!whole_collection) std::call_once(spread_once, [this] { ReadSpreadSample(); });
  std::vector<float> sims;
  if (whole_collection || spread_rows < 3) {
    sims.reserve(short_list.size());
    for (const Candidate& c : short_list) sims.push_back(c.similarity);
  } else {
    sims = InnerProducts(query, spread_sample.data(), static_cast<size_t>(spread_rows));
  }
  return RobustSpread(&sims);
}

namespace {
// The inner product of two unit vectors as a cosine: float rounding can put
// an image's similarity with itself a hair above 1, and scores promise [-1, 1].
float Cosine(float inner_product) { return std::clamp(inner_product, -1.0f, 1.0f); }
}  // namespace

std::vector<Candidate> Searcher::Impl::ShortList(const float* query, int64_t depth) const {
  std::vector<float> scores(depth);
  std::vector<int64_t> rows(depth);
  Search(query, 1, depth, scores.data(), rows.data());
  std::vector<Candidate> list;
  list.reserve(depth);
  for (int64_t r = 0; r < depth; ++r) {
    if (rows[r] < 0) continue;
    const float s = Cosine(scores[r]);
    list.push_back(Candidate{ids[rows[r]], s, -1.0f, s, s});
  }
  return list;
}

std::vector<std::pair<uint64_t, float>> Searcher::Impl::WordList(const LocalFeatures& f) const {
  std::vector<std::pair<uint64_t, float>> out;
  if (!words || f.num() == 0) return out;
  const int64_t depth =
      std::max<int64_t>(options.rerank.word_depth, FusesWords() ? options.fusion.colour_depth : 0);
  if (depth == 0) return out;
  out = words->Search(words->vocabulary().EncodeMultiple(f.descriptors.data(), f.num(),
                                                         options.fusion.word_assignments),
                      depth, options.rerank.word_postings);
  if (!out.empty() && out[0].second > 0) {
    const float best = out[0].second;
    for (auto& [id, s] : out) s /= best;
  }
  return out;
}

void Searcher::Impl::AddMissing(const float* query, const std::vector<uint64_t>& add,
                                std::vector<Candidate>* list) const {
  std::unordered_set<uint64_t> have;
  for (const Candidate& c : *list) have.insert(c.id);
  std::vector<uint64_t> missing;
  for (uint64_t id : add)
    if (have.insert(id).second) missing.push_back(id);
  if (missing.empty()) return;
  std::vector<float> v(missing.size() * static_cast<size_t>(vectors->dim()));
  vectors->Read(missing, v.data());
  const std::vector<float> dots = InnerProducts(query, v.data(), missing.size());
  for (size_t i = 0; i < missing.size(); ++i) {
    const float s = Cosine(dots[i]);
    list->push_back(Candidate{missing[i], s, -1.0f, s, s});
  }
}

Searcher::Searcher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Searcher::~Searcher() = default;

namespace {

// What SearchWith looks up in the tables for a query's colour and thumbnail
// when it fuses colour and correlates thumbnails (it asks for a part only
// then: Impl::ScanStored).
TableQuery TableQueryOf(const SearchOptions& options, const ImageEncoder::Result& enc) {
  TableQuery q;
  q.colour = ColourIndex::Prepare(enc.colour);
  q.colour_n = options.fusion.colour_candidates;
  q.tiny = TinyIndex::RowOf(enc.thumbnail);
  q.tiny_n = options.thumbnail.candidates;
  return q;
}

}  // namespace

void Searcher::Impl::Load(const ImageEncoder::Result* first) {
  std::call_once(load_once, [this, first] {
    // The persisted search index, reconciled in memory with the records if
    // it is stale (read-only: `lookalike index` writes it), or built from
    // the stored vectors if there is none.
    // The word index is read (or built from the features) only when a query
    // will use it.
    VectorIndexOptions index_options = options.index;
    index_options.words = options.fusion.word_weight > 0 ||
                          (options.rerank.depth != 0 && options.rerank.word_depth > 0);
    std::optional<TableQuery> query;
    if (first && !options.tables_in_memory) query = TableQueryOf(options, *first);
    SearchIndexSync sync = SyncSearchIndex(*store, *vectors, index_options,
                                           options.tables_in_memory, query ? &*query : nullptr);
    if (options.index.nprobe > 0)
      sync.index->set_nprobe(std::min(options.index.nprobe, sync.index->nlist()));
    // A query's VLAD short list scans ~30 % of the lists (AutoNprobe) and is
    // searched alone, twice with expansion: on both threads it takes half
    // the time.
    sync.index->set_parallel_over_lists(true);
    num_zero = sync.num_zero;
    // Paths are read for hits only (Impl::PathOf): opening reads no record
    // when the persisted index is current.
    ids.reserve(sync.manifest.size());
    for (const IndexedImage& m : sync.manifest) ids.push_back(m.id);
    index = std::move(sync.index);
    words = std::move(sync.words);
    if (sync.colours.rows() == static_cast<int64_t>(ids.size())) colours = std::move(sync.colours);
    if (sync.tiny.rows() == static_cast<int64_t>(ids.size())) tiny = std::move(sync.tiny);
    stored_tables = sync.tables_stored;
    generation = sync.generation;
    if (query && sync.first_candidates) last_scan.emplace(*query, *sync.first_candidates);
  });
}

std::unique_ptr<Searcher> Searcher::Open(const std::string& db_path, const SearchOptions& options) {
  // The one check of the options: everything behind (the search index, the
  // ranking) trusts them.
  options.Validate();
  // Verification runs candidates on OpenMP threads; one BLAS thread each.
  SetLibraryThreads(ResolveThreads(options.threads));
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->store = Store::Open(db_path, Store::Mode::kReadOnly);
  impl->features = std::make_unique<FeatureReader>(*impl->store);
  // Queries keep exact descriptors against a compact database's quantised ones.
  impl->encoder = std::make_unique<ImageEncoder>(impl->store->model(), options.backend,
                                                 impl->features->quantizer());
  impl->encoder->set_pasted_views(options.pasted_views);
  impl->encoder->set_content_hash(impl->store->hash_kind());
  impl->encoder->set_mirror_views(options.mirrored);
  impl->vectors = std::make_unique<lookalike::SearchVectors>(*impl->store);
  // A search of one image (tables left in the store) encodes its query
  // first: the extraction's image pyramids (58 MB for a dev-set photo) are
  // freed before the index is read, and the first query's candidates are
  // found in the tables as they load.
  if (options.tables_in_memory) impl->Load();
  return std::unique_ptr<Searcher>(new Searcher(std::move(impl)));
}

std::vector<std::vector<Hit>> Searcher::SearchVectors(const float* vectors, int64_t num) const {
  impl_->Load();
  std::vector<std::vector<Hit>> out(num);
  const int64_t n_index = impl_->index->ntotal();
  if (num == 0 || n_index == 0) return out;
  const int64_t k = std::min<int64_t>(impl_->options.k, n_index);
  std::vector<float> scores(num * k);
  std::vector<int64_t> rows(num * k);
  const std::vector<float> queries = impl_->ToSearch(vectors, num);
  impl_->Search(queries.data(), num, k, scores.data(), rows.data());
  for (int64_t q = 0; q < num; ++q) {
    for (int64_t r = 0; r < k; ++r) {
      const int64_t row = rows[q * k + r];
      if (row < 0) continue;
      const float s = Cosine(scores[q * k + r]);
      const uint64_t id = impl_->ids[row];
      if (auto path = impl_->PathOf(id)) {
        Hit h;
        h.id = id;
        h.path = std::move(*path);
        h.score = h.similarity = s;
        out[q].push_back(std::move(h));
      }
    }
  }
  return out;
}

std::vector<Hit> Searcher::SearchQuery(const float* vlad, const LocalFeatures& features,
                                       const std::vector<uint8_t>& colour,
                                       const GreyThumbnail& thumbnail) const {
  return SearchWith(impl_->options, 0, vlad, features, colour, thumbnail);
}

std::vector<Hit> Searcher::SearchWith(const SearchOptions& opt, int unverified, const float* vlad,
                                      const LocalFeatures& features,
                                      const std::vector<uint8_t>& colour,
                                      const GreyThumbnail& thumbnail) const {
  impl_->Load();
  const int64_t n_index = impl_->index->ntotal();
  if (n_index == 0) return {};
  // The ranking's preparation (verification's principal axes of the query)
  // and the colour and thumbnail candidates run on a thread of their own
  // beside the word index's lists, whose reading and scoring keep the two
  // cores only partly busy (search/README.md, "One query's threads"). The lists stay
  // on this thread, which allocates and frees their values (ReadLists).
  // With --threads 1 it runs here, when its results are wanted.
  std::optional<QueryRanking> prepared;
  std::vector<uint64_t> by_colour, by_thumbnail;
  const auto launch = opt.threads == 1 ? std::launch::deferred : std::launch::async;
  std::future<void> preparing = std::async(launch, [&] {
    prepared.emplace(*impl_->store, *impl_->features, *impl_->vectors, opt, features, colour,
                     impl_->colours.rows() > 0 ? &impl_->colours : nullptr, thumbnail);
    // (Without a table, fusion reads the candidates' colours from their
    // records, as the table's rows would give them.)
    // The colour candidates (the same for the expanded query: its colour is
    // the query's), and the thumbnail candidates (the query's thumbnail, the
    // same for both).
    const int colour_n = prepared->fuses_colour() ? opt.fusion.colour_candidates : 0;
    const int tiny_n = prepared->correlates() ? opt.thumbnail.candidates : 0;
    if (impl_->stored_tables && (colour_n > 0 || tiny_n > 0)) {
      TableQuery q;
      q.colour = prepared->colour_query();
      q.colour_n = colour_n;
      q.tiny = TinyIndex::RowOf(thumbnail);
      q.tiny_n = tiny_n;
      StoredCandidates c = impl_->ScanStored(q);
      by_colour = std::move(c.by_colour);
      by_thumbnail = std::move(c.by_thumbnail);
    } else {
      if (colour_n > 0) by_colour = impl_->colours.Search(prepared->colour_query(), colour_n);
      if (tiny_n > 0 && impl_->tiny.rows() > 0)
        by_thumbnail = impl_->tiny.Search(TinyIndex::RowOf(thumbnail), tiny_n);
    }
  });
  const std::vector<float> query = impl_->ToSearch(vlad, 1);
  // The word index's list: its head is verified (and added to the short list
  // if VLAD missed it); its similarities take part in the fusion. (If it
  // throws, `preparing` is waited for as it goes out of scope.)
  const std::vector<std::pair<uint64_t, float>> word_list = impl_->WordList(features);
  preparing.get();
  QueryRanking& ranking = *prepared;
  std::vector<uint64_t> word_head;
  for (size_t i = 0; i < word_list.size() && static_cast<int>(i) < opt.rerank.word_depth; ++i)
    word_head.push_back(word_list[i].first);
  if (impl_->FusesWords()) ranking.SetWordSimilarities(word_list);
  if (!ranking.reranks()) word_head.clear();
  // How deep the fused list and the VLAD order are verified depends on
  // whether a word head is.
  const int vlad_depth = VladHeadDepth(opt.rerank.vlad_depth, !word_head.empty());
  const int rerank_depth = RerankDepth(opt.rerank.depth, !word_head.empty());
  // The VLAD order's head.
  auto vlad_head = [&](const std::vector<Candidate>& l) {
    std::vector<uint64_t> ids;
    for (size_t i = 0; i < l.size() && static_cast<int>(i) < vlad_depth; ++i)
      ids.push_back(l[i].id);
    return ids;
  };
  const int64_t depth = std::min<int64_t>(
      n_index, std::max({opt.k, rerank_depth, ranking.fuses() ? opt.fusion.colour_depth : 0}));
  // The fused short list of a search vector, and the heads verified whatever
  // the fusion did: the VLAD order's and the word index's.
  std::vector<uint64_t> head;
  auto fused_list = [&](const float* q) {
    std::vector<Candidate> l = impl_->ShortList(q, depth);
    // Before the candidates added from elsewhere, which are not VLAD's
    // nearest and would widen it.
    const float spread = impl_->Spread(q, l, depth >= n_index);
    head = vlad_head(l);
    head.insert(head.end(), word_head.begin(), word_head.end());
    impl_->AddMissing(q, word_head, &l);
    impl_->AddMissing(q, by_colour, &l);
    impl_->AddMissing(q, by_thumbnail, &l);
    ranking.Fuse(&l, spread);
    return l;
  };
  std::vector<Candidate> list = fused_list(query.data());
  if (ranking.reranks()) {
    ranking.Rerank(&list, rerank_depth, head);
    std::vector<float> expanded;
    if (opt.expansion.results > 0 && ranking.Expand(query.data(), list, &expanded)) {
      list = fused_list(expanded.data());
      ranking.Rerank(&list, rerank_depth, head);
    }
  }
  // After verification, which judges what it can; the colour candidates are
  // where a copy too small to verify still ranks high. The word list's first
  // thumbnail.depth are correlated too, wherever fusion ranked them: a
  // blurred crop may share a few local features with its original, too few
  // to verify, while its global similarities sink it (the dev set's blurred
  // 49 % crop: 67th by words of 10,097 images, 721st after fusion).
  if (ranking.correlates()) {
    std::vector<uint64_t> also = by_colour;
    also.insert(also.end(), by_thumbnail.begin(), by_thumbnail.end());
    for (size_t i = 0; i < word_list.size() && static_cast<int>(i) < opt.thumbnail.depth; ++i)
      also.push_back(word_list[i].first);
    ranking.Correlate(&list, also);
  }
  // The first k candidates, and as many more as hold `unverified` that are
  // not verified; their records in one read; a candidate a writer removed
  // since the index was loaded is dropped and the next one read.
  auto enough = [&](size_t n, int not_verified) {
    return static_cast<int>(n) >= opt.k && not_verified >= unverified;
  };
  auto verified = [&](uint64_t id) { return ranking.Verified(id); };
  std::vector<uint64_t> first;
  for (int not_verified = 0; first.size() < list.size() && !enough(first.size(), not_verified);) {
    first.push_back(list[first.size()].id);
    not_verified += verified(first.back()) ? 0 : 1;
  }
  std::vector<std::optional<ImageRecord>> records = impl_->store->FindByIds(first);
  std::vector<Hit> hits;
  int not_verified = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    if (enough(hits.size(), not_verified)) break;
    const Candidate& c = list[i];
    std::optional<std::string> path;
    if (i >= records.size())
      path = impl_->PathOf(c.id);
    else if (records[i])
      path = std::move(records[i]->path);
    if (!path) continue;
    Hit h;
    h.id = c.id;
    h.path = std::move(*path);
    h.score = c.score;
    h.similarity = c.similarity;
    h.inliers = ranking.inliers(c.id);
    h.colour = c.colour;
    h.words = c.words;
    h.thumbnail = c.thumbnail;
    not_verified += verified(c.id) ? 0 : 1;
    hits.push_back(std::move(h));
  }
  std::vector<uint64_t> ids;
  for (const Hit& h : hits) ids.push_back(h.id);
  const std::vector<MatchEvidence> evidence = ranking.Evidence(ids);
  for (size_t i = 0; i < hits.size(); ++i) {
    hits[i].evidence = evidence[i];
    hits[i].level = ClassifyMatch(evidence[i], opt.levels);
  }
  return hits;
}

std::vector<Hit> Searcher::SearchEncoded(const ImageEncoder::Result& enc) const {
  // Verification through hubs looks at the first hub_depth results that are
  // not verified, whatever k is: the list is made that long, and cut to k
  // after.
  const SearchOptions& opt = impl_->options;
  const int unverified = opt.expansion.hubs > 0 ? opt.expansion.hub_depth : 0;
  std::vector<Hit> hits = SearchViews(unverified, enc);
  if (opt.mirrored && !enc.mirror.empty()) AddMirrored(unverified, enc.mirror[0], &hits);
  if (opt.expansion.hubs > 0 && !hits.empty()) RaiseThroughHubs(enc.vlad.data(), &hits);
  if (static_cast<int>(hits.size()) > opt.k) hits.resize(opt.k);
  // A file with the query's bytes is identical, whatever its features said
  // (it may have none).
  if (enc.content_hash) {
    std::vector<uint64_t> ids;
    for (const Hit& h : hits) ids.push_back(h.id);
    const std::vector<std::optional<ImageRecord>> records = impl_->store->FindByIds(ids);
    for (size_t i = 0; i < hits.size(); ++i) {
      if (!records[i] || records[i]->content_hash != *enc.content_hash) continue;
      hits[i].evidence.identical = true;
      hits[i].level = ClassifyMatch(hits[i].evidence, impl_->options.levels);
    }
  }
  const MatchLevel min_level = impl_->options.min_level;
  hits.erase(std::remove_if(hits.begin(), hits.end(),
                            [min_level](const Hit& h) { return h.level < min_level; }),
             hits.end());
  return hits;
}

void Searcher::RaiseThroughHubs(const float* vlad, std::vector<Hit>* hits) const {
  std::vector<RankedResult> list;
  for (const Hit& h : *hits)
    list.push_back({h.id, h.score, h.inliers, h.evidence.consistent, h.level});
  // A hub's nearest images: its stored search vector searched in the vector
  // index, each found image's similarity with the query as it is (the
  // query's search vector projected once, when a hub first asks).
  std::vector<float> query;
  const int64_t dim = impl_->vectors->dim();
  const HubNeighbours neighbours = [&](uint64_t hub, int n) {
    if (query.empty()) query = impl_->ToSearch(vlad, 1);
    std::vector<HubNeighbour> out;
    std::vector<float> v(static_cast<size_t>(dim));
    impl_->vectors->Read({hub}, v.data());
    const int64_t k = std::min<int64_t>(n + 1, impl_->index->ntotal());
    std::vector<float> scores(static_cast<size_t>(k));
    std::vector<int64_t> rows(static_cast<size_t>(k));
    impl_->Search(v.data(), 1, k, scores.data(), rows.data());
    std::vector<uint64_t> ids;
    for (int64_t r : rows)
      if (r >= 0 && impl_->ids[r] != hub && static_cast<int>(ids.size()) < n)
        ids.push_back(impl_->ids[r]);
    if (ids.empty()) return out;
    std::vector<float> stored(ids.size() * static_cast<size_t>(dim));
    impl_->vectors->Read(ids, stored.data());
    const std::vector<float> dots = impl_->InnerProducts(query.data(), stored.data(), ids.size());
    for (size_t i = 0; i < ids.size(); ++i) out.push_back({ids[i], Cosine(dots[i])});
    return out;
  };
  const ThroughHubs through = ScoresThroughHubs(*impl_->features, impl_->options, list, neighbours);
  for (size_t i = 0; i < hits->size(); ++i) (*hits)[i].score = through.scores[i];
  // A neighbour the list did not hold joins it, unverified (a writer may
  // have removed it since the index was loaded: then it is left out).
  for (size_t i = 0; i < through.added.size(); ++i) {
    auto path = impl_->PathOf(through.added[i].id);
    if (!path) continue;
    Hit h;
    h.id = through.added[i].id;
    h.path = std::move(*path);
    h.score = through.added[i].score;
    h.similarity = through.added_similarity[i];
    hits->push_back(std::move(h));
  }
  std::stable_sort(hits->begin(), hits->end(),
                   [](const Hit& a, const Hit& b) { return a.score > b.score; });
}

void Searcher::AddMirrored(int unverified, const ImageEncoder::Result& mirror,
                           std::vector<Hit>* hits) const {
  // What only a verified match can use: no expansion, and no thumbnail
  // correlation or candidates (a correlation gives no level).
  SearchOptions opt = impl_->options;
  opt.expansion.results = 0;
  opt.thumbnail.weight = 0;
  opt.thumbnail.candidates = 0;
  std::unordered_map<uint64_t, size_t> at;  // id -> index in hits
  for (size_t i = 0; i < hits->size(); ++i) at.emplace((*hits)[i].id, i);
  for (Hit& h : SearchWith(opt, unverified, mirror.vlad.data(), mirror.features, mirror.colour,
                           mirror.thumbnail)) {
    if (h.level == MatchLevel::kNone) continue;
    h.evidence.mirrored = !h.evidence.mirrored;
    const auto [it, added] = at.emplace(h.id, hits->size());
    if (added) {
      hits->push_back(std::move(h));
      continue;
    }
    const Hit& had = (*hits)[it->second];
    if (h.level > had.level || (h.level == had.level && h.score > had.score))
      (*hits)[it->second] = std::move(h);
  }
  std::stable_sort(hits->begin(), hits->end(),
                   [](const Hit& a, const Hit& b) { return a.score > b.score; });
  if (unverified == 0 && static_cast<int>(hits->size()) > opt.k) hits->resize(opt.k);
}

std::vector<Hit> Searcher::SearchViews(int unverified, const ImageEncoder::Result& enc) const {
  std::vector<Hit> hits = SearchWith(impl_->options, unverified, enc.vlad.data(), enc.features,
                                     enc.colour, enc.thumbnail);
  // The views are searched only when the query as it is verified nothing
  // first: most pasted copies keep enough features to be verified as they
  // are (at 100,000 images, 14 of the 17 dev queries with a view), and a
  // second search doubles a query's cost.
  if (!impl_->options.pasted_views || enc.views.empty() ||
      (!hits.empty() && hits[0].evidence.verified))
    return hits;
  std::unordered_map<uint64_t, size_t> at;  // id -> index in hits
  for (size_t i = 0; i < hits.size(); ++i) at.emplace(hits[i].id, i);
  // A view's hit counts only with evidence of its own: verified, or its
  // thumbnail correlated. Its global similarities alone would add a second
  // set of near misses to the first (search/README.md, "Pasted pictures").
  const auto evidence = [&](const Hit& h) {
    return h.evidence.verified || h.thumbnail > kThumbnailThreshold;
  };
  for (const ImageEncoder::Result& view : enc.views) {
    if (view.error) continue;
    for (Hit& h : SearchWith(impl_->options, unverified, view.vlad.data(), view.features,
                             view.colour, view.thumbnail)) {
      if (!evidence(h)) continue;
      const auto [it, added] = at.emplace(h.id, hits.size());
      if (added)
        hits.push_back(std::move(h));
      else if (h.score > hits[it->second].score)
        hits[it->second] = std::move(h);
    }
  }
  std::stable_sort(hits.begin(), hits.end(),
                   [](const Hit& a, const Hit& b) { return a.score > b.score; });
  if (unverified == 0 && static_cast<int>(hits.size()) > impl_->options.k)
    hits.resize(impl_->options.k);
  return hits;
}

std::vector<QueryResult> Searcher::SearchFiles(const std::vector<std::string>& queries) {
  std::vector<QueryResult> results(queries.size());
  for (size_t i = 0; i < queries.size(); ++i) {
    const auto start = std::chrono::steady_clock::now();
    results[i].query = queries[i];
    ImageEncoder::Result enc = impl_->encoder->EncodeFile(queries[i], impl_->options.limits);
    if (!enc.error) {
      impl_->Load(&enc);  // the first query's look in the tables as they load
      results[i].hits = SearchEncoded(enc);
    }
    results[i].error = std::move(enc.error);
    results[i].seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return results;
}

int64_t Searcher::num_indexed() const {
  impl_->Load();
  return impl_->index->ntotal();
}
int64_t Searcher::num_zero_vectors() const {
  impl_->Load();
  return impl_->num_zero;
}
const ModelRecord& Searcher::model() const { return impl_->store->model(); }
Backend Searcher::backend() const { return impl_->encoder->backend(); }

std::vector<std::string> ExpandQueryPaths(const std::vector<std::string>& args,
                                          std::vector<FileError>* errors) {
  std::vector<std::string> out;
  for (const std::string& arg : args) {
    std::error_code ec;
    const fs::file_status st = fs::status(arg, ec);
    if (fs::is_directory(st)) {
      WalkResult walk = ListImageFiles(arg, {});
      for (auto& e : walk.errors) errors->push_back(std::move(e));
      out.insert(out.end(), walk.files.begin(), walk.files.end());
    } else if (fs::exists(st)) {
      out.push_back(arg);
    } else {
      errors->push_back(FileError{FileErrorCode::kVanished, arg, "no such file or folder"});
    }
  }
  return out;
}

}  // namespace lookalike
