#include "core/json_fields.h"

#include <charconv>
#include <cmath>

#include "core/error.h"

namespace ember {

namespace {

[[noreturn]] void wrong_kind(const std::string& field, const char* expected, const Json& got) {
  EMBER_FAIL(field, ": expected ", expected, ", got ", json_kind_name(got.kind()),
             got.is_string() ? " '" + got.as_string() + "'" : std::string());
}

}  // namespace

const Json& json_field(const Json& object, std::string_view key, const std::string& where) {
  if (!object.is_object()) wrong_kind(where, "an object", object);
  const Json* value = object.find(key);
  EMBER_CHECK(value != nullptr, where, ": missing the field '", key, "'");
  return *value;
}

const Json::Object& json_object(const Json& value, const std::string& field) {
  if (!value.is_object()) wrong_kind(field, "an object", value);
  return value.as_object();
}

int64_t json_int(const Json& value, const std::string& field, int64_t lo, int64_t hi) {
  if (!value.is_int()) wrong_kind(field, "an integer", value);
  const int64_t v = value.as_int();
  EMBER_CHECK(v >= lo && v <= hi, field, ": expected an integer in [", lo, ", ", hi, "], got ", v);
  return v;
}

double json_number(const Json& value, const std::string& field, double lo, double hi) {
  if (!value.is_number()) wrong_kind(field, "a number", value);
  const double v = value.as_double();
  EMBER_CHECK(std::isfinite(v) && v >= lo && v <= hi, field, ": expected a finite number in [", lo, ", ", hi,
              "], got ", v);
  return v;
}

const std::string& json_string(const Json& value, const std::string& field) {
  if (!value.is_string()) wrong_kind(field, "a string", value);
  return value.as_string();
}

uint64_t json_u64_string(const Json& value, const std::string& field) {
  const std::string& s = json_string(value, field);
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  EMBER_CHECK(ec == std::errc() && end == s.data() + s.size() && !s.empty(), field,
              ": expected an unsigned 64-bit integer as a decimal string, got '", s, "'");
  return v;
}

}  // namespace ember
