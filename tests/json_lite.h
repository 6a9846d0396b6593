// A strict little JSON reader for checking the CLI's JSON output in tests:
// rejects raw control characters in strings, bad escapes, invalid UTF-8 and
// trailing text. Header-only.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace lookalike {
namespace testing {

struct Json {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject } type = Type::kNull;
  bool boolean = false;
  double number = 0;
  std::string str;  // kString: the decoded bytes (UTF-8)
  std::vector<Json> items;
  std::map<std::string, Json> fields;
  size_t num_fields = 0;  // as written (duplicates counted)

  bool Has(const std::string& k) const { return fields.count(k) > 0; }
  const Json& operator[](const std::string& k) const {
    auto it = fields.find(k);
    if (it == fields.end()) throw std::runtime_error("JSON object has no field '" + k + "'");
    return it->second;
  }
};

class JsonParser {
 public:
  // Throws std::runtime_error naming the offset on any syntax error.
  static Json Parse(const std::string& text) {
    JsonParser p(text);
    p.Space();
    Json v = p.Value();
    p.Space();
    if (p.pos_ != text.size()) p.Fail("trailing characters");
    return v;
  }

 private:
  explicit JsonParser(const std::string& s) : s_(s) {}
  [[noreturn]] void Fail(const std::string& what) {
    throw std::runtime_error("invalid JSON at offset " + std::to_string(pos_) + ": " + what);
  }
  void Space() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }
  bool Eat(char c) {
    Space();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void Expect(char c) {
    if (!Eat(c)) Fail(std::string("expected '") + c + "'");
  }
  Json Value() {
    Space();
    if (pos_ >= s_.size()) Fail("unexpected end");
    Json v;
    const char c = s_[pos_];
    if (c == '{') {
      v.type = Json::Type::kObject;
      ++pos_;
      if (Eat('}')) return v;
      do {
        Space();
        const std::string key = String();
        Expect(':');
        v.fields[key] = Value();
        ++v.num_fields;
      } while (Eat(','));
      Expect('}');
    } else if (c == '[') {
      v.type = Json::Type::kArray;
      ++pos_;
      if (Eat(']')) return v;
      do v.items.push_back(Value());
      while (Eat(','));
      Expect(']');
    } else if (c == '"') {
      v.type = Json::Type::kString;
      v.str = String();
    } else if (s_.compare(pos_, 4, "true") == 0) {
      v.type = Json::Type::kBool;
      v.boolean = true;
      pos_ += 4;
    } else if (s_.compare(pos_, 5, "false") == 0) {
      v.type = Json::Type::kBool;
      pos_ += 5;
    } else if (s_.compare(pos_, 4, "null") == 0) {
      pos_ += 4;
    } else {
      const char* begin = s_.c_str() + pos_;
      char* end = nullptr;
      v.number = std::strtod(begin, &end);
      if (end == begin || !(c == '-' || (c >= '0' && c <= '9'))) Fail("unexpected character");
      v.type = Json::Type::kNumber;
      pos_ += static_cast<size_t>(end - begin);
    }
    return v;
  }
  static void PutUtf8(std::string* out, uint32_t cp) {
    if (cp < 0x80) {
      *out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      *out += static_cast<char>(0xC0 | (cp >> 6));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      *out += static_cast<char>(0xE0 | (cp >> 12));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      *out += static_cast<char>(0xF0 | (cp >> 18));
      *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  uint32_t Hex4() {
    if (pos_ + 4 > s_.size()) Fail("short \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = s_[pos_++];
      v <<= 4;
      if (h >= '0' && h <= '9')
        v |= h - '0';
      else if (h >= 'a' && h <= 'f')
        v |= h - 'a' + 10;
      else if (h >= 'A' && h <= 'F')
        v |= h - 'A' + 10;
      else
        Fail("bad hex digit in \\u escape");
    }
    return v;
  }
  std::string String() {
    if (pos_ >= s_.size() || s_[pos_] != '"') Fail("expected a string");
    ++pos_;
    std::string out;
    for (;;) {
      if (pos_ >= s_.size()) Fail("unterminated string");
      const unsigned char c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) Fail("raw control character in a string");
      if (c == '\\') {
        if (++pos_ >= s_.size()) Fail("unterminated escape");
        const char e = s_[pos_++];
        switch (e) {
          case '"':
            out += '"';
            break;
          case '\\':
            out += '\\';
            break;
          case '/':
            out += '/';
            break;
          case 'b':
            out += '\b';
            break;
          case 'f':
            out += '\f';
            break;
          case 'n':
            out += '\n';
            break;
          case 'r':
            out += '\r';
            break;
          case 't':
            out += '\t';
            break;
          case 'u': {
            uint32_t cp = Hex4();
            if (cp >= 0xD800 && cp <= 0xDBFF) {
              if (s_.compare(pos_, 2, "\\u") != 0) Fail("lone high surrogate");
              pos_ += 2;
              const uint32_t lo = Hex4();
              if (lo < 0xDC00 || lo > 0xDFFF) Fail("bad low surrogate");
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
              Fail("lone low surrogate");
            }
            PutUtf8(&out, cp);
            break;
          }
          default:
            Fail("bad escape");
        }
        continue;
      }
      // Raw UTF-8: validate the sequence.
      size_t len = c < 0x80           ? 1
                   : (c >> 5) == 0x6  ? 2
                   : (c >> 4) == 0xE  ? 3
                   : (c >> 3) == 0x1E ? 4
                                      : 0;
      if (len == 0 || pos_ + len > s_.size()) Fail("invalid UTF-8");
      uint32_t cp = c & (0x7F >> len);
      for (size_t j = 1; j < len; ++j) {
        const unsigned char cc = static_cast<unsigned char>(s_[pos_ + j]);
        if ((cc >> 6) != 0x2) Fail("invalid UTF-8 continuation");
        cp = (cp << 6) | (cc & 0x3F);
      }
      static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
      if (len > 1 && (cp < kMin[len] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF))
        Fail("invalid UTF-8 code point");
      out.append(s_, pos_, len);
      pos_ += len;
    }
  }

  const std::string& s_;
  size_t pos_ = 0;
};

}  // namespace testing
}  // namespace lookalike
