#include "indexer/image_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>  // the IMREAD_* flags only: decoding is in image_codecs.h
#include <opencv2/imgproc.hpp>

#include "indexer/colour.h"
#include "indexer/image_codecs.h"

// libjpeg needs FILE and size_t declared first.
#include <jerror.h>
#include <jpeglib.h>
#include <zlib.h>

namespace lookalike {

const char* FileErrorCodeName(FileErrorCode code) {
  switch (code) {
    case FileErrorCode::kDecodeFailed:
      return "DECODE_FAILED";
    case FileErrorCode::kTruncated:
      return "TRUNCATED";
    case FileErrorCode::kUnsupportedFormat:
      return "UNSUPPORTED_FORMAT";
    case FileErrorCode::kTooManyPixels:
      return "TOO_MANY_PIXELS";
    case FileErrorCode::kFileTooLarge:
      return "FILE_TOO_LARGE";
    case FileErrorCode::kNotRegular:
      return "NOT_REGULAR";
    case FileErrorCode::kNoFeatures:
      return "NO_FEATURES";
    case FileErrorCode::kPermissionDenied:
      return "PERMISSION_DENIED";
    case FileErrorCode::kVanished:
      return "VANISHED";
    case FileErrorCode::kReadFailed:
      return "READ_FAILED";
    case FileErrorCode::kTimeout:
      return "TIMEOUT";
  }
  return "UNKNOWN";
}

const char* ImageFormatName(ImageFormat format) {
  switch (format) {
    case ImageFormat::kJpeg:
      return "jpeg";
    case ImageFormat::kPng:
      return "png";
    case ImageFormat::kWebp:
      return "webp";
    case ImageFormat::kTiff:
      return "tiff";
    case ImageFormat::kBmp:
      return "bmp";
    case ImageFormat::kPnm:
      return "pnm";
    case ImageFormat::kUnknown:
      break;
  }
  return "unknown";
}

ImageFormat DetectImageFormat(const unsigned char* d, size_t n) {
  if (n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF) return ImageFormat::kJpeg;
  if (n >= 8 && std::memcmp(d, "\x89PNG\r\n\x1a\n", 8) == 0) return ImageFormat::kPng;
  if (n >= 12 && std::memcmp(d, "RIFF", 4) == 0 && std::memcmp(d + 8, "WEBP", 4) == 0)
    return ImageFormat::kWebp;
  if (n >= 4 && (std::memcmp(d, "II*\0", 4) == 0 || std::memcmp(d, "MM\0*", 4) == 0))
    return ImageFormat::kTiff;
  if (n >= 14 && d[0] == 'B' && d[1] == 'M') return ImageFormat::kBmp;
  if (n >= 3 && d[0] == 'P' && d[1] >= '1' && d[1] <= '6' &&
      (d[2] == ' ' || d[2] == '\n' || d[2] == '\r' || d[2] == '\t'))
    return ImageFormat::kPnm;
  return ImageFormat::kUnknown;
}

namespace {

uint32_t Be16(const unsigned char* p) { return (uint32_t{p[0]} << 8) | p[1]; }
uint32_t Be32(const unsigned char* p) { return (Be16(p) << 16) | Be16(p + 2); }
uint32_t Le16(const unsigned char* p) { return (uint32_t{p[1]} << 8) | p[0]; }

bool StartsWith(const unsigned char* d, size_t n, const char* magic, size_t magic_size) {
  return n >= magic_size && std::memcmp(d, magic, magic_size) == 0;
}

// An ISO base media file (HEIF, AVIF, but also MP4 and QuickTime videos) is
// an image when its ftyp box names an image brand, major or compatible.
const char* IsoImageBrand(const unsigned char* d, size_t n) {
  if (n < 16 || std::memcmp(d + 4, "ftyp", 4) != 0) return nullptr;
  const size_t end = std::min<size_t>(n, Be32(d));
  bool heic = false, heif = false, avif = false;
  for (size_t pos = 8; pos + 4 <= end; pos += pos == 8 ? 8 : 4) {  // skips minor_version
    const std::string brand(reinterpret_cast<const char*>(d + pos), 4);
    avif = avif || brand == "avif" || brand == "avis";
    heic = heic || brand == "heic" || brand == "heix" || brand == "heim" || brand == "heis";
    heif = heif || brand == "mif1" || brand == "msf1" || brand == "hevc" || brand == "hevx";
  }
  return avif ? "AVIF" : heic ? "HEIC" : heif ? "HEIF" : nullptr;
}

// ICO's four-byte magic is common in binary files, so its first directory
// entry is checked too.
bool LooksLikeIco(const unsigned char* d, size_t n) {
  if (n < 22 || !StartsWith(d, n, "\0\0\1\0", 4)) return false;
  const uint32_t count = Le16(d + 4), planes = Le16(d + 6 + 4), bits = Le16(d + 6 + 6);
  return count >= 1 && count <= 256 && d[6 + 3] == 0 && planes <= 1 &&
         (bits == 0 || bits == 1 || bits == 4 || bits == 8 || bits == 16 || bits == 24 ||
          bits == 32);
}

}  // namespace

const char* UnsupportedImageFormat(const unsigned char* d, size_t n) {
  if (StartsWith(d, n, "GIF87a", 6) || StartsWith(d, n, "GIF89a", 6)) return "GIF";
  if (const char* brand = IsoImageBrand(d, n)) return brand;
  if (StartsWith(d, n, "\xff\x0a", 2) || StartsWith(d, n, "\0\0\0\x0cJXL \r\n\x87\n", 12))
    return "JPEG XL";
  if (StartsWith(d, n, "\0\0\0\x0cjP  \r\n\x87\n", 12) || StartsWith(d, n, "\xff\x4f\xff\x51", 4))
    return "JPEG 2000";
  if (StartsWith(d, n, "\x76\x2f\x31\x01", 4)) return "OpenEXR";
  if (StartsWith(d, n, "8BPS", 4)) return "Photoshop";
  if (StartsWith(d, n, "#?RADIANCE", 10) || StartsWith(d, n, "#?RGBE", 6)) return "Radiance HDR";
  if (StartsWith(d, n, "DDS |", 5)) return "DDS";
  if (StartsWith(d, n, "qoif", 4)) return "QOI";
  if (LooksLikeIco(d, n)) return "ICO";
  return nullptr;
}

namespace {

uint32_t Le24(const unsigned char* p) { return Le16(p) | (uint32_t{p[2]} << 16); }
uint32_t Le32(const unsigned char* p) { return Le16(p) | (Le16(p + 2) << 16); }

bool IsJpegSof(unsigned char m) {
  return m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
}

// Offset just after the first SOS header, or 0 if none is found.
size_t JpegFirstScan(const unsigned char* d, size_t n, ImageSize* size) {
  size_t pos = 2;
  while (pos + 4 <= n) {
    if (d[pos] != 0xFF) return 0;
    const unsigned char marker = d[pos + 1];
    if (marker == 0xFF) {
      ++pos;
      continue;
    }  // fill byte
    if (marker == 0xD8 || (marker >= 0xD0 && marker <= 0xD7) || marker == 0x01) {
      pos += 2;
      continue;
    }
    const size_t len = Be16(d + pos + 2);
    if (len < 2) return 0;
    if (size && IsJpegSof(marker) && pos + 9 <= n) {
      size->height = Be16(d + pos + 5);
      size->width = Be16(d + pos + 7);
    }
    if (marker == 0xDA) return pos + 2 + len <= n ? pos + 2 + len : 0;
    pos += 2 + len;
  }
  return 0;
}

}  // namespace

std::optional<ImageSize> ReadHeaderSize(ImageFormat format, const unsigned char* d, size_t n) {
  ImageSize s;
  switch (format) {
    case ImageFormat::kJpeg:
      JpegFirstScan(d, n, &s);
      if (s.width == 0 && s.height == 0) return std::nullopt;
      return s;
    case ImageFormat::kPng:
      if (n < 24 || std::memcmp(d + 12, "IHDR", 4) != 0) return std::nullopt;
      s.width = Be32(d + 16);
      s.height = Be32(d + 20);
      return s;
    case ImageFormat::kWebp:
      if (n >= 30 && std::memcmp(d + 12, "VP8 ", 4) == 0) {
        s.width = Le16(d + 26) & 0x3FFF;
        s.height = Le16(d + 28) & 0x3FFF;
        return s;
      }
      if (n >= 25 && std::memcmp(d + 12, "VP8L", 4) == 0) {
        const uint32_t bits = Le32(d + 21);
        s.width = (bits & 0x3FFF) + 1;
        s.height = ((bits >> 14) & 0x3FFF) + 1;
        return s;
      }
      if (n >= 30 && std::memcmp(d + 12, "VP8X", 4) == 0) {
        s.width = Le24(d + 24) + 1;
        s.height = Le24(d + 27) + 1;
        return s;
      }
      return std::nullopt;
    case ImageFormat::kBmp: {
      if (n < 26) return std::nullopt;
      const int32_t w = static_cast<int32_t>(Le32(d + 18));
      const int32_t h = static_cast<int32_t>(Le32(d + 22));
      s.width = static_cast<uint32_t>(w < 0 ? -static_cast<int64_t>(w) : w);
      s.height = static_cast<uint32_t>(h < 0 ? -static_cast<int64_t>(h) : h);
      return s;
    }
    case ImageFormat::kTiff: {
      // First IFD: tags 256 (ImageWidth) and 257 (ImageLength), SHORT or LONG.
      if (n < 8) return std::nullopt;
      const bool le = d[0] == 'I';
      auto u16 = [&](size_t o) { return le ? Le16(d + o) : Be16(d + o); };
      auto u32 = [&](size_t o) { return le ? Le32(d + o) : Be32(d + o); };
      const size_t ifd = u32(4);
      if (ifd + 2 > n) return std::nullopt;
      const size_t entries = u16(ifd);
      for (size_t e = 0; e < entries && ifd + 2 + 12 * (e + 1) <= n; ++e) {
        const size_t o = ifd + 2 + 12 * e;
        const uint32_t tag = u16(o), type = u16(o + 2);
        const uint32_t value = type == 3 ? u16(o + 8) : type == 4 ? u32(o + 8) : 0;
        if (tag == 256) s.width = value;
        if (tag == 257) s.height = value;
      }
      if (s.width == 0 && s.height == 0) return std::nullopt;
      return s;
    }
    case ImageFormat::kPnm: {
      // "P5 <width> <height> ..." with '#' comments between fields.
      size_t pos = 2;
      uint64_t fields[2] = {0, 0};
      for (uint64_t& field : fields) {
        for (;;) {
          while (pos < n && std::isspace(d[pos])) ++pos;
          if (pos < n && d[pos] == '#') {
            while (pos < n && d[pos] != '\n') ++pos;
            continue;
          }
          break;
        }
        if (pos >= n || !std::isdigit(d[pos])) return std::nullopt;
        while (pos < n && std::isdigit(d[pos]) && field < (uint64_t{1} << 32))
          field = field * 10 + (d[pos++] - '0');
      }
      s.width = static_cast<uint32_t>(std::min<uint64_t>(fields[0], UINT32_MAX));
      s.height = static_cast<uint32_t>(std::min<uint64_t>(fields[1], UINT32_MAX));
      return s;
    }
    default:
      return std::nullopt;
  }
}

bool JpegLooksComplete(const unsigned char* d, size_t n) {
  const size_t scan = JpegFirstScan(d, n, nullptr);
  if (scan == 0) return false;
  // Inside entropy-coded data 0xFF is always followed by 0x00 or a restart
  // marker, so FF D9 after the first scan can only be the end-of-image marker.
  for (size_t i = n; i-- > scan + 1;)
    if (d[i - 1] == 0xFF && d[i] == 0xD9) return true;
  return false;
}

std::optional<FileStat> StatFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  FileStat fs;
  fs.size_bytes = static_cast<uint64_t>(st.st_size);
  fs.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  fs.regular = S_ISREG(st.st_mode);
  return fs;
}

