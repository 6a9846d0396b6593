// make_test_images DIR COUNT [FIRST_SEED] [WIDTH HEIGHT]: writes the seeded
// synthetic photos of test_images.h (img_000.png, ...) for script tests.
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "tests/test_images.h"

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4 && argc != 6) {
    std::fprintf(stderr, "usage: make_test_images DIR COUNT [FIRST_SEED] [WIDTH HEIGHT]\n");
    return 2;
  }
  try {
    const int count = std::atoi(argv[2]);
    const uint64_t seed = argc >= 4 ? std::strtoull(argv[3], nullptr, 10) : 1;
    const int width = argc == 6 ? std::atoi(argv[4]) : 640;
    const int height = argc == 6 ? std::atoi(argv[5]) : 480;
    lookalike::testing::WriteSyntheticSet(argv[1], count, seed, width, height);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_test_images: %s\n", e.what());
    return 2;
  }
  return 0;
}
