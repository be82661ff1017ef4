// Reading values out of JSON a user can edit (checkpoint metadata, configs): every accessor
// checks presence, kind and range, and its Error names the source, the field and what was
// expected, so no malformed file ends in std::out_of_range or std::invalid_argument.
//
//   const std::string where = "checkpoint 'run.safetensors' progress";
//   int64_t epoch = json_int(json_field(progress, "epoch", where), where + ".epoch", 0, INT64_MAX);
//   uint64_t seed = json_u64_string(json_field(rng, "seed", where), where + ".seed");
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "core/json.h"

namespace ember {

// object[key]; `object` not an object or `key` absent is an Error naming `where`.
const Json& json_field(const Json& object, std::string_view key, const std::string& where);
// The members of an object; anything else is an Error naming `field`.
const Json::Object& json_object(const Json& value, const std::string& field);

// An integer in [lo, hi].
int64_t json_int(const Json& value, const std::string& field, int64_t lo = std::numeric_limits<int64_t>::min(),
                 int64_t hi = std::numeric_limits<int64_t>::max());
// A finite number (integer or real) in [lo, hi].
double json_number(const Json& value, const std::string& field, double lo, double hi);
const std::string& json_string(const Json& value, const std::string& field);
// An unsigned 64-bit integer written as a decimal string (JSON integers are int64 here).
uint64_t json_u64_string(const Json& value, const std::string& field);

}  // namespace ember