namespace {

LoadResult Fail(FileErrorCode code, const std::string& path, std::string message) {
  LoadResult r;
  r.error = FileError{code, path, std::move(message)};
  return r;
}

}  // namespace

namespace {

// Decodes a JPEG with libjpeg at 1/8 scale (entropy decoding runs in full,
// the inverse DCT is tiny) to find what OpenCV only prints to stderr: libjpeg
// reports corrupt entropy data and data that ends early as *warnings* and pads
// the rest with grey. Returns the first warning or error, or "" when clean.
struct JpegCheckError {
  jpeg_error_mgr mgr;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  bool warned;
  bool premature_end;
};

extern "C" void JpegCheckErrorExit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegCheckError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  longjmp(err->jump, 1);
}

extern "C" void JpegCheckEmitMessage(j_common_ptr cinfo, int level) {
  auto* err = reinterpret_cast<JpegCheckError*>(cinfo->err);
  if (level >= 0 || err->warned) return;  // trace messages; keep the first warning
  err->warned = true;
  err->premature_end = cinfo->err->msg_code == JWRN_JPEG_EOF;
  (*cinfo->err->format_message)(cinfo, err->message);
}

extern "C" void JpegCheckOutputMessage(j_common_ptr) {}  // never print

// "" when the stream decodes without warnings; otherwise libjpeg's message.
// *premature_end tells a file cut short from corrupt data.
std::string CheckJpegStream(const unsigned char* data, size_t size, bool* premature_end) {
  jpeg_decompress_struct cinfo;
  JpegCheckError err;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = JpegCheckErrorExit;
  err.mgr.emit_message = JpegCheckEmitMessage;
  err.mgr.output_message = JpegCheckOutputMessage;
  err.warned = false;
  err.premature_end = false;
  err.message[0] = '\0';
  *premature_end = false;
  std::vector<JSAMPLE> row;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return err.message[0] ? err.message : "libjpeg error";
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  cinfo.scale_num = 1;
  cinfo.scale_denom = 8;
  cinfo.dct_method = JDCT_IFAST;
  cinfo.do_fancy_upsampling = FALSE;
  if (cinfo.jpeg_color_space != JCS_CMYK && cinfo.jpeg_color_space != JCS_YCCK)
    cinfo.out_color_space = JCS_GRAYSCALE;
  jpeg_start_decompress(&cinfo);
  row.resize(static_cast<size_t>(cinfo.output_width) * cinfo.output_components);
  while (cinfo.output_scanline < cinfo.output_height && !err.warned) {
    JSAMPROW rows[1] = {row.data()};
    jpeg_read_scanlines(&cinfo, rows, 1);
  }
  if (!err.warned) jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  *premature_end = err.premature_end;
  return err.warned ? err.message : "";
}

