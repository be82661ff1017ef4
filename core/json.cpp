#include "core/json.h"

#include <charconv>
#include <cmath>
#include <set>

#include "core/error.h"

namespace ember {

std::string_view json_kind_name(Json::Kind kind) {
  switch (kind) {
    case Json::Kind::null: return "null";
    case Json::Kind::boolean: return "a boolean";
    case Json::Kind::integer: return "an integer";
    case Json::Kind::real: return "a number";
    case Json::Kind::string: return "a string";
    case Json::Kind::array: return "an array";
    case Json::Kind::object: return "an object";
  }
  return "?";
}

// ---- value access ----------------------------------------------------------------------

namespace {
[[noreturn]] void wrong_kind(const char* expected, Json::Kind got) {
  EMBER_FAIL("json: expected ", expected, ", got ", json_kind_name(got));
}
}  // namespace

bool Json::as_bool() const {
  if (!is_bool()) wrong_kind("a boolean", kind());
  return std::get<bool>(value_);
}

int64_t Json::as_int() const {
  if (!is_int()) wrong_kind("an integer", kind());
  return std::get<int64_t>(value_);
}

double Json::as_double() const {
  if (is_int()) return static_cast<double>(std::get<int64_t>(value_));
  if (kind() != Kind::real) wrong_kind("a number", kind());
  return std::get<double>(value_);
}

const std::string& Json::as_string() const {
  if (!is_string()) wrong_kind("a string", kind());
  return std::get<std::string>(value_);
}

const Json::Array& Json::as_array() const {
  if (!is_array()) wrong_kind("an array", kind());
  return std::get<Array>(value_);
}

const Json::Object& Json::as_object() const {
  if (!is_object()) wrong_kind("an object", kind());
  return std::get<Object>(value_);
}

const Json* Json::find(std::string_view key) const {
  for (const Member& m : as_object())
    if (m.first == key) return &m.second;
  return nullptr;
}

const Json& Json::at(std::string_view key) const {
  const Json* found = find(key);
  EMBER_CHECK(found, "json: object has no key \"", key, "\"");
  return *found;
}

void Json::set(std::string key, Json value) {
  if (!is_object()) wrong_kind("an object", kind());
  Object& members = std::get<Object>(value_);
  for (Member& m : members) {
    if (m.first == key) {
      m.second = std::move(value);
      return;
    }
  }
  members.emplace_back(std::move(key), std::move(value));
}

void Json::push_back(Json value) {
  if (!is_array()) wrong_kind("an array", kind());
  std::get<Array>(value_).push_back(std::move(value));
}

size_t Json::size() const {
  if (is_array()) return std::get<Array>(value_).size();
  if (is_object()) return std::get<Object>(value_).size();
  wrong_kind("an array or an object", kind());
}

// ---- writer ----------------------------------------------------------------------------

namespace {

void write_string(std::string& out, std::string_view s) {
  static const char hex[] = "0123456789abcdef";
  out += '"';
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (u < 0x20) {
          out += "\\u00";
          out += hex[u >> 4];
          out += hex[u & 15];
        } else {
          out += c;  // UTF-8 passes through unchanged
        }
    }
  }
  out += '"';
}

void write_double(std::string& out, double v) {
  EMBER_CHECK(std::isfinite(v), "json: cannot write the non-finite number ", v, " (JSON has no NaN or Infinity)");
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);  // shortest text that round-trips
  std::string_view text(buf, static_cast<size_t>(end - buf));
  out += text;
  // Keep it a double when read back: "3" would parse as an integer.
  if (text.find_first_of(".e") == std::string_view::npos) out += ".0";
}

void newline(std::string& out, int indent, int depth) {
  if (indent < 0) return;
  out += '\n';
  out.append(static_cast<size_t>(indent) * static_cast<size_t>(depth), ' ');
}

}  // namespace

