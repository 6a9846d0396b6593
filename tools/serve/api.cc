#include "tools/serve/api.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

#include "search/ranking.h"
#include "tools/removal_script.h"
#include "tools/serve/assets.h"

namespace lookalike {
namespace {

// A request the API refuses: its status and what to do.
struct ApiError : std::runtime_error {
  ApiError(int status, const std::string& message) : std::runtime_error(message), status(status) {}
  int status;
};

using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

// Turns exceptions into JSON errors: ApiError as given, a corrupt or
// unreadable database as 500 (the server stays up).
Handler Guard(Handler fn) {
  return [fn = std::move(fn)](const httplib::Request& req, httplib::Response& res) {
    try {
      fn(req, res);
    } catch (const ApiError& e) {
      SetJsonError(&res, e.status, e.what());
    } catch (const std::exception& e) {
      SetJsonError(&res, 500, std::string("the database could not be read: ") + e.what());
    }
  };
}

void SendJson(httplib::Response* res, const Json& j) {
  res->set_content(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n",
                   "application/json");
}

// A decimal integer in [lo, hi]; anything else (signs, spaces, overflow,
// other characters) is a 400 naming the parameter.
int64_t ParseInteger(const std::string& name, const std::string& text, int64_t lo, int64_t hi) {
  const std::string range = std::to_string(lo) + ".." + std::to_string(hi);
  bool digits = !text.empty() && text.size() <= 18;
  for (char c : text) digits = digits && c >= '0' && c <= '9';
  if (!digits)
    throw ApiError(400, "'" + name + "' must be an integer in " + range + ", got '" +
                            Utf8ForJson(text.substr(0, 40)) + "'");
  const int64_t v = std::stoll(text);
  if (v < lo || v > hi)
    throw ApiError(400, "'" + name + "' must be in " + range + ", got " + std::to_string(v));
  return v;
}

int64_t Param(const httplib::Request& req, const std::string& name, int64_t fallback, int64_t lo,
              int64_t hi) {
  if (req.has_param(name.c_str()))
    return ParseInteger(name, req.get_param_value(name.c_str()), lo, hi);
  if (req.has_file(name)) return ParseInteger(name, req.get_file_value(name).content, lo, hi);
  return fallback;
}

// The match level a request's `min_level` names (a query or form field);
// none (every hit) without one; 400 for an unknown name.
MatchLevel MinLevel(const httplib::Request& req) {
  std::string name;
  if (req.has_param("min_level"))
    name = req.get_param_value("min_level");
  else if (req.has_file("min_level"))
    name = req.get_file_value("min_level").content;
  else
    return MatchLevel::kNone;
  try {
    return ParseMatchLevel(name);
  } catch (const std::invalid_argument& e) {
    throw ApiError(400, std::string("min_level: ") + e.what());
  }
}

// The record of the image a route's id names; 404 if there is none.
ImageRecord Image(const Snapshot& s, const std::string& id_text) {
  uint64_t id = 0;
  if (id_text.size() > 19 || id_text.empty())
    throw ApiError(404, "no image with id " + id_text.substr(0, 24));
  id = std::stoull(id_text);
  std::optional<ImageRecord> record = s.Find(id);
  if (!record) throw ApiError(404, "no image with id " + id_text);
  return std::move(*record);
}

Json ImageJson(const ImageRecord& r) {
  Json j;
  j["id"] = r.id;
  PutPath(&j, "path", r.path);
  j["width"] = r.width;
  j["height"] = r.height;
  j["bytes"] = r.size_bytes;
  j["descriptors"] = r.num_descriptors;
  j["features"] = r.status == ImageStatus::kOk;
  return j;
}

// The uploaded file of field `image`; 400 without one.
httplib::MultipartFormData Upload(const httplib::Request& req) {
  if (!req.is_multipart_form_data() || !req.has_file("image"))
    throw ApiError(400, "send the image as multipart/form-data in a file field named 'image'");
  return req.get_file_value("image");
}

// 4xx for a query the decoder refused, as `index` would have skipped it.
[[noreturn]] void RefuseQuery(const FileError& e) {
  const int status =
      e.code == FileErrorCode::kFileTooLarge || e.code == FileErrorCode::kTooManyPixels ? 413 : 422;
  throw ApiError(status, std::string(FileErrorCodeName(e.code)) + ": " + e.message);
}

// Encodes the query bytes and ranks: the same steps as Searcher::SearchFiles
// (encode, then SearchEncoded), so results equal `lookalike search`. With
// `exclude` (an indexed query), that image is left out of its own results
// (the rest keep their order, ranked from 1) and "self_rank" says where it
// was (0: not among the hits). Hits below `min_level` are dropped (after the
// first k were ranked).
Json Search(const Snapshot& s, const std::string& name, const std::string& bytes, int k,
            MatchLevel min_level, std::optional<uint64_t> exclude = std::nullopt) {
  const auto start = std::chrono::steady_clock::now();
  QueryResult r;
  r.query = name;
  ImageEncoder::Result enc = s.Encode(name, bytes);
  if (enc.error && enc.error->code != FileErrorCode::kNoFeatures) RefuseQuery(*enc.error);
  if (!enc.error) r.hits = s.searcher().SearchEncoded(enc);
  size_t self_rank = 0;
  if (exclude) {
    for (size_t i = 0; i < r.hits.size() && !self_rank; ++i)
      if (r.hits[i].id == *exclude) self_rank = i + 1;
    if (self_rank) r.hits.erase(r.hits.begin() + (self_rank - 1));
  }
  if (static_cast<int>(r.hits.size()) > k) r.hits.resize(k);
  r.hits.erase(std::remove_if(r.hits.begin(), r.hits.end(),
                              [min_level](const Hit& h) { return h.level < min_level; }),
               r.hits.end());
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  Json j = QueryResultJson(r, /*with_ids=*/true);
  if (exclude) j["self_rank"] = self_rank;
  if (enc.error) j["warning"] = "no keypoints found, so nothing can match it";
  return j;
}

// The bytes of an indexed file, as long as they are still the indexed ones.
std::string IndexedBytes(const Snapshot& s, const ImageRecord& r, const ImageFileLimits& limits) {
  ReadResult read = ReadImageBytes(r.path, limits);
  if (read.error)
    throw ApiError(410, "image " + std::to_string(r.id) + " cannot be read any more (" +
                            read.error->message + "); run 'lookalike index' again");
  if (s.store().ContentHash(read.bytes.data(), read.bytes.size()) != r.content_hash)
    throw ApiError(409, "image " + std::to_string(r.id) +
                            " changed since it was indexed; run 'lookalike index' again");
  return std::move(read.bytes);
}

// Verified correspondences of `query` with stored image `other`: each
// inlier as [xa, ya, xb, yb], fractions of each frame's width and height.
Json Matches(const Snapshot& s, const LocalFeatures& query, const ImageRecord& other,
             const SearchOptions& options) {
  std::optional<LocalFeatures> b = s.features().Read(other.id);
  Json j;
  j["b"] = ImageJson(other);
  j["lines"] = Json::array();
  if (!b) {
    j["matches"] = 0;
    j["inliers"] = 0;
    j["verified"] = false;
    return j;
  }
  const Verification v = VerifyPair(query, *b, options.rerank.verify);
  j["matches"] = v.matches;
  j["inliers"] = v.inliers;
  // As search decides it (StronglyVerified): the inliers, and enough of them
  // turning and scaling alike.
  j["verified"] = StronglyVerified(v, query, *b, options.rerank);
  const float wa = std::max(1u, query.width), ha = std::max(1u, query.height);
  const float wb = std::max(1u, b->width), hb = std::max(1u, b->height);
  for (const auto& [qa, qb] : v.inlier_pairs) {
    const Keypoint& ka = query.keypoints[qa];
    const Keypoint& kb = b->keypoints[qb];
    j["lines"].push_back({Rounded(ka.x / wa, 5), Rounded(ka.y / ha, 5), Rounded(kb.x / wb, 5),
                          Rounded(kb.y / hb, 5)});
  }
  return j;
}

// The JSON body of a request that changes something or asks for an export.
// Content-Type must be application/json: a page on another site can send
// a form or text/plain to 127.0.0.1 without asking, but not JSON (the
// browser asks first, and this server never allows it). An Origin header,
// when sent, must be this server's.
Json JsonBody(const httplib::Request& req) {
  const std::string type = req.get_header_value("Content-Type");
  if (type.rfind("application/json", 0) != 0)
    throw ApiError(415, "send the request as JSON (Content-Type: application/json)");
  if (req.has_header("Origin") &&
      req.get_header_value("Origin") != "http://" + req.get_header_value("Host"))
    throw ApiError(403, "a page from another site may not change this server's data");
  Json body;
  try {
    body = Json::parse(req.body);
  } catch (const std::exception& e) {
    throw ApiError(400, std::string("the body is not JSON: ") + e.what());
  }
  if (!body.is_object()) throw ApiError(400, "the body must be a JSON object");
  return body;
}

// The records of body["ids"]: 1..kMaxIds distinct ids of images in the
// snapshot (400 for a malformed list, 404 for an unknown id).
constexpr size_t kMaxIds = 100000;
std::vector<ImageRecord> Ids(const Snapshot& s, const Json& body) {
  const Json ids = body.value("ids", Json());
  if (!ids.is_array() || ids.empty() || ids.size() > kMaxIds)
    throw ApiError(400, "'ids' must be a list of 1.." + std::to_string(kMaxIds) + " image ids");
  std::set<uint64_t> seen;
  std::vector<ImageRecord> records;
  for (const Json& id : ids) {
    if (!id.is_number_unsigned()) throw ApiError(400, "'ids' holds " + id.dump() + ", not an id");
    if (!seen.insert(id.get<uint64_t>()).second)
      throw ApiError(400, "'ids' names image " + id.dump() + " twice");
    records.push_back(Image(s, std::to_string(id.get<uint64_t>())));
  }
  return records;
}

std::vector<ReviewMember> ReviewMembers(const std::vector<ImageRecord>& records) {
  std::vector<ReviewMember> members;
  for (const ImageRecord& r : records) members.push_back({r.id, r.content_hash, r.path});
  return members;
}

// The members of a dedup group as the review store knows them (their
// content hashes read from the snapshot).
std::vector<ReviewMember> GroupMembers(const Snapshot& s, const DedupGroup& g) {
  std::vector<ReviewMember> members;
  for (const DedupMember& m : g.members)
    if (std::optional<ImageRecord> r = s.Find(m.id))
      members.push_back({r->id, r->content_hash, r->path});
  return members;
}

// The keeper of a group: its first member (dedup's order), and why dedup
// keeps it.
const DedupMember& Keeper(const DedupGroup& g) { return g.members.front(); }
std::string KeeperReason(const DedupGroup& g) { return g.keep_reason; }

// The match level of `member` with its group's keeper ("" for the keeper).
std::string LevelWithKeeper(const DedupGroup& g, uint64_t member) {
  for (const DedupMember& m : g.members)
    if (m.id == member && m.role != MemberRole::kKeep) return MatchLevelName(m.level);
  return "";
}

// The removal list or script of the images `records`, each with its
// group's keeper, in group order; 409 for an image in no group (the groups
// changed since the page loaded them) or in a reference folder.
std::string Export(const Snapshot& s, const std::vector<ImageRecord>& records,
                   const std::string& format, const std::string& db) {
  if (format != "list" && format != "script")
    throw ApiError(400, "'format' must be \"list\" or \"script\"");
  const DedupResult& d = s.Duplicates();
  std::map<uint64_t, std::pair<size_t, size_t>> where;  // id -> (group, member)
  for (size_t g = 0; g < d.groups.size(); ++g)
    for (size_t m = 0; m < d.groups[g].members.size(); ++m)
      where[d.groups[g].members[m].id] = {g, m};
  std::vector<std::pair<std::pair<size_t, size_t>, Removal>> chosen;
  for (const ImageRecord& r : records) {
    auto it = where.find(r.id);
    if (it == where.end())
      throw ApiError(409, "image " + std::to_string(r.id) +
                              " is in no duplicate group any more; reload the page");
    const DedupGroup& g = d.groups[it->second.first];
    if (g.members[it->second.second].role == MemberRole::kReference)
      throw ApiError(409, "image " + std::to_string(r.id) +
                              " is in a reference folder (--keep-in): always kept, never offered "
                              "for removal");
    Removal removal;
    removal.group = it->second.first + 1;
    removal.path = r.path;
    removal.keeper = Keeper(g).path;
    removal.level = LevelWithKeeper(g, r.id);
    removal.reason = KeeperReason(g);
    removal.note = g.members[it->second.second].reason;
    chosen.push_back({it->second, std::move(removal)});
  }
  std::sort(chosen.begin(), chosen.end(),
            [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<Removal> removals;
  for (auto& c : chosen) removals.push_back(std::move(c.second));
  std::ostringstream out;
  if (format == "list")
    WriteRemovalList(out, removals);
  else
    WriteRemovalScript(out, removals,
                       "the duplicate review of the database " +
                           std::filesystem::absolute(db).lexically_normal().string());
  return out.str();
}

void RegisterApi(HttpServer* server, Catalog* catalog) {
  server->Get("/api/info", Guard([catalog](const httplib::Request&, httplib::Response& res) {
                auto s = catalog->Current();
                Json j = InfoJson(s->Info());
                j["searchable"] = s->searcher().num_indexed();
                SendJson(&res, j);
              }));

  server->Get("/api/images", Guard([catalog](const httplib::Request& req, httplib::Response& res) {
                auto s = catalog->Current();
                const std::vector<ImageRecord>& images = s->Images();
                const int64_t offset = Param(req, "offset", 0, 0, int64_t{1} << 40);
                const int64_t limit = Param(req, "limit", 100, 1, 1000);
                Json j;
                j["total"] = images.size();
                j["offset"] = offset;
                j["limit"] = limit;
                j["images"] = Json::array();
                for (int64_t i = offset; i < offset + limit && i < int64_t(images.size()); ++i)
                  j["images"].push_back(ImageJson(images[i]));
                SendJson(&res, j);
              }));

  server->Get(R"(/api/images/(\d+))",
              Guard([catalog](const httplib::Request& req, httplib::Response& res) {
                auto s = catalog->Current();
                SendJson(&res, ImageJson(Image(*s, req.matches[1])));
              }));

  server->Get(R"(/api/images/(\d+)/thumbnail)",
              Guard([catalog](const httplib::Request& req, httplib::Response& res) {
                auto s = catalog->Current();
                const ImageRecord r = Image(*s, req.matches[1]);
                const int size =
                    static_cast<int>(Param(req, "size", 256, kMinThumbnailSide, kMaxThumbnailSide));
                Thumbnail t = catalog->ThumbnailOf(*s, r, size);
                if (t.jpeg.empty()) throw ApiError(410, t.error);
                res.set_header("Cache-Control", "private, max-age=300");
                res.set_content(std::move(t.jpeg), "image/jpeg");
              }));

  server->Get(R"(/api/images/(\d+)/similar)",
              Guard([catalog](const httplib::Request& req, httplib::Response& res) {
                auto s = catalog->Current();
                const ImageRecord r = Image(*s, req.matches[1]);
                const int k = static_cast<int>(Param(req, "k", kDefaultApiK, 1, kMaxApiK));
                const std::string bytes = IndexedBytes(*s, r, catalog->options().limits);
                Json j = Search(*s, r.path, bytes, k, MinLevel(req), r.id);
                j["query_id"] = r.id;
                SendJson(&res, j);
              }));

  server->Get(R"(/api/images/(\d+)/matches/(\d+))",
              Guard([catalog](const httplib::Request& req, httplib::Response& res) {
                auto s = catalog->Current();
                const ImageRecord a = Image(*s, req.matches[1]);
                const ImageRecord b = Image(*s, req.matches[2]);
                std::optional<LocalFeatures> fa = s->features().Read(a.id);
                Json j = Matches(*s, fa ? *fa : LocalFeatures{}, b, catalog->options().search);
                j["a"] = ImageJson(a);
                SendJson(&res, j);
              }));

  server->Post("/api/search", Guard([catalog](const httplib::Request& req, httplib::Response& res) {
                 const httplib::MultipartFormData file = Upload(req);
                 const int k = static_cast<int>(Param(req, "k", kDefaultApiK, 1, kMaxApiK));
                 auto s = catalog->Current();
                 SendJson(&res, Search(*s, file.filename.empty() ? "upload" : file.filename,
                                       file.content, k, MinLevel(req)));
               }));

  server->Post(R"(/api/matches/(\d+))",
               Guard([catalog](const httplib::Request& req, httplib::Response& res) {
                 const httplib::MultipartFormData file = Upload(req);
                 auto s = catalog->Current();
                 const ImageRecord b = Image(*s, req.matches[1]);
                 ImageEncoder::Result enc = s->Encode(file.filename, file.content);
                 if (enc.error && enc.error->code != FileErrorCode::kNoFeatures)
                   RefuseQuery(*enc.error);
                 Json j = Matches(*s, enc.features, b, catalog->options().search);
                 j["a"] = {{"query", Utf8ForJson(file.filename)}};
                 SendJson(&res, j);
               }));

  server->Get("/api/dedup", Guard([catalog](const httplib::Request&, httplib::Response& res) {
                auto s = catalog->Current();
                const DedupResult& r = s->Duplicates();
                Json j;
                j["images"] = r.num_images;
                j["images_without_features"] = r.num_without_features;
                j["level"] = MatchLevelName(r.level);
                j["mode"] = DedupModeName(r.level);
                j["keep_rule"] = KeepRuleName(r.keep);
                j["groups"] = Json::array();
                const ReviewStore& review = catalog->review();
                if (!review.error().empty()) j["review_error"] = review.error();
                for (size_t g = 0; g < r.groups.size(); ++g) {
                  Json group = DedupGroupJson(g + 1, r.groups[g], /*with_ids=*/true);
                  group["keep"] = Keeper(r.groups[g]).id;
                  group["keep_reason"] = KeeperReason(r.groups[g]);
                  group["not_duplicates"] = review.NotDuplicates(GroupMembers(*s, r.groups[g]));
                  j["groups"].push_back(std::move(group));
                }
                SendJson(&res, j);
              }));

  // Body {"ids": [...], "not_duplicates": true|false}: remembers (or
  // forgets) that these images are not duplicates of one another.
  server->Post("/api/dedup/not-duplicates",
               Guard([catalog](const httplib::Request& req, httplib::Response& res) {
                 const Json body = JsonBody(req);
                 const Json value = body.value("not_duplicates", Json());
                 if (!value.is_boolean())
                   throw ApiError(400, "'not_duplicates' must be true or false");
                 auto s = catalog->Current();
                 const std::vector<ImageRecord> records = Ids(*s, body);
                 if (records.size() < 2) throw ApiError(400, "'ids' must name 2 or more images");
                 try {
                   catalog->review().SetNotDuplicates(ReviewMembers(records), value.get<bool>());
                 } catch (const std::runtime_error& e) {
                   throw ApiError(503, std::string("the decision was not saved: ") + e.what());
                 }
                 Json j;
                 j["ids"] = body["ids"];
                 j["not_duplicates"] = value;
                 SendJson(&res, j);
               }));

  // Body {"ids": [...], "format": "list"|"script"}: the chosen group
  // members as a removal list or a reviewable shell script (text).
  server->Post("/api/dedup/export",
               Guard([catalog](const httplib::Request& req, httplib::Response& res) {
                 const Json body = JsonBody(req);
                 auto s = catalog->Current();
                 const std::string format = body.value("format", Json()).is_string()
                                                ? body["format"].get<std::string>()
                                                : std::string();
                 res.set_content(Export(*s, Ids(*s, body), format, catalog->options().db),
                                 "text/plain; charset=utf-8");
               }));
}

}  // namespace

void RegisterRoutes(HttpServer* server, Catalog* catalog) {
  RegisterApi(server, catalog);
  // The page: fixed names served from memory, nothing from the disk.
  server->Get(R"(/([a-z]+\.[a-z]+)?)", [](const httplib::Request& req, httplib::Response& res) {
    std::string name = req.matches[1].length() ? std::string(req.matches[1]) : "index.html";
    if (name == "favicon.ico") name = "favicon.svg";  // where browsers look unless told
    const Asset* asset = FindAsset(name);
    if (!asset) {
      SetJsonError(&res, 404, "no such page: the web app is at /");
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_header("Content-Security-Policy",
                   "default-src 'self'; img-src 'self' blob: data:; style-src 'self'; "
                   "script-src 'self'; connect-src 'self'");
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_content(reinterpret_cast<const char*>(asset->data), asset->size, asset->content_type);
  });
  // Any other route: a JSON 404, also for other methods.
  auto not_found = [](const httplib::Request&, httplib::Response& res) {
    SetJsonError(&res, 404, "no such page or API route; the API is described in the README");
  };
  server->Get(".*", not_found);
  server->Post(".*", not_found);
}

}  // namespace lookalike
