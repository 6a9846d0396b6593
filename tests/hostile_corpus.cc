#include "tests/hostile_corpus.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <random>
#include <stdexcept>

#include "tests/test_images.h"

namespace lookalike {
namespace testing {
namespace fs = std::filesystem;

namespace {

std::string Encode(const std::string& ext, const cv::Mat& image,
                   const std::vector<int>& params = {}) {
  std::vector<uchar> buf;
  if (!cv::imencode(ext, image, buf, params))
    throw std::runtime_error("cannot encode a test image as " + ext);
  return std::string(buf.begin(), buf.end());
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
  ::chmod(path.c_str(), 0644);
}

std::string RandomBytes(std::mt19937_64& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xFF);
  return s;
}

uint32_t Be16(const std::string& s, size_t o) {
  return (uint32_t{static_cast<unsigned char>(s[o])} << 8) | static_cast<unsigned char>(s[o + 1]);
}

void PutBe32(std::string* s, size_t o, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*s)[o + i] = static_cast<char>(v >> (24 - 8 * i));
}

// A picture whose shapes survive downscaling, on a flat background, so a
// huge canvas compresses to almost nothing.
cv::Mat MakeLargeSparseImage(uint64_t seed, int side) {
  std::mt19937_64 rng(seed);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  cv::Mat image(side, side, CV_8UC1, cv::Scalar(128));
  for (int i = 0; i < 60; ++i) {
    const cv::Point c(uni(0, side - 1), uni(0, side - 1));
    const int r = uni(side / 60, side / 10);
    const cv::Scalar colour(uni(0, 255));
    if (i % 3 == 0)
      cv::circle(image, c, r, colour, -1);
    else if (i % 3 == 1)
      cv::rectangle(image, c, c + cv::Point(r, r * 2 / 3), colour, -1);
    else
      cv::line(image, c, cv::Point(uni(0, side - 1), uni(0, side - 1)), colour, side / 200);
  }
  cv::putText(image, "lookalike", cv::Point(side / 10, side / 2), cv::FONT_HERSHEY_SIMPLEX,
              side / 400.0, cv::Scalar(20), side / 150);
  return image;
}

class CorpusWriter {
 public:
  CorpusWriter(std::string root, uint64_t seed) : root_(std::move(root)), rng_(seed) {}

  std::mt19937_64& rng() { return rng_; }
  uint64_t NextSeed() { return ++image_seed_ + 1000 * (rng_() % 1000); }

  std::string Path(const std::string& rel) const { return root_ + "/" + rel; }

  void File(const std::string& rel, const std::string& bytes, std::vector<std::string> expected,
            std::string why) {
    const std::string path = Path(rel);
    fs::create_directories(fs::path(path).parent_path());
    WriteBytes(path, bytes);
    Add(path, std::move(expected), std::move(why));
  }
  void Add(const std::string& path, std::vector<std::string> expected, std::string why) {
    entries_.push_back(HostileEntry{path, std::move(expected), std::move(why)});
  }
  // A distinct good image in the given container.
  void Good(const std::string& rel, const std::string& ext, int side, const std::string& why) {
    const cv::Mat image = MakeSyntheticImage(NextSeed(), side, side * 3 / 4);
    File(rel, Encode(ext, image), {kIndexed}, why);
  }
  std::vector<HostileEntry> Take() { return std::move(entries_); }

 private:
  std::string root_;
  std::mt19937_64 rng_;
  uint64_t image_seed_ = 0;
  std::vector<HostileEntry> entries_;
};

void MakeDirsReadable(const std::string& root) {
  ::chmod(root.c_str(), 0755);
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it)
    if (fs::is_directory(it->symlink_status())) ::chmod(it->path().c_str(), 0755);
}

}  // namespace

uint32_t Crc32(const unsigned char* data, size_t size) {
  uint32_t table[256];
  for (uint32_t n = 0; n < 256; ++n) {
    uint32_t c = n;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    table[n] = c;
  }
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) crc = table[(crc ^ data[i]) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

bool PatchJpegSof(std::string* jpeg, uint16_t width, uint16_t height) {
  const std::string& s = *jpeg;
  size_t pos = 2;
  while (pos + 9 <= s.size() && static_cast<unsigned char>(s[pos]) == 0xFF) {
    const unsigned char m = static_cast<unsigned char>(s[pos + 1]);
    if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
      (*jpeg)[pos + 5] = static_cast<char>(height >> 8);
      (*jpeg)[pos + 6] = static_cast<char>(height & 0xFF);
      (*jpeg)[pos + 7] = static_cast<char>(width >> 8);
      (*jpeg)[pos + 8] = static_cast<char>(width & 0xFF);
      return true;
    }
    if (m == 0xDA) return false;
    pos += 2 + Be16(s, pos + 2);
  }
  return false;
}

