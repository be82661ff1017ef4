#include <catch2/catch.hpp>

#include <string>

#include "core/error.h"
#include "core/json.h"
#include "support/test_support.h"

using namespace ember;

TEST_CASE("json: parses every kind of value") {
  const Json j = Json::parse(R"( {"n": null, "t": true, "f": false, "i": -42, "big": 9223372036854775807,
                                   "d": 2.5, "e": -1.5e3, "s": "hi", "a": [1, [2, {}], []], "o": {"x": 1}} )");
  REQUIRE(j.is_object());
  CHECK(j.size() == 10);
  CHECK(j.at("n").is_null());
  CHECK(j.at("t").as_bool() == true);
  CHECK(j.at("f").as_bool() == false);
  CHECK(j.at("i").as_int() == -42);
  CHECK(j.at("big").as_int() == INT64_MAX);
  CHECK(j.at("d").kind() == Json::Kind::real);
  CHECK(j.at("d").as_double() == 2.5);
  CHECK(j.at("e").as_double() == -1500.0);
  CHECK(j.at("i").as_double() == -42.0);  // integers read as doubles too
  CHECK(j.at("s").as_string() == "hi");
  const Json::Array& a = j.at("a").as_array();
  REQUIRE(a.size() == 3);
  CHECK(a[1].as_array()[1].as_object().empty());
  CHECK(j.at("o").at("x").as_int() == 1);
  CHECK(j.find("missing") == nullptr);
}

TEST_CASE("json: objects keep key order through parse and dump") {
  const std::string text = R"({"zeta":1,"alpha":[true,null],"mid":{"b":"x","a":0.5}})";
  const Json j = Json::parse(text);
  CHECK(j.as_object()[0].first == "zeta");
  CHECK(j.as_object()[1].first == "alpha");
  CHECK(j.dump() == text);
  CHECK(Json::parse(j.dump(2)) == j);
}

TEST_CASE("json: building values and set() semantics") {
  Json o = Json::object();
  o.set("b", 1);
  o.set("a", "text");
  o.set("b", Json::array({Json(1), Json(2.0)}));  // replaces in place, keeps position
  CHECK(o.dump() == R"({"b":[1,2.0],"a":"text"})");
  CHECK(o.dump(1) == "{\n \"b\": [\n  1,\n  2.0\n ],\n \"a\": \"text\"\n}");
  Json a = Json::array();
  a.push_back(Json());
  CHECK(a.dump() == "[null]");
  CHECK(Json::array().dump(2) == "[]");
  CHECK(Json::object().dump(2) == "{}");
}

TEST_CASE("json: doubles round-trip and stay doubles") {
  for (double v : {0.1, -2.0, 1e300, 5e-324, 123456789.125, 3.0}) {
    const Json back = Json::parse(Json(v).dump());
    CHECK(back.kind() == Json::Kind::real);
    CHECK(back.as_double() == v);
  }
  CHECK(Json(3.0).dump() == "3.0");
  CHECK(Json(1e300).dump() == "1e+300");
  CHECK_THROWS_WITH(Json(std::nan("")).dump(), Catch::Contains("non-finite"));
  CHECK_THROWS_WITH(Json(1.0 / 0.0).dump(), Catch::Contains("non-finite"));
}

TEST_CASE("json: string escapes, unicode escapes with surrogate pairs, and UTF-8") {
  CHECK(Json::parse(R"("a\"b\\c\/d\b\f\n\r\t")").as_string() == "a\"b\\c/d\b\f\n\r\t");
  CHECK(Json::parse(R"("\u0041\u00e9\u20AC")").as_string() == "A\xC3\xA9\xE2\x82\xAC");
  CHECK(Json::parse(R"("\ud83d\ude00")").as_string() == "\xF0\x9F\x98\x80");  // U+1F600
  CHECK(Json::parse("\"caf\xC3\xA9\"").as_string() == "caf\xC3\xA9");           // raw UTF-8
  // The writer escapes what must be escaped and round-trips everything else.
  const std::string tricky = std::string("q\"b\\n\nt\t\x01 \xE2\x82\xAC", 13);
  CHECK(Json(tricky).dump() == "\"q\\\"b\\\\n\\nt\\t\\u0001 \xE2\x82\xAC\"");
  CHECK(Json::parse(Json(tricky).dump()).as_string() == tricky);
}

TEST_CASE("json: numbers at the edges") {
  CHECK(Json::parse("-9223372036854775808").as_int() == INT64_MIN);
  CHECK(Json::parse("0").as_int() == 0);
  CHECK(Json::parse("-0").as_int() == 0);
  CHECK(Json::parse("1e-400").as_double() == 0.0);  // underflow gives zero
  CHECK(Json::parse("0.000001e-320").as_double() == 0.0);
  CHECK_THROWS_WITH(Json::parse("9223372036854775808"),
                    "JSON: invalid JSON at byte 0: integer 9223372036854775808 does not fit in 64 bits");
  CHECK_THROWS_WITH(Json::parse("[1, -99999999999999999999999]"), Catch::Contains("at byte 4: integer"));
  CHECK_THROWS_WITH(Json::parse("1e400"), Catch::Contains("number 1e400 is out of the range of a double"));
  CHECK_THROWS_WITH(Json::parse("-123456789e99999999999999999999"), Catch::Contains("out of the range"));
  CHECK(Json::parse("1e-99999999999999999999").as_double() == 0.0);
}

