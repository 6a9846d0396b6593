// make_photos DIR COUNT [--seed S] [--min-side PX] [--max-side PX] [--threads N]
//
// Writes COUNT seeded, photo-sized synthetic JPEGs (tests/test_images.h:
// textured background, shapes, lines, text) into DIR/NNNN/img_NNNNNNN.jpg,
// 1000 per folder, for benchmarks that need many images (bench/index_memory.sh).
// Image i depends only on (seed, i): its longest side is drawn from
// [min-side, max-side], its aspect from 4:3, 3:2, 16:9 and 1:1, landscape or
// portrait, and its JPEG quality from 75..95, so file and decode sizes vary
// as in a folder of real photos. Existing files are kept (re-runs resume).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/test_images.h"

namespace {

int Usage() {
  std::cerr << "usage: make_photos DIR COUNT [--seed S] [--min-side PX] [--max-side PX] "
               "[--threads N]\n"
               "Writes COUNT seeded synthetic JPEG photos (longest side min..max, default "
               "640..1600) into DIR/NNNN/, 1000 per folder.\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return Usage();
  const std::string dir = argv[1];
  const long count = std::strtol(argv[2], nullptr, 10);
  uint64_t seed = 1;
  int min_side = 640, max_side = 1600;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const long value = std::strtol(argv[i + 1], nullptr, 10);
    if (flag == "--seed")
      seed = static_cast<uint64_t>(value);
    else if (flag == "--min-side")
      min_side = static_cast<int>(value);
    else if (flag == "--max-side")
      max_side = static_cast<int>(value);
    else if (flag == "--threads")
      threads = static_cast<int>(value);
    else
      return Usage();
  }
  if ((argc - 3) % 2 != 0 || count < 1 || min_side < 64 || max_side < min_side || threads < 1)
    return Usage();

  std::atomic<long> next{0};
  std::atomic<bool> failed{false};
  auto worker = [&] {
    cv::setNumThreads(1);
    for (long i; (i = next.fetch_add(1)) < count && !failed;) {
      char folder[24], name[32];
      std::snprintf(folder, sizeof folder, "%04ld", i / 1000);
      std::snprintf(name, sizeof name, "img_%07ld.jpg", i);
      const std::filesystem::path sub = std::filesystem::path(dir) / folder;
      const std::filesystem::path path = sub / name;
      if (std::filesystem::exists(path)) continue;
      std::mt19937_64 rng(seed * 1000003ull + static_cast<uint64_t>(i));
      const int longest = std::uniform_int_distribution<int>(min_side, max_side)(rng);
      static const double kAspects[] = {4.0 / 3.0, 3.0 / 2.0, 16.0 / 9.0, 1.0};
      const double aspect = kAspects[std::uniform_int_distribution<int>(0, 3)(rng)];
      const int shortest = std::max(1, static_cast<int>(longest / aspect + 0.5));
      const bool portrait = std::uniform_int_distribution<int>(0, 3)(rng) == 0;
      const int quality = std::uniform_int_distribution<int>(75, 95)(rng);
      const cv::Mat image = lookalike::testing::MakeSyntheticImage(
          seed * 0x100000000ull + static_cast<uint64_t>(i), portrait ? shortest : longest,
          portrait ? longest : shortest);
      std::error_code ec;
      std::filesystem::create_directories(sub, ec);
      // Written under a name no image walker takes for a photo, then renamed.
      const std::string tmp = path.string() + ".part";
      std::vector<uchar> bytes;
      cv::imencode(".jpg", image, bytes, {cv::IMWRITE_JPEG_QUALITY, quality});
      std::ofstream out(tmp, std::ios::binary);
      out.write(reinterpret_cast<const char*>(bytes.data()),
                static_cast<std::streamsize>(bytes.size()));
      out.close();
      if (!out) {
        std::cerr << "make_photos: cannot write " << tmp << "\n";
        failed = true;
        break;
      }
      std::filesystem::rename(tmp, path, ec);
      if (ec) {
        std::cerr << "make_photos: cannot rename " << tmp << ": " << ec.message() << "\n";
        failed = true;
        break;
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  return failed ? 1 : 0;
}