size_t JpegScanStart(const std::string& s) {
  size_t pos = 2;
  while (pos + 4 <= s.size() && static_cast<unsigned char>(s[pos]) == 0xFF) {
    const unsigned char m = static_cast<unsigned char>(s[pos + 1]);
    const size_t len = Be16(s, pos + 2);
    if (m == 0xDA) return pos + 2 + len;
    pos += 2 + len;
  }
  return 0;
}

bool PatchPngIhdr(std::string* png, uint32_t width, uint32_t height) {
  if (png->size() < 33 || png->compare(12, 4, "IHDR") != 0) return false;
  PutBe32(png, 16, width);
  PutBe32(png, 20, height);
  // The CRC covers the chunk type and data: 4 + 13 bytes from offset 12.
  PutBe32(png, 29, Crc32(reinterpret_cast<const unsigned char*>(png->data()) + 12, 17));
  return true;
}

bool PatchTiffSize(std::string* tiff, uint32_t width, uint32_t height) {
  std::string& s = *tiff;
  if (s.size() < 8) return false;
  const bool le = s[0] == 'I';
  auto get = [&](size_t o, int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) {
      const uint32_t b = static_cast<unsigned char>(s[o + (le ? i : n - 1 - i)]);
      v |= b << (8 * i);
    }
    return v;
  };
  auto put = [&](size_t o, int n, uint32_t v) {
    for (int i = 0; i < n; ++i) s[o + (le ? i : n - 1 - i)] = static_cast<char>(v >> (8 * i));
  };
  const size_t ifd = get(4, 4);
  if (ifd + 2 > s.size()) return false;
  const uint32_t entries = get(ifd, 2);
  int patched = 0;
  for (uint32_t e = 0; e < entries && ifd + 2 + 12 * (e + 1) <= s.size(); ++e) {
    const size_t o = ifd + 2 + 12 * e;
    const uint32_t tag = get(o, 2), type = get(o + 2, 2);
    if (tag != 256 && tag != 257) continue;
    const uint32_t v = tag == 256 ? width : height;
    if (type == 3) {
      if (v > 0xFFFF) return false;
      put(o + 8, 2, v);
    } else if (type == 4) {
      put(o + 8, 4, v);
    } else {
      return false;
    }
    ++patched;
  }
  return patched == 2;
}