// Walks PNG chunks and checks their CRCs (libpng reports a bad CRC only on
// stderr). Returns "" when every chunk up to IEND is whole and intact.
std::string CheckPngChunks(const unsigned char* d, size_t n) {
  size_t pos = 8;
  while (pos + 12 <= n) {
    const uint32_t len = Be32(d + pos);
    if (len > n - pos - 12) return "PNG chunk runs past the end of the file";
    const uint32_t stored = Be32(d + pos + 8 + len);
    const uint32_t computed =
        static_cast<uint32_t>(crc32(crc32(0L, Z_NULL, 0), d + pos + 4, static_cast<uInt>(len + 4)));
    if (stored != computed)
      return "PNG chunk " + std::string(reinterpret_cast<const char*>(d + pos + 4), 4) +
             " has a bad CRC (corrupt file)";
    if (std::memcmp(d + pos + 4, "IEND", 4) == 0) return "";
    pos += 12 + len;
  }
  return "PNG has no IEND chunk (truncated file)";
}

}  // namespace

int ColourDecodeFlags(ImageFormat format, const std::optional<ImageSize>& header, int max_side) {
  if (format != ImageFormat::kJpeg || !header || max_side <= 0) return cv::IMREAD_COLOR;
  const uint32_t longest = std::max(header->width, header->height);
  const auto side = static_cast<uint32_t>(max_side);
  if (longest >= 8u * side) return cv::IMREAD_REDUCED_COLOR_8;
  if (longest >= 4u * side) return cv::IMREAD_REDUCED_COLOR_4;
  if (longest >= 2u * side) return cv::IMREAD_REDUCED_COLOR_2;
  return cv::IMREAD_COLOR;
}