static void write_value(std::string& out, const Json& j, int indent, int depth) {
  switch (j.kind()) {
    case Json::Kind::null: out += "null"; return;
    case Json::Kind::boolean: out += j.as_bool() ? "true" : "false"; return;
    case Json::Kind::integer: out += std::to_string(j.as_int()); return;
    case Json::Kind::real: write_double(out, j.as_double()); return;
    case Json::Kind::string: write_string(out, j.as_string()); return;
    case Json::Kind::array: {
      const Json::Array& items = j.as_array();
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += ',';
        newline(out, indent, depth + 1);
        write_value(out, items[i], indent, depth + 1);
      }
      if (!items.empty()) newline(out, indent, depth);
      out += ']';
      return;
    }
    case Json::Kind::object: {
      const Json::Object& members = j.as_object();
      out += '{';
      for (size_t i = 0; i < members.size(); ++i) {
        if (i) out += ',';
        newline(out, indent, depth + 1);
        write_string(out, members[i].first);
        out += indent < 0 ? ":" : ": ";
        write_value(out, members[i].second, indent, depth + 1);
      }
      if (!members.empty()) newline(out, indent, depth);
      out += '}';
      return;
    }
  }
}

std::string Json::dump(int indent) const {
  std::string out;
  write_value(out, *this, indent, 0);
  return out;
}

// ---- parser ----------------------------------------------------------------------------

namespace {

class Parser {
 public:
  Parser(std::string_view text, std::string_view what, int max_depth)
      : text_(text), what_(what), max_depth_(max_depth) {}

  Json parse_document() {
    skip_whitespace();
    if (at_end()) fail("expected a JSON value, got end of input");
    Json value = parse_value(0);
    skip_whitespace();
    if (!at_end()) fail(concat_got("expected end of input after the JSON value"));
    return value;
  }

 private:
  std::string_view text_;
  std::string_view what_;
  int max_depth_;
  size_t pos_ = 0;

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }

  [[noreturn]] void fail(const std::string& message) const { fail_at(pos_, message); }
  [[noreturn]] void fail_at(size_t offset, const std::string& message) const {
    EMBER_FAIL(what_, ": invalid JSON at byte ", offset, ": ", message);
  }
  // "<expected>, got 'x'" or "<expected>, got end of input".
  std::string concat_got(std::string_view expected) const {
    std::string s(expected);
    if (at_end()) return s + ", got end of input";
    const auto c = static_cast<unsigned char>(peek());
    if (c >= 0x20 && c < 0x7f) return s + ", got '" + static_cast<char>(c) + "'";
    static const char hex[] = "0123456789abcdef";
    return s + ", got byte 0x" + hex[c >> 4] + hex[c & 15];
  }

