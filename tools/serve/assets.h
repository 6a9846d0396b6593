// The web app's files (web/), compiled into the binary by embed_assets.cmake:
// `serve` reads nothing from the disk to show its page.
#pragma once

#include <cstddef>
#include <string>

namespace lookalike {

struct Asset {
  const char* name;          // "index.html", "app.js", ...
  const char* content_type;  // its MIME type
  const unsigned char* data;
  size_t size;
};

// The asset called `name` (no folders), or null.
const Asset* FindAsset(const std::string& name);

}  // namespace lookalike