TEST_CASE("json: malformed input names the problem and the byte offset") {
  struct Case { const char* text; const char* message; };
  const Case cases[] = {
      {"", "at byte 0: expected a JSON value, got end of input"},
      {"   ", "at byte 3: expected a JSON value, got end of input"},
      {"{\"a\": 1", "at byte 7: expected ',' or '}' in an object, got end of input"},  // truncated
      {"[1, 2", "at byte 5: expected ',' or ']' in an array, got end of input"},
      {"\"abc", "at byte 0: unterminated string"},
      {"{\"a\": 1} x", "at byte 9: expected end of input after the JSON value, got 'x'"},  // trailing garbage
      {"[1] [2]", "at byte 4: expected end of input"},
      {"{\"a\": 1, \"a\": 2}", "at byte 9: duplicate key \"a\" in an object"},
      {"\"\\x\"", "at byte 1: invalid escape"},
      {"\"\\u12G4\"", "at byte 5: expected a hex digit in a \\u escape, got 'G'"},
      {"\"\\u12\"", "truncated \\u escape"},
      {"\"\\u12", "truncated \\u escape"},
      {"\"\\udc00\"", "at byte 1: lone low surrogate"},
      {"\"\\ud800x\"", "at byte 1: high surrogate not followed"},
      {"\"\\ud800\\u0041\"", "high surrogate not followed"},
      {"\"a\nb\"", "at byte 2: control character in a string"},
      {"\"\xC3\"", "invalid UTF-8"},
      {"\"\xC0\xAF\"", "invalid UTF-8"},          // overlong '/'
      {"\"\xED\xA0\x80\"", "invalid UTF-8"},      // encoded surrogate
      {"\"\xE2\x82\"", "invalid UTF-8"},
      {"[1,]", "at byte 3: expected a JSON value, got ']'"},  // trailing comma
      {"{\"a\":1,}", "at byte 7: expected a string key in an object, got '}'"},
      {"{a: 1}", "at byte 1: expected a string key"},
      {"{\"a\" 1}", "at byte 5: expected ':', got '1'"},
      {"01", "at byte 0: leading zero"},
      {"-", "at byte 1: expected a digit in a number, got end of input"},
      {"+1", "at byte 0: expected a JSON value, got '+'"},
      {"1.", "expected a digit after '.'"},
      {".5", "expected a JSON value, got '.'"},
      {"1e", "expected a digit in the exponent"},
      {"NaN", "expected a JSON value, got 'N'"},
      {"tru", "at byte 0: expected a JSON value, got 't'"},
      {"nul", "expected a JSON value"},
      {"// comment\n1", "got '/'"},
      {"\x01", "got byte 0x01"},
  };
  for (const Case& c : cases) {
    INFO("input: " << c.text);
    CHECK_THROWS_AS(Json::parse(c.text), Error);
    CHECK_THROWS_WITH(Json::parse(c.text), Catch::Contains(c.message));
  }
  CHECK_THROWS_WITH(Json::parse("[1,", "header of 'x.safetensors'"),
                    Catch::StartsWith("header of 'x.safetensors': invalid JSON at byte 3"));
}

TEST_CASE("json: nesting depth is limited") {
  const std::string ok = std::string(128, '[') + std::string(128, ']');
  CHECK(Json::parse(ok).is_array());
  const std::string deep = std::string(129, '[') + std::string(129, ']');
  CHECK_THROWS_WITH(Json::parse(deep), Catch::Contains("at byte 128: nesting deeper than the limit of 128 levels"));
  // Far deeper than the stack would allow without the limit: still a clean error.
  const std::string very_deep(1'000'000, '[');
  CHECK_THROWS_WITH(Json::parse(very_deep), Catch::Contains("nesting deeper"));
  std::string objects;
  for (int i = 0; i < 10; ++i) objects += "{\"k\":";
  CHECK_THROWS_WITH(Json::parse(objects + "1" + std::string(10, '}'), "cfg", 5), Catch::Contains("limit of 5 levels"));
}

TEST_CASE("json: wrong-kind access throws") {
  const Json j = Json::parse(R"({"s": "x", "a": [1]})");
  CHECK_THROWS_WITH(j.at("s").as_int(), "json: expected an integer, got a string");
  CHECK_THROWS_WITH(j.at("a").as_object(), "json: expected an object, got an array");
  CHECK_THROWS_WITH(j.at("zz"), "json: object has no key \"zz\"");
  CHECK_THROWS_WITH(Json(2.5).as_int(), "json: expected an integer, got a number");
  CHECK_THROWS_WITH(Json().size(), "json: expected an array or an object, got null");
  Json s("text");
  CHECK_THROWS_AS(s.set("k", 1), Error);
  CHECK_THROWS_AS(s.push_back(1), Error);
}
