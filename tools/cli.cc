#include "tools/cli.h"

#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "indexer/file_walker.h"
#include "indexer/pipeline.h"
#include "search/dedup.h"
#include "search/searcher.h"
#include "storage/store.h"

namespace lookalike {
namespace po = boost::program_options;

namespace {

constexpr const char kVersion[] = "lookalike 0.1.0";

// A usage error: printed with a hint to --help, exit code 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

bool ParseBool(const std::string& name, const std::string& v) {
  if (v == "on" || v == "true" || v == "1" || v == "yes") return true;
  if (v == "off" || v == "false" || v == "0" || v == "no") return false;
  throw UsageError("--" + name + " must be on or off, got '" + v + "'");
}

// A default shown in --help: the shortest decimal that reads back as the
// value (0.04f prints as 0.04, not 0.0399999991).
std::string Shortest(double v) {
  char buf[32];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (static_cast<float>(std::strtod(buf, nullptr)) == static_cast<float>(v)) break;
  }
  return buf;
}

std::string FormatSeconds(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const int64_t t = static_cast<int64_t>(s + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(t / 3600),
                  static_cast<long long>(t / 60 % 60), static_cast<long long>(t % 60));
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(t / 60),
                  static_cast<long long>(t % 60));
  return buf;
}

std::string FormatBytes(uint64_t b) {
  char buf[32];
  if (b >= (1ull << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", b / double(1ull << 30));
  else if (b >= (1ull << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", b / double(1ull << 20));
  else if (b >= 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  else std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  return buf;
}

// `"key":"…"` for a path, plus `"key_bytes":"<hex>"` when the path is not
// valid UTF-8, so that every byte of any file name round-trips through JSON.
// JsonString writes a byte that is not valid UTF-8 (always >= 0x80) as
// \u0080..\u00ff, and control characters as \u0000..\u001f / \u007f, which
// round-trip already; so the path is lossy exactly when such a high escape
// appears.
std::string JsonPathField(const std::string& key, const std::string& path) {
  const std::string json = JsonString(path);
  std::string out = "\"" + key + "\":" + json;
  bool lossy = false;
  for (size_t p = json.find("\\u00"); p != std::string::npos && !lossy;
       p = json.find("\\u00", p + 1)) {
    // Skip an escaped backslash followed by "u00" (the text \u00 in a name).
    size_t slashes = 0;
    for (size_t q = p; q > 0 && json[q - 1] == '\\'; --q) ++slashes;
    if (slashes % 2 == 0 && p + 5 < json.size() && std::strchr("89abcdef", json[p + 4]))
      lossy = true;
  }
  if (!lossy) return out;
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : path) {
    hex += kHex[c >> 4];
    hex += kHex[c & 15];
  }
  return out + ",\"" + key + "_bytes\":\"" + hex + "\"";
}

std::string ErrorJson(const FileError& e) {
  return std::string("{\"code\":\"") + FileErrorCodeName(e.code) + "\"," +
         JsonPathField("path", e.path) + ",\"message\":" + JsonString(e.message) + "}";
}

// Progress and per-file errors of `index`. On a terminal: one self-updating
// line with a bar, images/s and ETA. Otherwise: no control characters, only
// phase lines when verbose.
class CliObserver final : public IndexObserver {
 public:
  CliObserver(std::ostream& err, bool tty, bool verbose, bool quiet, std::ostream* errors_jsonl,
              std::ostream* committed)
      : err_(err), tty_(tty && !quiet), verbose_(verbose), errors_jsonl_(errors_jsonl),
        committed_(committed) {}

  void OnPhase(const std::string& phase) override {
    phase_ = phase;
    if (verbose_) {
      ClearLine();
      err_ << "lookalike: " << phase << "\n";
    } else if (tty_) {
      ClearLine();
      err_ << "\r" << phase.substr(0, 78) << std::flush;
      drawn_ = true;
    }
  }
  void OnStart(int64_t) override {
    start_ = Clock::now();
    last_draw_ = Clock::time_point{};
  }
  void OnProgress(int64_t done, int64_t total) override {
    if (!tty_) return;
    const auto now = Clock::now();
    if (done != total && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double rate = elapsed > 0 ? done / elapsed : 0;
    const double eta = rate > 0 ? (total - done) / rate : NAN;
    constexpr int kWidth = 30;
    const int filled = total > 0 ? static_cast<int>(kWidth * done / total) : kWidth;
    std::ostringstream line;
    line << "\r" << Label() << " [" << std::string(filled, '#') << std::string(kWidth - filled, '.') << "] "
         << done << "/" << total << "  " << std::fixed << std::setprecision(1) << rate
         << " img/s  ETA " << FormatSeconds(eta) << "   ";
    err_ << line.str() << std::flush;
    drawn_ = true;
  }
  void OnFileError(const FileError& e) override {
    ClearLine();
    err_ << "lookalike: " << (e.code == FileErrorCode::kNoFeatures ? "warning" : "skipped")
         << ": " << EscapeField(e.path) << ": " << FileErrorCodeName(e.code) << ": "
         << e.message << "\n";
    if (errors_jsonl_) *errors_jsonl_ << ErrorJson(e) << "\n";
  }
  void OnCommitted(const ImageRecord& record) override {
    // Flushed per image: a line here means the image survives a crash.
    if (committed_) *committed_ << EscapeField(record.path) << std::endl;
  }
  void Finish() { ClearLine(); }

 private:
  using Clock = std::chrono::steady_clock;
  // First word of the phase ("sampling", "encoding") labels the bar.
  std::string Label() const { return phase_.substr(0, phase_.find(' ')); }
  void ClearLine() {
    if (drawn_) err_ << "\r" << std::string(79, ' ') << "\r";
    drawn_ = false;
  }
  std::ostream& err_;
  bool tty_, verbose_;
  std::ostream* errors_jsonl_;
  std::ostream* committed_;
  bool drawn_ = false;
  std::string phase_;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_draw_{};
};

void PrintGlobalHelp(std::ostream& out) {
  out << "usage: lookalike <command> [options]\n\n"
         "Find similar images: index a folder once, then search it with query images.\n\n"
         "commands:\n"
         "  index DIR --db DB     index (or update the index of) a folder of images\n"
         "  search --db DB QUERY  rank indexed images by similarity to query images\n"
         "  info --db DB          describe a database\n"
         "  verify --db DB        check a database for corruption (exit 2 if corrupt)\n"
         "  dedup --db DB         list groups of near-duplicate images\n\n"
         "Run 'lookalike <command> --help' for the options of a command.\n"
         "Exit codes: 0 success, 1 finished but some inputs were skipped, 2 usage or fatal error.\n";
}

po::variables_map Parse(const std::vector<std::string>& args, const po::options_description& opts,
                        const po::positional_options_description& pos) {
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(opts).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(e.what());
  }
  return vm;
}

// --------------------------------------------------------------------- index

int RunIndex(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
             bool tty, const std::atomic<bool>* cancel) {
  const IndexOptions d;  // defaults shown in --help come from the structs
  IndexOptions o;
  std::string backend = "auto", descriptor = d.encoding.extractor.type, errors_path, format,
              committed_path;
  std::string intra = d.encoding.vlad.intra_normalize ? "on" : "off";
  std::string residual = d.encoding.vlad.residual_normalize ? "on" : "off";
  std::string whiten = d.projection.whiten ? "on" : "off";
  std::string pca_half = d.projection.half_precision ? "on" : "off";
  double max_file_mb = static_cast<double>(d.limits.max_file_bytes) / (1 << 20);
  po::options_description model("model (used when the database is created; stored in it)");
  model.add_options()
      ("clusters", po::value(&o.codebook.num_clusters)->default_value(d.codebook.num_clusters),
       "K, number of visual words of the codebook")
      ("max-side", po::value(&o.encoding.max_side)->default_value(d.encoding.max_side),
       "downscale images so the longest side is at most PX pixels (0 = never)")
      ("descriptor", po::value(&descriptor)->default_value(descriptor), "rootsift | sift")
      ("contrast-threshold",
       po::value(&o.encoding.extractor.contrast_threshold)
           ->default_value(d.encoding.extractor.contrast_threshold,
                                          Shortest(d.encoding.extractor.contrast_threshold)),
       "SIFT detector contrast threshold (lower = more keypoints)")
      ("max-features", po::value(&o.encoding.extractor.max_features)
                           ->default_value(d.encoding.extractor.max_features),
       "keep at most N strongest keypoints per image (0 = all)")
      ("min-keypoints", po::value(&o.encoding.extractor.min_keypoints)
                            ->default_value(d.encoding.extractor.min_keypoints),
       "re-detect an image with fewer keypoints at lower contrast thresholds (0 = off)")
      ("power", po::value(&o.encoding.vlad.power_alpha)->default_value(d.encoding.vlad.power_alpha, Shortest(d.encoding.vlad.power_alpha)),
       "VLAD power-normalisation exponent in (0, 1] (0.5 = signed square root, 1 = off)")
      ("intra-norm", po::value(&intra)->default_value(intra), "VLAD intra-normalisation on|off")
      ("residual-norm", po::value(&residual)->default_value(residual),
       "L2-normalise each residual before summing, on|off")
      ("train-images", po::value(&o.train_images)->default_value(d.train_images),
       "images sampled (seeded) to learn the codebook")
      ("pca-dim", po::value(&o.projection.out_dim)->default_value(d.projection.out_dim),
       "PCA of VLAD vectors learned from the training images: components kept for "
       "search (0 = off; capped at training images - 1)")
      ("pca-min-images",
       po::value(&o.projection.min_images)->default_value(d.projection.min_images),
       "learn the PCA only if at least N training images have features (0 = always); "
       "smaller collections search full VLAD vectors")
      ("whiten", po::value(&whiten)->default_value(whiten), "PCA-whitening on|off")
      ("pca-regularization",
       po::value(&o.projection.eigen_regularization)
           ->default_value(d.projection.eigen_regularization,
                           Shortest(d.projection.eigen_regularization)),
       "whitening divides by sqrt(eigenvalue + R x mean eigenvalue)")
      ("pca-power",
       po::value(&o.projection.power_alpha)
           ->default_value(d.projection.power_alpha, Shortest(d.projection.power_alpha)),
       "signed power of the PCA components before L2, in (0, 1] (1 = off)")
      ("pca-half", po::value(&pca_half)->default_value(pca_half),
       "store the PCA matrix as float16 on|off")
      ("iterations", po::value(&o.codebook.num_iterations)->default_value(d.codebook.num_iterations),
       "k-means iterations")
      ("seed", po::value(&o.codebook.seed)->default_value(d.codebook.seed),
       "seed of the training sample and k-means");
  std::string index_kind = VectorIndexKindName(d.search_index.kind);
  po::options_description run("run");
  run.add_options()
      ("help,h", "show this help")
      ("db", po::value(&o.db_path), "database folder (created if missing)")
      ("threads", po::value(&o.threads)->default_value(d.threads),
       "decode/extract threads (0 = all cores)")
      ("batch", po::value(&o.batch_images)->default_value(d.batch_images), "images per encoder batch")
      ("backend", po::value(&backend)->default_value(backend), "VLAD encoder: auto | cpu | cuda")
      ("max-file-mb", po::value(&max_file_mb)->default_value(max_file_mb, Shortest(max_file_mb)),
       "skip files larger than this (FILE_TOO_LARGE)")
      ("max-pixels", po::value(&o.limits.max_pixels)->default_value(d.limits.max_pixels),
       "skip images whose header claims more pixels (TOO_MANY_PIXELS)")
      ("allow-truncated", po::bool_switch(&o.limits.allow_truncated),
       "decode truncated or corrupt JPEG/PNG files instead of skipping them")
      ("max-seconds-per-file", po::value(&o.limits.max_seconds)->default_value(d.limits.max_seconds, Shortest(d.limits.max_seconds)),
       "skip a file whose reading, decoding and extraction take longer (TIMEOUT)")
      ("errors", po::value(&errors_path), "also write per-file errors as JSON lines to FILE")
      ("committed", po::value(&committed_path),
       "append each image's path to FILE once it is committed (crash-safe from then on)")
      ("format", po::value(&format)->default_value("table"), "summary format: table | json")
      ("index-kind", po::value(&index_kind)->default_value(index_kind),
       "search index kept with the database: auto (exact below --index-threshold images, "
       "ivfsq from there on) | flat (exact inner product) | ivfsq (inverted file with "
       "8-bit residual codes: approximate, ~d + 10 bytes per image)")
      ("index-threshold",
       po::value(&o.search_index.auto_threshold)->default_value(d.search_index.auto_threshold),
       "images from which --index-kind auto switches to ivfsq")
      ("nprobe", po::value(&o.search_index.nprobe)->default_value(d.search_index.nprobe),
       "ivfsq lists visited per query (0 = enough for about 8,000 vectors, at least 16)")
      ("verbose,v", "print phases, backend and stage timings")
      ("quiet,q", "no progress bar");
  po::options_description hidden;
  hidden.add_options()("dir", po::value(&o.image_dir));
  po::options_description all;
  all.add(run).add(model).add(hidden);
  po::positional_options_description pos;
  pos.add("dir", 1);
  const po::variables_map vm = Parse(args, all, pos);
  if (vm.count("help")) {
    out << "usage: lookalike index DIR --db DB [options]\n\n"
           "Indexes every image under DIR (recursively; JPEG, PNG, WebP, TIFF, BMP, PNM,\n"
           "recognised by content). Re-running updates the index: unchanged files are\n"
           "skipped without decoding, changed and new files are encoded with the stored\n"
           "codebook, records of deleted files are removed.\n\n"
        << run << "\n" << model;
    return kExitOk;
  }
  if (o.image_dir.empty()) throw UsageError("missing DIR: the folder of images to index");
  if (o.db_path.empty()) throw UsageError("missing --db DB: the database folder");
  if (format != "table" && format != "json")
    throw UsageError("--format must be table or json, got '" + format + "'");
  try {
    o.encoding.extractor.type = descriptor;
    o.encoding.vlad.intra_normalize = ParseBool("intra-norm", intra);
    o.encoding.vlad.residual_normalize = ParseBool("residual-norm", residual);
    o.projection.whiten = ParseBool("whiten", whiten);
    o.projection.half_precision = ParseBool("pca-half", pca_half);
    o.search_index.kind = ParseVectorIndexKind(index_kind);
    o.backend = ParseBackend(backend);
    if (!(max_file_mb > 0)) throw std::invalid_argument("--max-file-mb must be > 0");
    o.limits.max_file_bytes = static_cast<uint64_t>(max_file_mb * (1 << 20));
    o.Validate();
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  const bool verbose = vm.count("verbose") > 0;
  if (Store::IsDatabase(o.db_path)) {
    // The model is fixed at creation; explicit model flags cannot change it.
    for (const char* flag : {"clusters", "max-side", "descriptor", "contrast-threshold",
                             "max-features", "power", "intra-norm", "residual-norm",
                             "pca-dim", "pca-min-images", "whiten", "pca-regularization", "pca-power", "pca-half"})
      if (vm.count(flag) && !vm[flag].defaulted())
        err << "lookalike: note: --" << flag
            << " ignored: " << o.db_path
            << " keeps the model it was created with (see 'lookalike info'); index into a "
               "new --db to change it\n";
  }
  if (verbose) {
    const BackendReport report = ProbeBackends();
    err << "lookalike: backend: requested " << backend << ", using "
        << BackendName(ResolveBackend(o.backend)) << " (" << report.detail << ")\n";
  }
  std::ofstream errors_file;
  if (!errors_path.empty()) {
    errors_file.open(errors_path, std::ios::out | std::ios::trunc);
    if (!errors_file) throw UsageError("cannot write --errors file " + errors_path);
  }
  std::ofstream committed_file;
  if (!committed_path.empty()) {
    committed_file.open(committed_path, std::ios::out | std::ios::app);
    if (!committed_file) throw UsageError("cannot write --committed file " + committed_path);
  }
  CliObserver observer(err, tty, verbose, vm.count("quiet") > 0,
                       errors_file.is_open() ? &errors_file : nullptr,
                       committed_file.is_open() ? &committed_file : nullptr);
  IndexSummary s;
  try {
    s = BuildIndex(o, &observer, cancel);
  } catch (...) {
    observer.Finish();
    throw;
  }
  observer.Finish();
  const double rate = s.seconds > 0 ? s.indexed / s.seconds : 0;
  if (format == "json") {
    out << "{\"created\":" << (s.created ? "true" : "false") << ",\"listed\":" << s.listed
        << ",\"indexed\":" << s.indexed << ",\"unchanged\":" << s.unchanged
        << ",\"touched\":" << s.touched << ",\"removed\":" << s.removed
        << ",\"no_features\":" << s.no_features << ",\"ignored\":" << s.ignored
        << ",\"skipped\":{";
    bool first = true;
    for (const auto& kv : s.skipped) {
      out << (first ? "" : ",") << JsonString(kv.first) << ":" << kv.second;
      first = false;
    }
    out << "},\"cancelled\":" << (s.cancelled ? "true" : "false") << ",\"seconds\":" << s.seconds
        << ",\"images_per_second\":" << rate << ",\"threads\":" << s.threads
        << ",\"backend\":" << JsonString(s.backend) << ",\"stage_seconds\":{\"read_decode\":"
        << s.stages.read_decode << ",\"read\":" << s.stages.read
        << ",\"decode\":" << s.stages.decode << ",\"resize\":" << s.stages.resize
        << ",\"extract\":" << s.stages.extract
        << ",\"train\":" << s.stages.train << ",\"pca\":" << s.stages.pca
        << ",\"encode\":" << s.stages.encode << ",\"assign\":" << s.stages.assign
        << ",\"aggregate\":" << s.stages.aggregate
        << ",\"store\":" << s.stages.store << "}}\n";
  } else {
    out << (s.cancelled ? "interrupted: committed work is kept; re-run to finish\n" : "")
        << (s.created ? "created " : "updated ") << o.db_path << "\n"
        << "  indexed    " << s.indexed << (s.no_features ? " (" + std::to_string(s.no_features) +
                                                                " without features)" : "")
        << "\n  unchanged  " << s.unchanged + s.touched << "\n  removed    " << s.removed
        << "\n  skipped    " << s.total_skipped();
    if (s.total_skipped()) {
      out << " (";
      bool first = true;
      for (const auto& kv : s.skipped) {
        out << (first ? "" : ", ") << kv.first << " " << kv.second;
        first = false;
      }
      out << ")";
    }
    if (s.ignored) out << "\n  ignored    " << s.ignored << " non-image files";
    out << "\n  time       " << std::fixed << std::setprecision(1) << s.seconds << " s, "
        << std::setprecision(1) << rate << " images/s (" << s.threads << " threads, "
        << s.backend << " encoder)\n";
    if (verbose) {
      out << std::setprecision(2) << "  stages     read " << s.stages.read << " s, decode "
          << s.stages.decode << " s, resize " << s.stages.resize << " s, extract "
          << s.stages.extract << " s (thread-seconds); train " << s.stages.train
          << " s, pca " << s.stages.pca << " s, assign " << s.stages.assign
          << " s, aggregate " << s.stages.aggregate << " s, store "
          << s.stages.store << " s\n";
    }
  }
  return (s.total_skipped() > 0 || s.no_features > 0 || s.cancelled) ? kExitPartial : kExitOk;
}

// -------------------------------------------------------------------- search

int RunSearch(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const SearchOptions d;
  SearchOptions o;
  std::string db, format = "table", backend = "auto";
  std::vector<std::string> queries;
  po::options_description opts("options");
  opts.add_options()
      ("help,h", "show this help")
      ("db", po::value(&db), "database folder built by 'lookalike index'")
      (",k", po::value(&o.k)->default_value(d.k), "results per query")
      ("format", po::value(&format)->default_value(format),
       "table | tsv (query<TAB>rank<TAB>path<TAB>score, one line per hit) | json (one object "
       "per query per line)")
      ("backend", po::value(&backend)->default_value(backend), "VLAD encoder: auto | cpu | cuda")
      ("rerank", po::value(&o.rerank)->default_value(d.rerank),
       "spatially verify the top N results against the query (0 = off)")
      ("min-inliers", po::value(&o.min_inliers)->default_value(d.min_inliers),
       "RANSAC inliers a result needs to count as verified")
      ("expansion", po::value(&o.expansion)->default_value(d.expansion),
       "query expansion from up to N verified results (0 = off)")
      ("colour-weight", po::value(&o.colour_weight)->default_value(d.colour_weight, "14"),
       "weight of the colour similarity added to the VLAD similarity, in units of the "
       "robust spread (1.4826 x median absolute deviation) of the VLAD similarities over the candidates (0 = off)")
      ("colour-depth", po::value(&o.colour_depth)->default_value(d.colour_depth),
       "VLAD results whose colour is compared with the query's")
      ("nprobe", po::value(&o.index.nprobe)->default_value(d.index.nprobe),
       "lists an approximate (ivfsq) index visits per query (0 = as stored with the index; "
       "more is slower and more exact)")
      ("verbose,v", "print the backend and the number of indexed images");
  po::options_description hidden;
  hidden.add_options()("query", po::value(&queries)->composing());
  po::options_description all;
  all.add(opts).add(hidden);
  po::positional_options_description pos;
  pos.add("query", -1);
  const po::variables_map vm = Parse(args, all, pos);
  if (vm.count("help")) {
    out << "usage: lookalike search --db DB QUERY... [options]\n\n"
           "Ranks the indexed images by similarity to each QUERY (an image file or a\n"
           "folder of images). Queries are encoded with the database's own settings.\n\n"
        << opts;
    return kExitOk;
  }
  if (db.empty()) throw UsageError("missing --db DB: the database to search");
  if (queries.empty()) throw UsageError("missing QUERY: one or more image files or folders");
  if (format != "table" && format != "tsv" && format != "json")
    throw UsageError("--format must be table, tsv or json, got '" + format + "'");
  try {
    o.backend = ParseBackend(backend);
    o.Validate();
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  std::vector<FileError> errors;
  const std::vector<std::string> paths = ExpandQueryPaths(queries, &errors);
  auto searcher = Searcher::Open(db, o);
  if (vm.count("verbose"))
    err << "lookalike: backend " << BackendName(searcher->backend()) << " ("
        << ProbeBackends().detail << "); " << searcher->num_indexed() << " images searchable\n";
  const std::vector<QueryResult> results = searcher->SearchFiles(paths);
  int failed = static_cast<int>(errors.size());
  for (const FileError& e : errors)
    err << "lookalike: query skipped: " << EscapeField(e.path) << ": "
        << FileErrorCodeName(e.code) << ": " << e.message << "\n";
  for (const QueryResult& r : results) {
    if (r.error && r.error->code != FileErrorCode::kNoFeatures) {
      ++failed;
      err << "lookalike: query skipped: " << EscapeField(r.query) << ": "
          << FileErrorCodeName(r.error->code) << ": " << r.error->message << "\n";
      if (format == "json")
        out << "{" << JsonPathField("query", r.query) << ",\"error\":" << ErrorJson(*r.error)
            << ",\"results\":[]}\n";
      continue;
    }
    if (r.error)
      err << "lookalike: warning: " << EscapeField(r.query)
          << ": no keypoints found, so nothing can match it\n";
    if (format == "tsv") {
      for (size_t i = 0; i < r.hits.size(); ++i) {
        char score[32];
        std::snprintf(score, sizeof score, "%.6f", r.hits[i].score);
        out << EscapeField(r.query) << '\t' << i + 1 << '\t' << EscapeField(r.hits[i].path)
            << '\t' << score << '\n';
      }
    } else if (format == "json") {
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%.4f", r.seconds);
      out << "{" << JsonPathField("query", r.query) << ",\"seconds\":" << seconds
          << ",\"results\":[";
      for (size_t i = 0; i < r.hits.size(); ++i) {
        char score[64];
        std::snprintf(score, sizeof score, "%.6f,\"similarity\":%.6f", r.hits[i].score,
                      r.hits[i].similarity);
        out << (i ? "," : "") << "{\"rank\":" << i + 1 << "," << JsonPathField("path", r.hits[i].path)
            << ",\"score\":" << score;
        if (r.hits[i].inliers >= 0) out << ",\"inliers\":" << r.hits[i].inliers;
        if (r.hits[i].colour >= 0) {
          char colour[32];
          std::snprintf(colour, sizeof colour, "%.4f", r.hits[i].colour);
          out << ",\"colour\":" << colour;
        }
        out << "}";
      }
      out << "]}\n";
    } else {
      out << "query " << EscapeField(r.query) << "\n";
      if (r.hits.empty()) out << "  (no results)\n";
      out << "  rank  score   inliers  path\n";
      for (size_t i = 0; i < r.hits.size(); ++i) {
        char line[64], inl[16] = "      -";
        if (r.hits[i].inliers >= 0) std::snprintf(inl, sizeof inl, "%7d", r.hits[i].inliers);
        std::snprintf(line, sizeof line, "  %4zu  %.4f %s  ", i + 1, r.hits[i].score, inl);
        out << line << EscapeField(r.hits[i].path) << "\n";
      }
    }
  }
  out.flush();
  return failed > 0 ? kExitPartial : kExitOk;
}

// Options of the read-only subcommands that take just --db and --format
// table|json (info, verify). Returns false when --help was printed.
bool ParseDbAndFormat(const std::vector<std::string>& args, const char* usage,
                      const char* what_db_is_for, std::ostream& out, std::string* db,
                      std::string* format) {
  *format = "table";
  po::options_description opts("options");
  opts.add_options()
      ("help,h", "show this help")
      ("db", po::value(db), "database folder")
      ("format", po::value(format)->default_value(*format), "table | json");
  const po::variables_map vm = Parse(args, opts, po::positional_options_description());
  if (vm.count("help")) {
    out << usage << opts;
    return false;
  }
  if (db->empty()) throw UsageError(std::string("missing --db DB: the database to ") + what_db_is_for);
  if (*format != "table" && *format != "json")
    throw UsageError("--format must be table or json, got '" + *format + "'");
  return true;
}

// --------------------------------------------------------------------- dedup

int RunDedup(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const DedupOptions d;
  DedupOptions o;
  std::string db, format = "tsv";
  po::options_description opts("options");
  opts.add_options()
      ("help,h", "show this help")
      ("db", po::value(&db), "database folder built by 'lookalike index'")
      ("threshold", po::value(&o.threshold)->default_value(d.threshold, Shortest(d.threshold)),
       "pair score (share of the poorer image's keypoints that are homography inliers) a "
       "verified pair needs to count as a duplicate, (0, 1]")
      ("min-similarity",
       po::value(&o.min_similarity)->default_value(d.min_similarity, Shortest(d.min_similarity)),
       "VLAD cosine similarity a pair needs to be verified at all (lower finds harder copies, "
       "costs more)")
      ("max-candidates", po::value(&o.max_candidates)->default_value(d.max_candidates),
       "verify at most the N most similar candidates of each image")
      ("min-inliers", po::value(&o.min_inliers)->default_value(d.min_inliers),
       "RANSAC inliers a duplicate pair needs")
      ("min-spread", po::value(&o.min_spread)->default_value(d.min_spread, Shortest(d.min_spread)),
       "share of one image's area the inliers' convex hull must cover (a shared logo or "
       "caption covers little)")
      ("format", po::value(&format)->default_value(format),
       "tsv (group<TAB>path<TAB>score, one line per member) | json (one object per group per "
       "line) | pairs (one line per candidate pair, tab-separated: path a, path b, similarity, "
       "matches, inliers, score, spread, duplicate 0/1)")
      ("verbose,v", "print counts and timings on stderr");
  const po::variables_map vm = Parse(args, opts, po::positional_options_description());
  if (vm.count("help")) {
    out << "usage: lookalike dedup --db DB [--threshold T] [--format tsv|json|pairs]\n\n"
           "Finds groups of near-duplicate images in a database: the same picture re-encoded,\n"
           "resized, cropped, rotated, recoloured or with an overlay (not other photos of the\n"
           "same scene). Every image is compared with its most similar images (VLAD), each\n"
           "candidate pair is verified with a RANSAC homography over the stored keypoints,\n"
           "and verified pairs are joined into groups. Byte-identical files always group.\n"
           "Only groups of two or more images are printed; groups are ordered by their\n"
           "smallest path, members by pixels, then file size (largest first: the first\n"
           "member is the one to keep), then path. A member's score is the best score of a\n"
           "duplicate pair joining it to its group (1 = byte-identical).\n\n"
        << opts;
    return kExitOk;
  }
  if (db.empty()) throw UsageError("missing --db DB: the database to deduplicate");
  if (format != "tsv" && format != "json" && format != "pairs")
    throw UsageError("--format must be tsv, json or pairs, got '" + format + "'");
  try {
    o.Validate();
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  auto store = Store::Open(db, Store::Mode::kReadOnly);
  const DedupResult r = FindDuplicates(*store, o);
  auto score_text = [](float s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4f", s);
    return std::string(buf);
  };
  if (format == "pairs") {
    for (const DedupPair& p : r.candidates)
      out << EscapeField(p.path_a) << '\t' << EscapeField(p.path_b) << '\t'
          << score_text(p.similarity) << '\t' << p.matches << '\t' << p.inliers << '\t'
          << score_text(p.score) << '\t' << score_text(p.spread) << '\t'
          << (p.duplicate ? 1 : 0) << '\n';
  }
  for (size_t g = 0; g < r.groups.size() && format != "pairs"; ++g) {
    const DedupGroup& group = r.groups[g];
    if (format == "tsv") {
      for (const DedupMember& m : group.members)
        out << g + 1 << '\t' << EscapeField(m.path) << '\t' << score_text(m.score) << '\n';
      continue;
    }
    out << "{\"group\":" << g + 1 << ",\"members\":[";
    for (size_t i = 0; i < group.members.size(); ++i) {
      const DedupMember& m = group.members[i];
      out << (i ? "," : "") << "{" << JsonPathField("path", m.path) << ",\"width\":" << m.width
          << ",\"height\":" << m.height << ",\"bytes\":" << m.size_bytes
          << ",\"score\":" << score_text(m.score) << "}";
    }
    out << "],\"pairs\":[";
    for (size_t i = 0; i < group.pairs.size(); ++i) {
      const DedupPair& p = group.pairs[i];
      out << (i ? "," : "") << "{" << JsonPathField("a", p.path_a) << ","
          << JsonPathField("b", p.path_b) << ",\"similarity\":" << score_text(p.similarity)
          << ",\"inliers\":" << p.inliers << ",\"score\":" << score_text(p.score)
          << ",\"spread\":" << score_text(p.spread)
          << ",\"identical\":" << (p.identical ? "true" : "false") << "}";
    }
    out << "]}\n";
  }
  out.flush();
  if (r.num_unverified > 0)
    err << "lookalike: warning: " << r.num_unverified
        << " candidate pairs could not be verified (images indexed without stored keypoints); "
           "index the folder into a new --db to check them\n";
  if (vm.count("verbose")) {
    size_t grouped = 0;
    for (const DedupGroup& group : r.groups) grouped += group.members.size();
    err << "lookalike: " << r.num_images << " images (" << r.num_without_features
        << " without features), " << r.candidates.size() << " candidate pairs, "
        << r.groups.size() << " groups holding " << grouped << " images; search "
        << score_text(static_cast<float>(r.search_seconds)) << " s, verification "
        << score_text(static_cast<float>(r.verify_seconds)) << " s\n";
  }
  return kExitOk;
}

// ---------------------------------------------------------------------- info

int RunInfo(const std::vector<std::string>& args, std::ostream& out, std::ostream& /*err*/) {
  std::string db, format;
  if (!ParseDbAndFormat(args,
                        "usage: lookalike info --db DB [--format table|json]\n\n"
                        "Describes a database: images, model settings, schema version, size on disk,\n"
                        "and which VLAD backend this machine would use.\n\n",
                        "describe", out, &db, &format))
    return kExitOk;
  auto store = Store::Open(db, Store::Mode::kReadOnly);
  const ModelRecord& m = store->model();
  const std::optional<ProjectionRecord> pca = store->GetProjection();
  int64_t no_features = 0, descriptors = 0;
  store->ForEachImage([&](const ImageRecord& r) {
    no_features += r.status == ImageStatus::kNoFeatures;
    descriptors += r.num_descriptors;
  });
  const uint64_t size = store->SizeOnDisk();
  const BackendReport backend = ProbeBackends();
  const char* auto_backend = backend.cuda_usable ? "cuda" : "cpu";
  char hash[32];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(m.codebook_hash));
  if (format == "json") {
    out << "{\"path\":" << JsonString(AbsolutePath(db))
        << ",\"schema_version\":" << store->schema_version() << ",\"image_hash\":\""
        << HashKindName(store->hash_kind()) << "\""
        << ",\"images\":" << store->num_images() << ",\"images_without_features\":" << no_features
        << ",\"descriptors\":" << descriptors << ",\"size_bytes\":" << size
        << ",\"model\":{\"descriptor\":" << JsonString(m.descriptor_type) << ",\"dim\":" << m.dim
        << ",\"clusters\":" << m.num_clusters << ",\"vlad_dim\":" << m.vlad_dim()
        << ",\"max_side\":" << m.max_side << ",\"contrast_threshold\":" << m.contrast_threshold
        << ",\"max_features\":" << m.max_features
        << ",\"min_keypoints\":" << m.min_keypoints << ",\"power\":" << m.power_alpha
        << ",\"intra_norm\":" << (m.intra_normalize ? "true" : "false")
        << ",\"residual_norm\":" << (m.residual_normalize ? "true" : "false")
        << ",\"seed\":" << m.seed << ",\"codebook_hash\":\"" << hash << "\"}"
        << ",\"pca\":";
    if (pca)
      out << "{\"out_dim\":" << pca->out_dim << ",\"whiten\":" << (pca->whiten ? "true" : "false")
          << ",\"regularization\":" << pca->eigen_regularization
          << ",\"power\":" << pca->power_alpha << ",\"samples\":" << pca->num_samples
          << ",\"half_precision\":" << (pca->half_precision ? "true" : "false") << "}";
    else
      out << "null";
    out
        << ",\"backend\":{\"auto\":\"" << auto_backend << "\",\"cuda_compiled\":"
        << (backend.cuda_compiled ? "true" : "false") << ",\"detail\":" << JsonString(backend.detail)
        << "}}\n";
  } else {
    out << "database      " << EscapeField(AbsolutePath(db)) << "\n"
        << "schema        " << store->schema_version() << " ("
        << HashKindName(store->hash_kind())
        << " checksums of vectors and features, and file content hashes)\n"
        << "images        " << store->num_images()
        << (no_features ? " (" + std::to_string(no_features) + " without features)" : "") << "\n"
        << "descriptors   " << descriptors << "\n"
        << "size on disk  " << FormatBytes(size) << "\n"
        << "model         " << m.descriptor_type << " d=" << m.dim << ", K=" << m.num_clusters
        << " (VLAD " << m.vlad_dim() << "-d), max side " << m.max_side << " px\n"
        << "              SIFT contrast threshold " << m.contrast_threshold << ", max features "
        << m.max_features << ", min keypoints " << m.min_keypoints << "\n"
        << "              power " << m.power_alpha << ", intra-norm "
        << (m.intra_normalize ? "on" : "off") << ", residual-norm "
        << (m.residual_normalize ? "on" : "off") << ", seed " << m.seed << "\n"
        << "codebook      " << hash << "\n"
        << "PCA           "
        << (pca ? std::to_string(pca->out_dim) + "-d" + (pca->whiten ? ", whitened" : "") +
                      ", learned from " + std::to_string(pca->num_samples) + " images" +
                      (pca->half_precision ? ", float16" : ", float32")
                : std::string("none (search uses the full VLAD vectors)"))
        << "\n"
        << "backend       auto -> " << auto_backend << " (" << backend.detail << ")\n";
  }
  return kExitOk;
}

// -------------------------------------------------------------------- verify

int RunVerify(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string db, format;
  if (!ParseDbAndFormat(args,
                        "usage: lookalike verify --db DB [--format table|json]\n\n"
                        "Checks a database without changing it: RocksDB block checksums, the model's\n"
                        "codebook checksum, and that every image has its record, vector (right size,\n"
                        "checksum, finite, unit norm or zero) and path entry, with no orphans and\n"
                        "matching counts. Exit 0 when consistent, 2 on corruption.\n\n",
                        "verify", out, &db, &format))
    return kExitOk;
  auto store = Store::Open(db, Store::Mode::kReadOnly);
  const std::vector<std::string> problems = store->Verify();
  if (format == "json") {
    out << "{\"ok\":" << (problems.empty() ? "true" : "false")
        << ",\"images\":" << store->num_images() << ",\"problems\":[";
    for (size_t i = 0; i < problems.size(); ++i) out << (i ? "," : "") << JsonString(problems[i]);
    out << "]}\n";
  } else if (problems.empty()) {
    out << "ok: " << store->num_images() << " images, database consistent\n";
  } else {
    for (const std::string& p : problems) err << "lookalike verify: corrupt: " << EscapeField(p) << "\n";
    err << "lookalike verify: " << db << " is corrupt (" << problems.size()
        << (problems.size() >= 100 ? "+" : "")
        << " problems); re-index the folder into a new --db\n";
  }
  return problems.empty() ? kExitOk : kExitFatal;
}

}  // namespace

std::string EscapeField(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    // Length of a valid UTF-8 sequence starting here, 0 if invalid.
    size_t len = 0;
    if (c < 0x80) len = 1;
    else if ((c >> 5) == 0x6) len = 2;
    else if ((c >> 4) == 0xE) len = 3;
    else if ((c >> 3) == 0x1E) len = 4;
    if (len > 1) {
      if (i + len > s.size()) len = 0;
      uint32_t cp = c & (0x7F >> len);
      for (size_t j = 1; len && j < len; ++j) {
        const unsigned char cc = static_cast<unsigned char>(s[i + j]);
        if ((cc >> 6) != 0x2) len = 0;
        cp = (cp << 6) | (cc & 0x3F);
      }
      // Overlong forms, UTF-16 surrogates and code points above U+10FFFF are
      // not UTF-8 either (RFC 3629); passing them would make the JSON invalid.
      static const uint32_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};
      if (len && (cp < kMinForLength[len] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF))
        len = 0;
    }
    if (len == 1) {
      char buf[8];
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        case '\r': out += "\\r"; break;
        default:
          if (c < 0x20 || c == 0x7f) {
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
          } else {
            out += static_cast<char>(c);
          }
      }
      ++i;
    } else if (len > 1) {
      out.append(s, i, len);
      i += len;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);  // invalid byte -> U+00XX
      out += buf;
      ++i;
    }
  }
  return out + "\"";
}

int RunCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
           bool stderr_is_tty, const std::atomic<bool>* cancel) {
  if (args.empty()) {
    PrintGlobalHelp(err);
    return kExitFatal;
  }
  const std::string& command = args[0];
  if (command == "--help" || command == "-h" || command == "help") {
    PrintGlobalHelp(out);
    return kExitOk;
  }
  if (command == "--version") {
    out << kVersion << "\n";
    return kExitOk;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  try {
    if (command == "index") return RunIndex(rest, out, err, stderr_is_tty, cancel);
    if (command == "search") return RunSearch(rest, out, err);
    if (command == "info") return RunInfo(rest, out, err);
    if (command == "verify") return RunVerify(rest, out, err);
    if (command == "dedup") return RunDedup(rest, out, err);
    err << "lookalike: unknown command '" << command << "'\n";
    PrintGlobalHelp(err);
    return kExitFatal;
  } catch (const UsageError& e) {
    err << "lookalike " << command << ": " << e.what() << "\n"
        << "Run 'lookalike " << command << " --help' for usage.\n";
    return kExitFatal;
  } catch (const std::exception& e) {
    err << "lookalike " << command << ": error: " << e.what() << "\n";
    return kExitFatal;
  }
}

}  // namespace lookalike
