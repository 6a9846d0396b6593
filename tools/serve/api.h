// The JSON API of `serve` and the page's static files, as routes on an
// HttpServer. Images are addressed by id only: no route takes a path.
//
//   GET  /api/info                          what `info --format json` says, plus searchable images
//   GET  /api/images?offset=&limit=         a page of indexed images, in id order
//   GET  /api/images/{id}                   one image's record
//   GET  /api/images/{id}/thumbnail?size=   JPEG, longest side `size` px (default 256)
//   GET  /api/images/{id}/similar?k=        search by an indexed image (as `search FILE`),
//                                           the image itself left out
//   GET  /api/images/{id}/matches/{other}   verified inlier correspondences of two images
//   POST /api/search                        multipart: file `image`, optional `k`
//   POST /api/matches/{other}               multipart: file `image`; correspondences with it
//   GET  /api/dedup                         `dedup`'s groups, the keeper first, with
//                                           the reviewer's "not duplicates" marks
//   POST /api/dedup/not-duplicates          JSON {"ids", "not_duplicates"}: remember a mark
//   POST /api/dedup/export                  JSON {"ids", "format": "list"|"script"}: what
//                                           to remove, as text
//
// POST bodies of JSON must say so (Content-Type: application/json), which a
// page on another site cannot send without the browser asking first.
//
// Errors: a 4xx or 5xx status with {"error": {"status", "message"}}.
#pragma once

#include "tools/serve/catalog.h"
#include "tools/serve/http_server.h"

namespace lookalike {

// Largest `k` a search request may ask for, and the default.
inline constexpr int kMaxApiK = 100;
inline constexpr int kDefaultApiK = 12;

// Registers every route. `catalog` must outlive the server.
void RegisterRoutes(HttpServer* server, Catalog* catalog);

}  // namespace lookalike