  void skip_whitespace() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) ++pos_;
  }

  void expect(char c) {
    if (at_end() || peek() != c) fail(concat_got(std::string("expected '") + c + "'"));
    ++pos_;
  }

  Json parse_value(int depth) {
    if (at_end()) fail("expected a JSON value, got end of input");
    switch (peek()) {
      case '{': return parse_object(depth + 1);
      case '[': return parse_array(depth + 1);
      case '"': return Json(parse_string());
      case 't': parse_literal("true"); return Json(true);
      case 'f': parse_literal("false"); return Json(false);
      case 'n': parse_literal("null"); return Json();
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return parse_number();
        fail(concat_got("expected a JSON value"));
    }
  }

  void parse_literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) fail(concat_got("expected a JSON value"));
    pos_ += word.size();
  }

  void check_depth(int depth) const {
    if (depth > max_depth_)
      fail("nesting deeper than the limit of " + std::to_string(max_depth_) + " levels");
  }

  Json parse_array(int depth) {
    check_depth(depth);
    ++pos_;  // '['
    Json result = Json::array();
    skip_whitespace();
    if (!at_end() && peek() == ']') { ++pos_; return result; }
    while (true) {
      skip_whitespace();
      result.push_back(parse_value(depth));
      skip_whitespace();
      if (!at_end() && peek() == ',') { ++pos_; continue; }
      if (!at_end() && peek() == ']') { ++pos_; return result; }
      fail(concat_got("expected ',' or ']' in an array"));
    }
  }

  Json parse_object(int depth) {
    check_depth(depth);
    ++pos_;  // '{'
    Json result = Json::object();
    std::set<std::string, std::less<>> keys;
    skip_whitespace();
    if (!at_end() && peek() == '}') { ++pos_; return result; }
    while (true) {
      skip_whitespace();
      const size_t key_offset = pos_;
      if (at_end() || peek() != '"') fail(concat_got("expected a string key in an object"));
      std::string key = parse_string();
      if (!keys.insert(key).second) fail_at(key_offset, "duplicate key \"" + key + "\" in an object");
      skip_whitespace();
      expect(':');
      skip_whitespace();
      Json value = parse_value(depth);
      result.set(std::move(key), std::move(value));  // appends: the key is new
      skip_whitespace();
      if (!at_end() && peek() == ',') { ++pos_; continue; }
      if (!at_end() && peek() == '}') { ++pos_; return result; }
      fail(concat_got("expected ',' or '}' in an object"));
    }
  }

  unsigned parse_hex4() {
    if (text_.size() - pos_ < 4) { pos_ = text_.size(); fail("truncated \\u escape"); }
    unsigned value = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = peek();
      unsigned digit;
      if (c >= '0' && c <= '9') digit = static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f') digit = static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') digit = static_cast<unsigned>(c - 'A' + 10);
      else fail(concat_got("expected a hex digit in a \\u escape"));
      value = value * 16 + digit;
      ++pos_;
    }
    return value;
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  // \uXXXX, possibly a surrogate pair; pos_ is just after the 'u'.
  uint32_t parse_unicode_escape(size_t escape_offset) {
    const unsigned first = parse_hex4();
    if (first >= 0xDC00 && first <= 0xDFFF) fail_at(escape_offset, "lone low surrogate in a \\u escape");
    if (first < 0xD800 || first > 0xDBFF) return first;
    if (text_.substr(pos_, 2) != "\\u") fail_at(escape_offset, "high surrogate not followed by a \\u low surrogate");
    pos_ += 2;
    const unsigned second = parse_hex4();
    if (second < 0xDC00 || second > 0xDFFF) fail_at(escape_offset, "high surrogate not followed by a \\u low surrogate");
    return 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
  }

  // One raw UTF-8 sequence starting at pos_ (first byte >= 0x80), validated and copied.
  void copy_utf8_sequence(std::string& out) {
    const size_t start = pos_;
    const auto lead = static_cast<unsigned char>(peek());
    int length;
    uint32_t cp;
    if (lead >= 0xC2 && lead <= 0xDF) { length = 2; cp = lead & 0x1F; }
    else if (lead >= 0xE0 && lead <= 0xEF) { length = 3; cp = lead & 0x0F; }
    else if (lead >= 0xF0 && lead <= 0xF4) { length = 4; cp = lead & 0x07; }
    else fail("invalid UTF-8 in a string");
    if (text_.size() - pos_ < static_cast<size_t>(length)) fail("truncated UTF-8 sequence in a string");
    for (int i = 1; i < length; ++i) {
      const auto c = static_cast<unsigned char>(text_[pos_ + i]);
      if ((c & 0xC0) != 0x80) fail("invalid UTF-8 in a string");
      cp = (cp << 6) | (c & 0x3F);
    }
    const bool overlong = (length == 3 && cp < 0x800) || (length == 4 && cp < 0x10000);
    if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) fail("invalid UTF-8 in a string");
    pos_ += static_cast<size_t>(length);
    out.append(text_.substr(start, static_cast<size_t>(length)));
  }

  std::string parse_string() {
    const size_t start = pos_;
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (at_end()) fail_at(start, "unterminated string");
      const auto c = static_cast<unsigned char>(peek());
      if (c == '"') { ++pos_; return out; }
      if (c < 0x20) fail(concat_got("control character in a string (must be escaped)"));
      if (c >= 0x80) { copy_utf8_sequence(out); continue; }
      if (c != '\\') { out += static_cast<char>(c); ++pos_; continue; }
      const size_t escape_offset = pos_;
      ++pos_;
      if (at_end()) fail_at(start, "unterminated string");
      const char e = peek();
      ++pos_;
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': append_utf8(out, parse_unicode_escape(escape_offset)); break;
        default: --pos_; fail_at(escape_offset, concat_got("invalid escape: expected one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u after '\\'"));
      }
    }
  }

  size_t skip_digits() {
    const size_t start = pos_;
    while (!at_end() && peek() >= '0' && peek() <= '9') ++pos_;
    return pos_ - start;
  }

  Json parse_number() {
    const size_t start = pos_;
    if (peek() == '-') ++pos_;
    const size_t int_start = pos_;
    const size_t int_digits = skip_digits();
    if (int_digits == 0) fail(concat_got("expected a digit in a number"));
    if (int_digits > 1 && text_[int_start] == '0') fail_at(int_start, "leading zero in a number");
    bool integral = true;
    size_t frac_start = pos_, frac_digits = 0;
    if (!at_end() && peek() == '.') {
      integral = false;
      ++pos_;
      frac_start = pos_;
      frac_digits = skip_digits();
      if (frac_digits == 0) fail(concat_got("expected a digit after '.' in a number"));
    }
    if (!at_end() && (peek() == 'e' || peek() == 'E')) {
      integral = false;
      ++pos_;
      if (!at_end() && (peek() == '+' || peek() == '-')) ++pos_;
      if (skip_digits() == 0) fail(concat_got("expected a digit in the exponent of a number"));
    }
    const std::string_view literal = text_.substr(start, pos_ - start);
    const char* first = literal.data();
    const char* last = first + literal.size();
    if (integral) {
      int64_t value = 0;
      auto [ptr, ec] = std::from_chars(first, last, value);
      if (ec != std::errc() || ptr != last)
        fail_at(start, "integer " + std::string(literal) + " does not fit in 64 bits");
      return Json(value);
    }
    double value = 0;
    auto [ptr, ec] = std::from_chars(first, last, value);
    if (ec == std::errc::result_out_of_range) {
      if (!underflows(int_start, int_digits, frac_start, frac_digits))
        fail_at(start, "number " + std::string(literal) + " is out of the range of a double");
      value = literal[0] == '-' ? -0.0 : 0.0;
    } else if (ec != std::errc() || ptr != last) {
      fail_at(start, "malformed number " + std::string(literal));
    }
    return Json(value);
  }

  // Note [Underflow vs overflow]: from_chars reports both as out of range without a value.
  // The magnitude is about 10^(position of the first non-zero digit + exponent); a negative
  // decimal exponent means the number is too small (-> 0), a positive one too large (-> error).
  bool underflows(size_t int_start, size_t int_digits, size_t frac_start, size_t frac_digits) const {
    int64_t magnitude = 0;
    size_t i = 0;
    while (i < int_digits && text_[int_start + i] == '0') ++i;
    if (i < int_digits) {
      magnitude = static_cast<int64_t>(int_digits - i);
    } else {
      size_t j = 0;
      while (j < frac_digits && text_[frac_start + j] == '0') ++j;
      magnitude = -static_cast<int64_t>(j);
    }
    const size_t e = text_.find_first_of("eE", int_start);
    if (e != std::string_view::npos && e < pos_) {
      int64_t exponent = 0;
      const char* first = text_.data() + e + 1;
      if (*first == '+') ++first;
      auto [ptr, ec] = std::from_chars(first, text_.data() + pos_, exponent);
      if (ec == std::errc::result_out_of_range) return *first == '-';
      if (__builtin_add_overflow(magnitude, exponent, &magnitude)) return exponent < 0;
    }
    return magnitude < 0;
  }
};

}  // namespace

Json Json::parse(std::string_view text, std::string_view what, int max_depth) {
  return Parser(text, what, max_depth).parse_document();
}

}  // namespace ember
