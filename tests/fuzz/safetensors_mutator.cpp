// Structure-aware mutator for fuzz_safetensors (libFuzzer binary only).
//
// Note [Safetensors mutator]: byte-level mutations almost never keep the 8-byte length prefix
// equal to the header's length and the header valid JSON, so plain libFuzzer spends its time
// in the JSON parser's error paths and rarely reaches the checks that follow (keys, dtype,
// shape, data_offsets, tiling, BOOL bytes, __metadata__). This mutator parses the header with
// ember's own JSON reader, changes one thing in it and writes it back with a correct length
// prefix, so every mutated input reaches the metadata checks:
//   - one JSON value anywhere in the header becomes an interesting integer (0, -1, 2^31,
//     2^32, INT64_MAX, INT64_MIN, the payload size +-1), a dtype name (supported or not), a
//     value of the wrong kind, an array grown or shrunk by one, an object missing a member or
//     with an extra one;
//   - a duplicate key is appended to the top-level object (only expressible in text);
//   - the data_offsets are recomputed from the shapes, and the payload resized to match, so a
//     mutated shape or dtype yields a file whose tiling is right and that loads (or fails in
//     the checks after tiling);
//   - or the payload bytes get libFuzzer's own mutations.
// Inputs that are not a length prefix plus a JSON object, and one mutation in eight anyway,
// get libFuzzer's byte-level mutations (LLVMFuzzerMutate), which keep the framing paths
// covered.
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/json.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

using ember::Json;
using Rng = std::minstd_rand;

struct Parsed {
  Json header;                   // the top-level JSON object
  std::vector<uint8_t> payload;  // the data section
};

uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::optional<Parsed> parse(const uint8_t* data, size_t size) {
  if (size < 8) return std::nullopt;
  const uint64_t n = read_le64(data);
  if (n > size - 8) return std::nullopt;
  try {
    Json header = Json::parse({reinterpret_cast<const char*>(data + 8), n}, "mutator");
    if (!header.is_object()) return std::nullopt;
    return Parsed{std::move(header), std::vector<uint8_t>(data + 8 + n, data + size)};
  } catch (const ember::Error&) {
    return std::nullopt;
  }
}

// Prefix + header text + payload into data, or 0 when it does not fit max_size.
size_t write(const std::string& text, const std::vector<uint8_t>& payload, uint8_t* data, size_t max_size) {
  const size_t size = 8 + text.size() + payload.size();
  if (size > max_size) return 0;
  for (int i = 0; i < 8; ++i) data[i] = static_cast<uint8_t>(uint64_t{text.size()} >> (8 * i));
  std::memcpy(data + 8, text.data(), text.size());
  if (!payload.empty()) std::memcpy(data + 8 + text.size(), payload.data(), payload.size());
  return size;
}

template <class T>
const T& pick(const std::vector<T>& items, Rng& rng) {
  return items[std::uniform_int_distribution<size_t>(0, items.size() - 1)(rng)];
}

Json interesting_int(const Parsed& p, Rng& rng) {
  const int64_t payload = static_cast<int64_t>(p.payload.size());
  const std::vector<int64_t> values = {0, 1, -1, 2, 3, 4, 8, 255, int64_t{1} << 31, int64_t{1} << 32,
                                       (int64_t{1} << 62) + 1, std::numeric_limits<int64_t>::max(),
                                       std::numeric_limits<int64_t>::min(), payload, payload - 1, payload + 1};
  return Json(pick(values, rng));
}

Json mutate_value(const Json& v, const Parsed& p, Rng& rng) {
  static const std::vector<std::string> dtypes = {"F32", "F64", "I64", "I32", "U8", "BOOL", "BF16", "F16",
                                                  "I8", "U16", "F8_E4M3", "f32", ""};
  static const std::vector<std::string> keys = {"dtype", "shape", "data_offsets", "__metadata__", "extra"};
  switch (std::uniform_int_distribution<int>(0, 6)(rng)) {
    case 0: case 1: return interesting_int(p, rng);
    case 2: return Json(pick(dtypes, rng));
    case 3: {  // a value of another kind
      const std::vector<Json> others = {Json(), Json(true), Json(1.5), Json("0"), Json::array(), Json::object()};
      return pick(others, rng);
    }
    case 4:  // a list one longer or shorter
      if (v.is_array()) {
        Json out = Json::array();
        const Json::Array& items = v.as_array();
        const bool grow = items.empty() || rng() % 2;
        for (size_t i = 0; i + (grow ? 0 : 1) < items.size(); ++i) out.push_back(items[i]);
        if (grow) out.push_back(interesting_int(p, rng));
        return out;
      }
      return interesting_int(p, rng);
    case 5:  // an object missing a member, or with an extra one
      if (v.is_object() && v.size() > 0 && rng() % 2) {
        const size_t drop = rng() % v.size();
        Json out = Json::object();
        for (size_t i = 0; i < v.size(); ++i)
          if (i != drop) out.set(v.as_object()[i].first, v.as_object()[i].second);
        return out;
      }
      if (v.is_object()) {
        Json out = v;
        out.set(pick(keys, rng), rng() % 2 ? Json("x") : interesting_int(p, rng));
        return out;
      }
      return Json::object();
    default:  // a short random string (a name, a metadata value)
      return Json(std::string(rng() % 4, 'a' + static_cast<char>(rng() % 26)));
  }
}

