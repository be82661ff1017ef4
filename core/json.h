// A small, strict JSON value with a parser and a writer: safetensors headers, run
// configurations in checkpoints.
//
//   Json config = Json::parse(text, "run.json");        // throws ember::Error with the byte offset
//   int64_t epochs = config.at("epochs").as_int();
//   if (const Json* lr = config.find("lr")) use(lr->as_double());
//
//   Json out = Json::object();
//   out.set("model", "mnist_mlp");
//   out.set("shape", Json::array({Json(3), Json(4)}));
//   std::string text = out.dump();                       // {"model":"mnist_mlp","shape":[3,4]}
//
// Note [Strict JSON]: the parser accepts RFC 8259 JSON and nothing else: no comments, no
// trailing commas, no NaN/Infinity, no leading zeros, no lone surrogates, no invalid UTF-8,
// no duplicate keys (which value wins is undefined across parsers, so a file that has them is
// ambiguous), no trailing garbage after the value, nesting at most `max_depth` deep. Objects
// keep their key order, so dump(parse(text)) preserves the order a file was written in.
// Numbers without fraction or exponent are int64 (an integer literal outside int64 is an
// error rather than a silently rounded double); the others are double (overflow to infinity
// is an error, underflow gives 0).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace ember {

class Json {
 public:
  enum class Kind : uint8_t { null, boolean, integer, real, string, array, object };
  using Array = std::vector<Json>;
  using Member = std::pair<std::string, Json>;
  using Object = std::vector<Member>;  // in insertion (file) order, keys unique

  Json() = default;  // null
  Json(std::nullptr_t) {}
  Json(bool value) : value_(value) {}
  Json(int value) : value_(int64_t{value}) {}
  Json(int64_t value) : value_(value) {}
  Json(double value) : value_(value) {}
  Json(const char* value) : value_(std::string(value)) {}
  Json(std::string value) : value_(std::move(value)) {}
  Json(std::string_view value) : value_(std::string(value)) {}
  static Json array(Array items = {}) { Json j; j.value_ = std::move(items); return j; }
  static Json object() { Json j; j.value_ = Object{}; return j; }

  Kind kind() const { return static_cast<Kind>(value_.index()); }
  bool is_null() const { return kind() == Kind::null; }
  bool is_bool() const { return kind() == Kind::boolean; }
  bool is_int() const { return kind() == Kind::integer; }
  bool is_number() const { return kind() == Kind::integer || kind() == Kind::real; }
  bool is_string() const { return kind() == Kind::string; }
  bool is_array() const { return kind() == Kind::array; }
  bool is_object() const { return kind() == Kind::object; }

  // Typed access; a wrong kind throws ember::Error ("expected a string, got an array").
  bool as_bool() const;
  int64_t as_int() const;
  double as_double() const;  // integer or real
  const std::string& as_string() const;
  const Array& as_array() const;
  const Object& as_object() const;

  // Objects: lookup by key (linear: objects here are small), insertion that keeps order.
  const Json* find(std::string_view key) const;  // nullptr when absent
  const Json& at(std::string_view key) const;    // throws when absent
  void set(std::string key, Json value);          // replaces in place or appends
  // Arrays: append.
  void push_back(Json value);
  size_t size() const;  // elements of an array or members of an object

  // Text: compact when indent < 0, else pretty-printed with `indent` spaces per level.
  // Non-finite doubles cannot be written as JSON and throw.
  std::string dump(int indent = -1) const;

  // Parses one complete JSON text. `what` names the source in error messages
  // ("safetensors header of 'model.safetensors'").
  static Json parse(std::string_view text, std::string_view what = "JSON", int max_depth = 128);

  friend bool operator==(const Json& a, const Json& b) { return a.value_ == b.value_; }

 private:
  std::variant<std::nullptr_t, bool, int64_t, double, std::string, Array, Object> value_;
};

// "null", "a boolean", "an integer", "a number", "a string", "an array", "an object".
std::string_view json_kind_name(Json::Kind kind);

}  // namespace ember
