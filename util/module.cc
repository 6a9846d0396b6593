#include "util/module.h"

#include <dlfcn.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace lookalike {
namespace {

std::string ExecutableFolder() {
  std::string path(4096, '\0');
  const ssize_t n = readlink("/proc/self/exe", path.data(), path.size());
  if (n <= 0 || static_cast<size_t>(n) >= path.size()) return "";
  path.resize(static_cast<size_t>(n));
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

std::vector<std::string> Candidates(const std::string& file_name) {
  std::vector<std::string> places;
  const std::string folder = ExecutableFolder();
  if (!folder.empty()) {
    places.push_back(folder + "/" + file_name);
    places.push_back(folder + "/../lib/lookalike/" + file_name);
  }
#ifdef LOOKALIKE_BUILD_MODULE_DIR
  places.push_back(std::string(LOOKALIKE_BUILD_MODULE_DIR) + "/" + file_name);
#endif
  return places;
}

}  // namespace

std::string ModuleSearchPath(const std::string& file_name) {
  std::string joined;
  for (const std::string& place : Candidates(file_name)) {
    if (!joined.empty()) joined += ", ";
    joined += place;
  }
  return joined;
}

std::string FindModule(const std::string& file_name) {
  for (const std::string& place : Candidates(file_name))
    if (access(place.c_str(), F_OK) == 0) return place;
  return "";
}

LoadedModule LoadModule(const std::string& file_name, const char* entry, int abi_version) {
  LoadedModule module;
  const std::string place = FindModule(file_name);
  if (!place.empty()) {
    module.path = place;
    void* handle = dlopen(place.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = dlerror();
      module.error = place + " could not be loaded: " + (why ? why : "unknown dlopen error");
      return module;
    }
    using Entry = const void* (*)(int);
    const auto function = reinterpret_cast<Entry>(dlsym(handle, entry));
    if (!function) {
      module.error = place + " has no entry point " + entry + " (not a lookalike module)";
      return module;
    }
    module.api = function(abi_version);
    if (!module.api)
      module.error = place + " was built by another version of lookalike (interface " +
                     std::to_string(abi_version) + " wanted); rebuild or reinstall it";
    return module;
  }
  module.path = ModuleSearchPath(file_name);
  module.error = file_name + " not found (looked in " + module.path + ")";
  return module;
}

}  // namespace lookalike