size_t count_nodes(const Json& v) {
  size_t n = 1;
  if (v.is_array())
    for (const Json& e : v.as_array()) n += count_nodes(e);
  if (v.is_object())
    for (const auto& m : v.as_object()) n += count_nodes(m.second);
  return n;
}

// A copy of `v` whose node number `target` (pre-order, counted by `seen`) is mutated.
Json with_mutated_node(const Json& v, size_t target, size_t& seen, const Parsed& p, Rng& rng) {
  if (seen++ == target) return mutate_value(v, p, rng);
  if (v.is_array()) {
    Json out = Json::array();
    for (const Json& e : v.as_array()) out.push_back(with_mutated_node(e, target, seen, p, rng));
    return out;
  }
  if (v.is_object()) {
    Json out = Json::object();
    for (const auto& [k, e] : v.as_object()) out.set(k, with_mutated_node(e, target, seen, p, rng));
    return out;
  }
  return v;
}

// data_offsets laid end to end in header order from each entry's dtype and shape (entries
// whose dtype or shape is unusable keep theirs); the payload is resized to the total.
void retile(Parsed& p) {
  static const std::vector<std::pair<std::string, uint64_t>> sizes = {
      {"F32", 4}, {"F64", 8}, {"I64", 8}, {"I32", 4}, {"U8", 1}, {"BOOL", 1}, {"BF16", 2}, {"F16", 2}};
  uint64_t offset = 0;
  Json out = Json::object();
  for (const auto& [name, entry] : p.header.as_object()) {
    Json fixed = entry;
    const Json* dtype = entry.is_object() ? entry.find("dtype") : nullptr;
    const Json* shape = entry.is_object() ? entry.find("shape") : nullptr;
    uint64_t bytes = 0;
    for (const auto& [dname, dsize] : sizes)
      if (dtype && dtype->is_string() && dtype->as_string() == dname) bytes = dsize;
    if (bytes && shape && shape->is_array()) {
      for (const Json& d : shape->as_array())
        if (!d.is_int() || d.as_int() < 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(d.as_int()), &bytes))
          bytes = 1ull << 40;  // unusable: larger than any input, caught below
      if (bytes < (1u << 20)) {
        fixed.set("data_offsets", Json::array({Json(static_cast<int64_t>(offset)), Json(static_cast<int64_t>(offset + bytes))}));
        offset += bytes;
      }
    }
    out.set(name, std::move(fixed));
  }
  p.header = std::move(out);
  p.payload.resize(offset, 1);  // BOOL-safe filler for new bytes
}

// The header text with one top-level member repeated (a duplicate key).
std::string with_duplicate_key(const Json& header, Rng& rng) {
  std::string text = header.dump();
  if (header.size() == 0) return text;
  const Json::Member& m = header.as_object()[rng() % header.size()];
  text.pop_back();  // '}'
  return text + "," + Json(m.first).dump() + ":" + m.second.dump() + "}";
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  Rng rng(seed);
  std::optional<Parsed> parsed = parse(data, size);
  if (!parsed || rng() % 8 == 0) return LLVMFuzzerMutate(data, size, max_size);
  Parsed& p = *parsed;
  const int choice = std::uniform_int_distribution<int>(0, 9)(rng);
  if (choice == 0 && !p.payload.empty()) {  // payload bytes only
    const size_t header_end = size - p.payload.size();
    return header_end + LLVMFuzzerMutate(data + header_end, p.payload.size(), max_size - header_end);
  }
  std::string text;
  if (choice == 1) {
    text = with_duplicate_key(p.header, rng);
  } else {
    size_t seen = 0;
    p.header = with_mutated_node(p.header, rng() % count_nodes(p.header), seen, p, rng);
    if (!p.header.is_object()) return LLVMFuzzerMutate(data, size, max_size);
    if (choice >= 7) retile(p);
    text = p.header.dump();
  }
  if (rng() % 4 == 0) text.append(rng() % 8, ' ');  // the padding writers add
  const size_t written = write(text, p.payload, data, max_size);
  return written ? written : LLVMFuzzerMutate(data, size, max_size);
}
