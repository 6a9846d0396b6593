// Optional parts of lookalike built as shared modules (the CUDA encoder, the
// image codecs) and loaded with dlopen on first use, so that a command which
// does not need them never maps their libraries: OpenCV's codecs pull in
// about 110 shared libraries (GDAL, GDCM, OpenEXR, ...) and the CUDA encoder
// the CUDA runtime and cuBLAS, which every start-up would otherwise load and
// relocate.
//
// A module exports one C function, `extern "C" const void* ENTRY(int abi)`,
// returning its table of functions, or nullptr when it was built for another
// interface version than `abi` (a module left from another build).
#pragma once

#include <string>

namespace lookalike {

// What LoadModule found.
struct LoadedModule {
  const void* api = nullptr;  // the entry point's table; nullptr when unusable
  std::string path;           // the file loaded, or the places looked in
  std::string error;          // why it is unusable ("" when api is set)
};

// The places a module is looked for, in order: the running executable's
// folder (/proc/self/exe), <that folder>/../lib/lookalike (the installed
// layout), and the build tree's tools/ folder (for tests and benchmarks run
// from the build tree).
std::string ModuleSearchPath(const std::string& file_name);

// The first of those places where `file_name` exists, without loading it;
// "" when there is none.
std::string FindModule(const std::string& file_name);

// Looks for `file_name` in those places, dlopens the first one that exists
// (RTLD_NOW | RTLD_LOCAL; never closed: the libraries it loads stay for the
// process's lifetime) and calls its entry point `entry` with `abi_version`.
// Never throws; the error names the file and the reason (missing, dlopen's
// message, no entry point, another interface version). Not cached: callers
// keep the result.
LoadedModule LoadModule(const std::string& file_name, const char* entry, int abi_version);

}  // namespace lookalike