std::vector<HostileEntry> MakeHostileCorpus(const std::string& root,
                                            const HostileCorpusOptions& options) {
  CorpusWriter w(root, options.seed);
  auto& rng = w.rng();
  const int side = options.good_side;

  // ---- Good images in every container and pixel layout: INDEXED.
  w.Good("good_a.jpg", ".jpg", side, "baseline JPEG");
  w.Good("good_b.png", ".png", side, "8-bit BGR PNG");
  w.Good("good_c.webp", ".webp", side, "lossy WebP");
  w.Good("good_d.bmp", ".bmp", side, "BMP");
  w.Good("good_e.tif", ".tif", side, "single-page TIFF");
  w.Good("good_f.ppm", ".ppm", side, "binary PPM (P6)");
  w.Good("UPPER.JPG", ".jpg", side, "upper-case extension");
  w.Good("sub/deeper/nested.png", ".png", side, "two folders deep");
  {
    cv::Mat img = MakeSyntheticImage(w.NextSeed(), side, side * 3 / 4), out;
    img.convertTo(out, CV_16UC3, 257.0);
    w.File("png16.png", Encode(".png", out), {kIndexed}, "16-bit colour PNG (scaled to 8 bits)");
    cv::cvtColor(MakeSyntheticImage(w.NextSeed(), side, side * 3 / 4), img, cv::COLOR_BGR2GRAY);
    img.convertTo(out, CV_16UC1, 257.0);
    w.File("grey16.png", Encode(".png", out), {kIndexed}, "16-bit grey PNG");
    cv::cvtColor(MakeSyntheticImage(w.NextSeed(), side, side * 3 / 4), out, cv::COLOR_BGR2GRAY);
    w.File("grey.png", Encode(".png", out), {kIndexed}, "8-bit grey PNG");
    cv::cvtColor(MakeSyntheticImage(w.NextSeed(), side, side * 3 / 4), out, cv::COLOR_BGR2BGRA);
    for (int y = 0; y < out.rows; ++y)
      for (int x = 0; x < out.cols; ++x)
        out.at<cv::Vec4b>(y, x)[3] = static_cast<uchar>(x * 255 / out.cols);
    w.File("rgba.png", Encode(".png", out), {kIndexed}, "RGBA PNG with an alpha gradient");
    cv::cvtColor(MakeSyntheticImage(w.NextSeed(), side, side * 3 / 4), out, cv::COLOR_BGR2GRAY);
    w.File("grey.jpg", Encode(".jpg", out), {kIndexed}, "single-channel JPEG");
    w.File("progressive.jpg",
           Encode(".jpg", MakeSyntheticImage(w.NextSeed(), side, side * 3 / 4),
                  {cv::IMWRITE_JPEG_PROGRESSIVE, 1}),
           {kIndexed}, "progressive JPEG");
    std::vector<cv::Mat> pages;
    for (int p = 0; p < 3; ++p)
      pages.push_back(MakeSyntheticImage(w.NextSeed(), side, side * 3 / 4));
    const std::string multi = w.Path("multipage.tif");
    if (!cv::imwritemulti(multi, pages)) throw std::runtime_error("cannot write " + multi);
    ::chmod(multi.c_str(), 0644);
    w.Add(multi, {kIndexed}, "3-page TIFF: the first page is indexed");
  }
  if (options.include_large_png) {
    w.File(
        "large_sparse.png",
        Encode(".png", MakeLargeSparseImage(w.NextSeed(), 6000), {cv::IMWRITE_PNG_COMPRESSION, 9}),
        {kIndexed},
        "6000x6000 (36 Mpx) PNG of flat shapes, < 1 MiB compressed: decoded "
        "within the "
        "pixel limit, memory bounded");
  }

  // ---- Wrong or missing extensions, found by content: INDEXED.
  w.File("png_named.jpg", Encode(".png", MakeSyntheticImage(w.NextSeed(), side, side * 3 / 4)),
         {kIndexed}, "a PNG named .jpg (format by magic bytes)");
  w.File("jpeg_named.png", Encode(".jpg", MakeSyntheticImage(w.NextSeed(), side, side * 3 / 4)),
         {kIndexed}, "a JPEG named .png");
  w.File("noext", Encode(".png", MakeSyntheticImage(w.NextSeed(), side, side * 3 / 4)), {kIndexed},
         "a PNG without extension, found by content");
  w.File("noext_jpeg", Encode(".jpg", MakeSyntheticImage(w.NextSeed(), side, side * 3 / 4)),
         {kIndexed}, "a JPEG without extension, found by content");

  // ---- Odd file names: INDEXED, and they round-trip (escaped in TSV/stderr).
  const char* const odd_names[] = {"with space.png",
                                   "new\nline.png",
                                   "tab\there.png",
                                   "\xff\xfe.png",
                                   "-x.png",
                                   "back\\slash.png",
                                   "quote\"d.png",
                                   "ctrl\x01.png",
                                   "\xc3\xbcnic\xc3\xb8"
                                   "de.png",
                                   "semi;colon $(x) `y`.png"};
  for (const char* name : odd_names)
    w.Good(name, ".png", side, "odd file name (spaces, control bytes, non-UTF-8, leading dash)");
  {
    std::string longname(255 - 4, 'L');
    w.Good(longname + ".png", ".png", side, "255-byte file name (NAME_MAX)");
  }
  // Directory symlink loop: a/b -> .. ; the image in a/ is indexed once.
  w.Good("a/in_a.png", ".png", side, "image beside a directory symlink loop (indexed once)");
  fs::create_directory_symlink("..", w.Path("a/b"));
  w.Add(w.Path("a/b"), {kIgnored}, "directory symlink (a loop): not followed, not reported");
  fs::create_directory_symlink("sub", w.Path("dirlink.png"));
  w.Add(w.Path("dirlink.png"), {kIgnored},
        "directory symlink with an image extension: not followed, not reported");

  // ---- Flat images: stored as zero vectors, NO_FEATURES (a warning).
  w.File("flat.png", Encode(".png", cv::Mat(240, 320, CV_8UC3, cv::Scalar(90, 120, 150))),
         {"NO_FEATURES"}, "uniform colour: no keypoints");
  w.File("tiny.png", Encode(".png", cv::Mat(1, 1, CV_8UC1, cv::Scalar(7))), {"NO_FEATURES"},
         "1x1 pixel image: no keypoints");

  // ---- Truncations: TRUNCATED (detected before or instead of decoding).
  const std::string jpeg =
      Encode(".jpg", MakeSyntheticImage(w.NextSeed(), 400, 300), {cv::IMWRITE_JPEG_QUALITY, 90});
  const size_t scan = JpegScanStart(jpeg);
  if (scan == 0 || scan + 1000 > jpeg.size()) throw std::runtime_error("unexpected JPEG layout");
  w.File("trunc_3bytes.jpg", jpeg.substr(0, 3), {"TRUNCATED"}, "only the JPEG signature FF D8 FF");
  w.File("trunc_app0.jpg", jpeg.substr(0, 12), {"TRUNCATED"}, "cut inside the APP0 header");
  {
    // Cut just after the SOF segment: dimensions known, no tables, no scan.
    size_t pos = 2, cut = 0;
    while (pos + 4 <= jpeg.size() && cut == 0) {
      const unsigned char m = static_cast<unsigned char>(jpeg[pos + 1]);
      const size_t len = Be16(jpeg, pos + 2);
      if (m == 0xC0 || m == 0xC2) cut = pos + 2 + len;
      pos += 2 + len;
    }
    w.File("trunc_after_sof.jpg", jpeg.substr(0, cut), {"TRUNCATED"},
           "cut after the SOF header, before the scan");
  }
  w.File("trunc_sos.jpg", jpeg.substr(0, scan - 3), {"TRUNCATED"}, "cut inside the SOS header");
  w.File("trunc_scan_early.jpg", jpeg.substr(0, scan + 100), {"TRUNCATED"},
         "cut 100 bytes into the entropy-coded scan");
  w.File("trunc_scan_mid.jpg", jpeg.substr(0, scan + (jpeg.size() - scan) / 2), {"TRUNCATED"},
         "cut half-way through the scan");
  w.File("trunc_scan_late.jpg", jpeg.substr(0, jpeg.size() - 40), {"TRUNCATED"},
         "cut 40 bytes before the end");
  w.File("trunc_no_eoi.jpg", jpeg.substr(0, jpeg.size() - 2), {"TRUNCATED"},
         "only the end-of-image marker missing");
  {
    const std::string prog = Encode(".jpg", MakeSyntheticImage(w.NextSeed(), 400, 300),
                                    {cv::IMWRITE_JPEG_PROGRESSIVE, 1});
    w.File("trunc_progressive.jpg", prog.substr(0, prog.size() * 6 / 10), {"TRUNCATED"},
           "progressive JPEG cut after some of its scans");
  }
  const std::string png = Encode(".png", MakeSyntheticImage(w.NextSeed(), 400, 300));
  w.File("trunc_ihdr.png", png.substr(0, 20), {"TRUNCATED"}, "PNG cut inside IHDR");
  w.File("trunc_idat.png", png.substr(0, png.size() / 2), {"TRUNCATED"},
         "PNG cut half-way through IDAT");
  w.File("trunc_iend.png", png.substr(0, png.size() - 6), {"TRUNCATED"},
         "PNG cut inside its IEND chunk");

  // ---- Corrupt data with intact framing: DECODE_FAILED (corrupt
  // JPEGs are detected and skipped by default, like truncated ones).
  {
    std::string bad = jpeg;
    const size_t at = scan + (jpeg.size() - scan) / 3;
    for (size_t i = at; i < at + 600; ++i) bad[i] = static_cast<char>(rng() % 0xFF);  // no 0xFF
    w.File("corrupt_scan.jpg", bad, {"DECODE_FAILED"},
           "600 random bytes in the middle of the scan, end-of-image marker "
           "intact: libjpeg "
           "only warns ('Corrupt JPEG data'), the image would be garbage");
  }
  {
    std::string bad = png;
    bad[png.size() / 2] = static_cast<char>(bad[png.size() / 2] ^ 0x55);
    w.File("corrupt_crc.png", bad, {"DECODE_FAILED"},
           "PNG with one flipped bit in IDAT (CRC mismatch)");
  }
  {
    std::string lying = jpeg;
    PatchJpegSof(&lying, 9000, 9000);
    w.File("lying_sof.jpg", lying, {"DECODE_FAILED", "TRUNCATED"},
           "SOF claims 9000x9000 (within the pixel limit) but the scan holds "
           "400x300: the data "
           "ends long before the image does");
  }
  {
    std::string zero = png;
    PatchPngIhdr(&zero, 0, 0);
    w.File("zero_dims.png", zero, {"DECODE_FAILED"}, "IHDR claims 0x0 pixels");
  }
  w.File("garbage_magic.jpg", std::string("\xff\xd8\xff", 3) + RandomBytes(rng, 4000),
         {"TRUNCATED", "DECODE_FAILED", "TOO_MANY_PIXELS"},
         "JPEG signature followed by random bytes");

  // ---- Decompression bombs: TOO_MANY_PIXELS from the header, before any
  // pixel is allocated (default limit 100 Mpx).
  {
    std::string bomb = jpeg;
    if (!PatchJpegSof(&bomb, 20000, 20000)) throw std::runtime_error("no SOF in test JPEG");
    w.File("bomb_sof.jpg", bomb, {"TOO_MANY_PIXELS"}, "small JPEG whose SOF claims 20000x20000");
    std::string bomb_png = png;
    PatchPngIhdr(&bomb_png, 100000, 100000);
    w.File("bomb_ihdr.png", bomb_png, {"TOO_MANY_PIXELS"},
           "small PNG whose IHDR claims 100000x100000 (valid CRC)");
    std::string bomb_tif = Encode(".tif", MakeSyntheticImage(w.NextSeed(), 64, 48));
    if (!PatchTiffSize(&bomb_tif, 60000, 60000)) throw std::runtime_error("cannot patch TIFF");
    w.File("bomb.tif", bomb_tif, {"TOO_MANY_PIXELS"}, "TIFF whose first IFD claims 60000x60000");
    std::string bomb_bmp = Encode(".bmp", MakeSyntheticImage(w.NextSeed(), 64, 48));
    for (int i = 0; i < 4; ++i) {
      bomb_bmp[18 + i] = static_cast<char>((30000u >> (8 * i)) & 0xFF);
      bomb_bmp[22 + i] = static_cast<char>((30000u >> (8 * i)) & 0xFF);
    }
    w.File("bomb.bmp", bomb_bmp, {"TOO_MANY_PIXELS"}, "BMP whose header claims 30000x30000");
    w.File("bomb.pgm", "P5\n50000 50000\n255\n" + RandomBytes(rng, 1000), {"TOO_MANY_PIXELS"},
           "PGM header claiming 50000x50000");
    std::string bomb_webp = Encode(".webp", MakeSyntheticImage(w.NextSeed(), 64, 48));
    if (bomb_webp.size() > 30 && bomb_webp.compare(12, 4, "VP8 ") == 0) {
      bomb_webp[26] = static_cast<char>(16000 & 0xFF);
      bomb_webp[27] = static_cast<char>((16000 >> 8) & 0x3F);
      bomb_webp[28] = static_cast<char>(16000 & 0xFF);
      bomb_webp[29] = static_cast<char>((16000 >> 8) & 0x3F);
      w.File("bomb.webp", bomb_webp, {"TOO_MANY_PIXELS"}, "lossy WebP frame claiming 16000x16000");
    }
  }

  // ---- Not images at all.
  {
    std::string random = RandomBytes(rng, 5000);
    random[0] = 0;  // never a valid signature
    w.File("random.jpg", random, {"UNSUPPORTED_FORMAT"}, "random bytes named .jpg");
    w.File("text.jpg", "this is a text file, not a JPEG\n", {"UNSUPPORTED_FORMAT"},
           "text named .jpg");
    w.File("empty.jpg", "", {"UNSUPPORTED_FORMAT"}, "empty file named .jpg");
    w.File("notes.txt", "a text file\n", {kIgnored}, "text file: not an image, ignored silently");
    w.File("README", "no extension, not an image\n", {kIgnored}, "text without extension: ignored");
    w.File("data.bin", random, {kIgnored}, "random bytes, no image extension: ignored");
    w.File("bad\nname.jpg", random, {"UNSUPPORTED_FORMAT"},
           "bad file whose name holds a newline: the error line must escape it");
    w.File("\xff bad.jpg", random, {"UNSUPPORTED_FORMAT"},
           "bad file with a non-UTF-8 name: its JSON error carries path_bytes");
  }

  // ---- Images of formats lookalike does not read: named, never ignored.
  {
    w.File("anim.gif", TinyGif(), {"UNSUPPORTED_FORMAT"}, "a GIF: reported, not ignored");
    w.File("gif_without_extension", TinyGif(), {"UNSUPPORTED_FORMAT"},
           "a GIF without extension: recognised by content");
    w.File("photo.heic", IsoMediaHeader("heic", {"mif1", "heic"}), {"UNSUPPORTED_FORMAT"},
           "a HEIC header");
    w.File("picture.avif", IsoMediaHeader("avif", {"mif1", "miaf"}), {"UNSUPPORTED_FORMAT"},
           "an AVIF header");
    w.File("film.mp4", IsoMediaHeader("isom", {"isom", "mp41"}), {kIgnored},
           "an MP4 video's header (an ISO box, but no image brand): ignored");
  }

  // ---- Size limit (the test passes --max-file-mb 1): FILE_TOO_LARGE, not
  // read.
  {
    std::string big = jpeg;
    big.resize(options.oversize_bytes, '\0');
    w.File("big.jpg", big, {"FILE_TOO_LARGE"}, "2 MiB file with --max-file-mb 1");
  }

  // ---- Special files: never opened for reading, never block.
  {
    const std::string fifo = w.Path("fifo.jpg");
    if (::mkfifo(fifo.c_str(), 0644) != 0)
      throw std::runtime_error("mkfifo " + fifo + ": " + std::strerror(errno));
    w.Add(fifo, {"NOT_REGULAR"}, "FIFO with an image name (opening it for reading would block)");
    const std::string fifo2 = w.Path("pipe");
    if (::mkfifo(fifo2.c_str(), 0644) != 0) throw std::runtime_error("mkfifo " + fifo2);
    w.Add(fifo2, {kIgnored}, "FIFO without extension: not sniffed, ignored");
    fs::create_symlink("/dev/zero", w.Path("zero.jpg"));
    w.Add(w.Path("zero.jpg"), {"NOT_REGULAR"}, "symlink to /dev/zero (endless data)");
    fs::create_symlink("/dev/null", w.Path("null.png"));
    w.Add(w.Path("null.png"), {"NOT_REGULAR"}, "symlink to /dev/null (a device)");
    fs::create_symlink(root + "/does/not/exist.jpg", w.Path("dangling.jpg"));
    w.Add(w.Path("dangling.jpg"), {"NOT_REGULAR"}, "dangling symlink");
    fs::create_symlink("self.jpg", w.Path("self.jpg"));
    w.Add(w.Path("self.jpg"), {"NOT_REGULAR"}, "symlink pointing at itself (ELOOP)");
  }

  MakeDirsReadable(root);
  if (options.include_permission_cases) {
    for (HostileEntry& e : MakePermissionCorpus(root + "/perm", options.seed + 77))
      w.Add(e.path, e.expected, e.why);
  }
  return w.Take();
}

