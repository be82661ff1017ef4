// The safetensors format at the raw-bytes level: names, dtypes, shapes and little-endian
// bytes (tensors are built on top of this elsewhere).
//
//   float w[6] = {...};
//   write_safetensors("model.safetensors", {{"fc.weight", DType::f32, {2, 3}, w}},
//                     {{"format", "ember"}});
//   SafetensorsFile file = read_safetensors("model.safetensors");
//   const SafetensorsTensor* t = file.find("fc.weight");   // t->dtype, t->shape, t->bytes
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON header
//   {"__metadata__": {"k": "v"}, "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, ...}
// (padded with spaces), then the data section; offsets are relative to its start.
//
// Note [Strict safetensors]: loading validates everything and throws an ember::Error that
// names the file and the problem: the header length, the JSON (see core/json.h), every
// entry's keys, dtype, shape and offsets; the tensors must tile the data section exactly
// (no overlap, no gap, no trailing bytes) and each one's size must equal numel x dtype size,
// all in overflow-checked arithmetic. Dtypes ember has no type for (I8, U16, F8_E4M3, ...)
// are rejected by name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace ember {

struct SafetensorsTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // little-endian, row-major, numel x dtype_size(dtype)
};

struct SafetensorsFile {
  std::map<std::string, std::string> metadata;
  std::vector<SafetensorsTensor> tensors;  // in data-offset order
  const SafetensorsTensor* find(const std::string& name) const;  // nullptr when absent
};

SafetensorsFile read_safetensors(const std::string& path);
// `what` names the source in errors (a file name, "checkpoint buffer").
SafetensorsFile parse_safetensors(const uint8_t* data, size_t size, const std::string& what);

// Non-owning view of one tensor to write: numel(shape) x dtype_size(dtype) bytes at `data`.
struct SafetensorsEntry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const void* data;
};

// Writes atomically (see core/atomic_file.h); tensors are stored in the given order.
void write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& tensors,
                       const std::map<std::string, std::string>& metadata = {});
// The same bytes in memory.
std::vector<uint8_t> serialize_safetensors(const std::vector<SafetensorsEntry>& tensors,
                                           const std::map<std::string, std::string>& metadata = {});

// "F32" <-> DType::f32, ...; safetensors_dtype throws for names ember does not support.
std::string_view safetensors_dtype_name(DType dtype);
DType safetensors_dtype(std::string_view name, std::string_view what);

}  // namespace ember