LoadResult DecodeImageBytes(const std::string& name, const std::string& bytes, int max_side,
                            const ImageFileLimits& limits) {
  const auto* d = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  if (n == 0) return Fail(FileErrorCode::kUnsupportedFormat, name, "empty file");
  const ImageFormat format = DetectImageFormat(d, n);
  if (format == ImageFormat::kUnknown) {
    if (const char* other = UnsupportedImageFormat(d, n))
      return Fail(FileErrorCode::kUnsupportedFormat, name,
                  std::string(other) +
                      " image (by content), a format lookalike does not read: convert it to "
                      "JPEG, PNG, WebP, TIFF, BMP or PNM");
    return Fail(FileErrorCode::kUnsupportedFormat, name,
                "not a JPEG, PNG, WebP, TIFF, BMP or PNM image (by content)");
  }
  const auto header = ReadHeaderSize(format, d, n);
  if (header) {
    const uint64_t pixels = uint64_t{header->width} * header->height;
    if (pixels > limits.max_pixels)
      return Fail(FileErrorCode::kTooManyPixels, name,
                  "header claims " + std::to_string(header->width) + "x" +
                      std::to_string(header->height) + " pixels, more than the limit of " +
                      std::to_string(limits.max_pixels));
    if (pixels == 0)
      return Fail(FileErrorCode::kDecodeFailed, name, "header claims a 0-pixel image");
  }
  if (format == ImageFormat::kJpeg && !limits.allow_truncated) {
    if (!JpegLooksComplete(d, n))
      return Fail(FileErrorCode::kTruncated, name,
                  "JPEG data ends before the end-of-image marker (truncated file)");
    bool premature_end = false;
    const std::string problem = CheckJpegStream(d, n, &premature_end);
    if (!problem.empty())
      return Fail(premature_end ? FileErrorCode::kTruncated : FileErrorCode::kDecodeFailed, name,
                  "corrupt JPEG data (libjpeg: " + problem + ")");
  }
  if (format == ImageFormat::kPng && !limits.allow_truncated) {
    const std::string problem = CheckPngChunks(d, n);
    if (!problem.empty())
      return Fail(problem.find("truncated") != std::string::npos ||
                          problem.find("past the end") != std::string::npos
                      ? FileErrorCode::kTruncated
                      : FileErrorCode::kDecodeFailed,
                  name, problem);
  }

  // Colour, not greyscale: the colour histogram needs it (indexer/colour.h);
  // the grey image for SIFT is converted from it below.
  const int flags = ColourDecodeFlags(format, header, max_side);
  cv::Mat decoded;
  try {
    const cv::Mat buffer(1, static_cast<int>(n), CV_8U, const_cast<char*>(bytes.data()));
    decoded = DecodeImage(buffer, flags);
  } catch (const cv::Exception& e) {
    return Fail(FileErrorCode::kDecodeFailed, name, std::string("decoder error: ") + e.what());
  }
  if (decoded.empty())
    return Fail(FileErrorCode::kDecodeFailed, name,
                std::string("the ") + ImageFormatName(format) + " decoder rejected the data");
  if (decoded.depth() != CV_8U) decoded.convertTo(decoded, CV_8U, 1.0 / 256.0);
  if (decoded.channels() == 4) cv::cvtColor(decoded, decoded, cv::COLOR_BGRA2BGR);

  LoadResult result;
  LoadedImage& img = result.image.emplace();
  const auto colour_start = std::chrono::steady_clock::now();
  cv::Mat preview = ColourPreview(decoded);
  if (!preview.isContinuous()) preview = preview.clone();
  img.colour = ColourHistogram(preview);
  img.colour_preview.width = preview.cols;
  img.colour_preview.height = preview.rows;
  img.colour_preview.channels = preview.channels();
  img.colour_preview.pixels.assign(preview.datastart, preview.dataend);
  img.colour_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - colour_start).count();
  if (decoded.channels() != 1) cv::cvtColor(decoded, decoded, cv::COLOR_BGR2GRAY);
  img.format = format;
  img.size_bytes = n;
  if (header) {
    img.original_width = header->width;
    img.original_height = header->height;
  } else {
    img.original_width = static_cast<uint32_t>(decoded.cols);
    img.original_height = static_cast<uint32_t>(decoded.rows);
  }
  const int longest = std::max(decoded.cols, decoded.rows);
  if (max_side > 0 && longest > max_side) {
    const double scale = static_cast<double>(max_side) / longest;
    cv::Size target(std::max(1, static_cast<int>(decoded.cols * scale + 0.5)),
                    std::max(1, static_cast<int>(decoded.rows * scale + 0.5)));
    cv::Mat resized;
    const auto t0 = std::chrono::steady_clock::now();
    cv::resize(decoded, resized, target, 0, 0, cv::INTER_AREA);
    img.resize_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    decoded = resized;
  }
  if (!decoded.isContinuous()) decoded = decoded.clone();
  img.gray.width = decoded.cols;
  img.gray.height = decoded.rows;
  img.gray.pixels.assign(decoded.data, decoded.data + decoded.total());
  return result;
}