std::vector<HostileEntry> MakePermissionCorpus(const std::string& root, uint64_t seed) {
  CorpusWriter w(root, seed);
  fs::create_directories(root);
  w.Good("readable.png", ".png", 320, "readable image beside unreadable ones");
  w.Good("readable2.jpg", ".jpg", 320, "readable image beside unreadable ones");
  w.Good("zz_after/late.png", ".png", 320,
         "readable image in a folder listed after the unreadable ones: the "
         "walk goes on");
  w.Good("secret.png", ".png", 320, "");
  ::chmod(w.Path("secret.png").c_str(), 0);
  std::vector<HostileEntry> entries = w.Take();
  entries.back().expected = {"PERMISSION_DENIED"};
  entries.back().why = "mode 000 file";
  // A folder that cannot be listed: the folder is reported, its image unseen.
  const cv::Mat hidden = MakeSyntheticImage(seed * 31 + 5, 320, 240);
  fs::create_directories(root + "/noaccess");
  WriteBytes(root + "/noaccess/hidden.png", Encode(".png", hidden));
  entries.push_back(
      {root + "/noaccess", {"PERMISSION_DENIED"}, "mode 000 folder: cannot be listed"});
  entries.push_back(
      {root + "/noaccess/hidden.png", {kIgnored}, "inside an unlistable folder: cannot be seen"});
  // A folder that can be listed but not entered (r, no x): its file cannot be
  // opened.
  fs::create_directories(root + "/nosearch");
  WriteBytes(root + "/nosearch/img.png",
             Encode(".png", MakeSyntheticImage(seed * 31 + 6, 320, 240)));
  entries.push_back({root + "/nosearch/img.png",
                     {"PERMISSION_DENIED"},
                     "in a folder with r but no x permission: listed, cannot be opened"});
  MakeDirsReadable(root);
  ::chmod((root + "/noaccess").c_str(), 0);
  ::chmod((root + "/nosearch").c_str(), 0644);
  return entries;
}

}  // namespace testing
}  // namespace lookalike