ReadResult ReadImageBytes(const std::string& path, const ImageFileLimits& limits) {
  ReadResult result;
  auto fail = [&](FileErrorCode code, std::string message) {
    result.error = FileError{code, path, std::move(message)};
    return std::move(result);
  };
  // O_NONBLOCK: opening a FIFO must not wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return fail(FileErrorCode::kVanished, "file disappeared before it was read");
    if (err == EACCES || err == EPERM)
      return fail(FileErrorCode::kPermissionDenied, "permission denied");
    if (err == ELOOP) return fail(FileErrorCode::kNotRegular, "symbolic link loop");
    return fail(FileErrorCode::kReadFailed, std::strerror(err));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return fail(FileErrorCode::kNotRegular,
                "not a regular file (FIFO, device, socket or directory)");
  }
  result.stat.regular = true;
  result.stat.size_bytes = static_cast<uint64_t>(st.st_size);
  result.stat.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  if (result.stat.size_bytes > limits.max_file_bytes) {
    ::close(fd);
    return fail(FileErrorCode::kFileTooLarge, std::to_string(st.st_size) +
                                                  " bytes, more than the limit of " +
                                                  std::to_string(limits.max_file_bytes));
  }
  result.bytes.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  const auto start = std::chrono::steady_clock::now();
  while (got < result.bytes.size()) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
        limits.max_seconds) {
      ::close(fd);
      return fail(FileErrorCode::kTimeout, "reading took longer than the budget of " +
                                               std::to_string(limits.max_seconds) + " s");
    }
    constexpr size_t kChunk = 1 << 20;
    const ssize_t r = ::read(fd, &result.bytes[got], std::min(kChunk, result.bytes.size() - got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const int err = errno;
      ::close(fd);
      return fail(FileErrorCode::kReadFailed, std::strerror(err));
    }
    if (r == 0) break;  // shrank while reading: decode exactly what was read
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  result.bytes.resize(got);
  return result;
}

LoadResult LoadImageFile(const std::string& path, int max_side, const ImageFileLimits& limits) {
  ReadResult read = ReadImageBytes(path, limits);
  if (read.error) {
    LoadResult r;
    r.error = std::move(read.error);
    return r;
  }
  LoadResult result = DecodeImageBytes(path, read.bytes, max_side, limits);
  if (result.image) result.image->mtime_ns = read.stat.mtime_ns;
  return result;
}

}  // namespace lookalike
