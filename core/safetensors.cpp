#include "core/safetensors.h"

#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json.h"

namespace ember {

// Note [Byte order]: safetensors data is little-endian and ember copies it verbatim, which is
// only correct on little-endian hosts (every platform ember targets).
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

constexpr std::string_view kMetadataKey = "__metadata__";

struct DTypeName { DType dtype; std::string_view name; };
constexpr DTypeName kDTypeNames[] = {
    {DType::f32, "F32"}, {DType::f64, "F64"}, {DType::i64, "I64"}, {DType::i32, "I32"},
    {DType::u8, "U8"}, {DType::boolean, "BOOL"}, {DType::bf16, "BF16"}, {DType::f16, "F16"},
};

// Where one tensor's bytes lie in the data section.
struct TensorLayout {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

struct Header {
  std::map<std::string, std::string> metadata;
  std::vector<TensorLayout> tensors;  // sorted by offset, tiling the data section
};

// bytes = numel x dtype size; false when that overflows 64 bits.
bool checked_byte_size(const std::vector<int64_t>& shape, DType dtype, uint64_t& bytes) {
  uint64_t n = dtype_size(dtype);
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) n = 0;  // empty, whatever the other dims
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return false;
  bytes = n;
  return true;
}

uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void write_le64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

std::string range_str(uint64_t begin, uint64_t end) {
  // Appended piece by piece: "[" + std::string&& trips GCC 12's -Wrestrict false positive.
  std::string s = "[";
  s += std::to_string(begin);
  s += ", ";
  s += std::to_string(end);
  s += ")";
  return s;
}

// ---- reading ---------------------------------------------------------------------------

class HeaderParser {
 public:
  explicit HeaderParser(const std::string& what) : what_(what) {}

  Header parse(std::string_view text, uint64_t data_size) {
    const Json root = Json::parse(text, "safetensors '" + what_ + "': header");
    if (!root.is_object()) fail("expected the header to be a JSON object, got ", json_kind_name(root.kind()));
    Header header;
    for (const auto& [key, value] : root.as_object()) {
      if (key == kMetadataKey) header.metadata = parse_metadata(value);
      else header.tensors.push_back(parse_entry(key, value, data_size));
    }
    check_tiling(header.tensors, data_size);
    return header;
  }

 private:
  const std::string& what_;

  template <class... Args>
  [[noreturn]] void fail(const Args&... args) const {
    EMBER_FAIL("safetensors '", what_, "': ", args...);
  }

  std::map<std::string, std::string> parse_metadata(const Json& value) const {
    if (!value.is_object()) fail("expected \"__metadata__\" to be an object of strings, got ", json_kind_name(value.kind()));
    std::map<std::string, std::string> metadata;
    for (const auto& [key, v] : value.as_object()) {
      if (!v.is_string())
        fail("expected \"__metadata__\" values to be strings, got ", json_kind_name(v.kind()), " for key \"", key, "\"");
      metadata.emplace(key, v.as_string());
    }
    return metadata;
  }

  int64_t non_negative_int(const Json& v, const std::string& name, const char* field) const {
    if (!v.is_int() || v.as_int() < 0)
      fail("tensor '", name, "': expected ", field, " to be a list of non-negative integers, got ",
           v.is_int() ? std::to_string(v.as_int()) : std::string(json_kind_name(v.kind())), " in it");
    return v.as_int();
  }

  TensorLayout parse_entry(const std::string& name, const Json& entry, uint64_t data_size) const {
    if (!entry.is_object()) fail("tensor '", name, "': expected an object with dtype, shape and data_offsets, got ", json_kind_name(entry.kind()));
    for (const auto& [key, v] : entry.as_object())
      if (key != "dtype" && key != "shape" && key != "data_offsets")
        fail("tensor '", name, "': unexpected key \"", key, "\" (expected dtype, shape and data_offsets)");
    TensorLayout t;
    t.name = name;
    for (const char* key : {"dtype", "shape", "data_offsets"})
      if (!entry.find(key)) fail("tensor '", name, "': missing \"", key, "\"");

    const Json& dtype = entry.at("dtype");
    if (!dtype.is_string()) fail("tensor '", name, "': expected dtype to be a string, got ", json_kind_name(dtype.kind()));
    t.dtype = safetensors_dtype(dtype.as_string(), "safetensors '" + what_ + "': tensor '" + name + "'");

    const Json& shape = entry.at("shape");
    if (!shape.is_array()) fail("tensor '", name, "': expected shape to be a list of non-negative integers, got ", json_kind_name(shape.kind()));
    for (const Json& d : shape.as_array()) t.shape.push_back(non_negative_int(d, name, "shape"));

    const Json& offsets = entry.at("data_offsets");
    if (!offsets.is_array() || offsets.size() != 2)
      fail("tensor '", name, "': expected data_offsets to be a list [begin, end], got ",
           offsets.is_array() ? "a list of " + std::to_string(offsets.size()) : std::string(json_kind_name(offsets.kind())));
    t.begin = static_cast<uint64_t>(non_negative_int(offsets.as_array()[0], name, "data_offsets"));
    t.end = static_cast<uint64_t>(non_negative_int(offsets.as_array()[1], name, "data_offsets"));
    if (t.begin > t.end) fail("tensor '", name, "': data_offsets ", range_str(t.begin, t.end), " end before they begin");
    if (t.end > data_size)
      fail("tensor '", name, "': data_offsets ", range_str(t.begin, t.end), " exceed the data section of ", data_size, " bytes");

    uint64_t bytes = 0;
    if (!checked_byte_size(t.shape, t.dtype, bytes))
      fail("tensor '", name, "': shape ", shape_str(t.shape), " of ", safetensors_dtype_name(t.dtype), " overflows 64-bit byte counts");
    if (bytes != t.end - t.begin)
      fail("tensor '", name, "': shape ", shape_str(t.shape), " of ", safetensors_dtype_name(t.dtype), " needs ", bytes,
           " bytes, but data_offsets ", range_str(t.begin, t.end), " hold ", t.end - t.begin);
    return t;
  }

  // The tensors must cover [0, data_size) exactly once.
  void check_tiling(std::vector<TensorLayout>& tensors, uint64_t data_size) const {
    std::stable_sort(tensors.begin(), tensors.end(), [](const TensorLayout& a, const TensorLayout& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    uint64_t covered = 0;
    const TensorLayout* previous = nullptr;
    for (const TensorLayout& t : tensors) {
      if (t.begin > covered)
        fail("data bytes ", range_str(covered, t.begin), " belong to no tensor (a gap before tensor '", t.name, "')");
      if (t.begin < covered)
        fail("tensor '", t.name, "' at ", range_str(t.begin, t.end), " overlaps tensor '", previous->name, "' at ",
             range_str(previous->begin, previous->end));
      covered = t.end;
      previous = &t;
    }
    if (covered != data_size)
      fail("data bytes ", range_str(covered, data_size), " at the end belong to no tensor");
  }
};

// BOOL bytes other than 0 and 1 would be undefined behaviour once read as C++ bool.
void check_bool_bytes(const SafetensorsTensor& t, const std::string& what) {
  if (t.dtype != DType::boolean) return;
  for (size_t i = 0; i < t.bytes.size(); ++i)
    EMBER_CHECK(t.bytes[i] <= 1, "safetensors '", what, "': tensor '", t.name, "' (BOOL) holds byte ",
                int(t.bytes[i]), " at element ", i, "; expected 0 or 1");
}

SafetensorsTensor tensor_from(TensorLayout&& layout) {
  SafetensorsTensor t;
  t.name = std::move(layout.name);
  t.dtype = layout.dtype;
  t.shape = std::move(layout.shape);
  t.bytes.resize(layout.end - layout.begin);
  return t;
}

// The header length from the 8-byte prefix, checked against the bytes that follow it.
uint64_t checked_header_length(const uint8_t* prefix, uint64_t total_size, const std::string& what) {
  EMBER_CHECK(total_size >= 8, "safetensors '", what, "': expected at least 8 bytes (the header length), got ", total_size);
  const uint64_t header_size = read_le64(prefix);
  EMBER_CHECK(header_size <= total_size - 8, "safetensors '", what, "': header length ", header_size,
              " exceeds the ", total_size - 8, " bytes after the 8-byte length prefix");
  return header_size;
}

struct FileCloser { void operator()(std::FILE* f) const { std::fclose(f); } };

}  // namespace

// ---- public API ----------------------------------------------------------------------

std::string_view safetensors_dtype_name(DType dtype) {
  for (const DTypeName& d : kDTypeNames)
    if (d.dtype == dtype) return d.name;
  EMBER_FAIL("safetensors: no name for dtype ", dtype_name(dtype));
}

DType safetensors_dtype(std::string_view name, std::string_view what) {
  for (const DTypeName& d : kDTypeNames)
    if (d.name == name) return d.dtype;
  EMBER_FAIL(what, ": unsupported dtype \"", name, "\" (ember reads F32, F64, I64, I32, U8, BOOL, BF16, F16)");
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  for (const SafetensorsTensor& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

SafetensorsFile parse_safetensors(const uint8_t* data, size_t size, const std::string& what) {
  const uint64_t header_size = checked_header_length(data, size, what);
  const uint64_t data_size = size - 8 - header_size;
  const uint8_t* section = data + 8 + header_size;
  Header header = HeaderParser(what).parse({reinterpret_cast<const char*>(data + 8), header_size}, data_size);
  SafetensorsFile file;
  file.metadata = std::move(header.metadata);
  for (TensorLayout& layout : header.tensors) {
    const uint64_t begin = layout.begin;
    SafetensorsTensor t = tensor_from(std::move(layout));
    if (!t.bytes.empty()) std::memcpy(t.bytes.data(), section + begin, t.bytes.size());
    check_bool_bytes(t, what);
    file.tensors.push_back(std::move(t));
  }
  return file;
}

SafetensorsFile read_safetensors(const std::string& path) {
  // A FIFO or device would block or never end; only regular files (after symlinks) are read.
  struct stat st {};
  EMBER_CHECK(::stat(path.c_str(), &st) == 0, "safetensors '", path, "': cannot open the file: ", std::strerror(errno));
  EMBER_CHECK(S_ISREG(st.st_mode), "safetensors '", path, "': expected a regular file, got ",
              S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : "a device or special file");
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  EMBER_CHECK(f, "safetensors '", path, "': cannot open the file: ", std::strerror(errno));
  EMBER_CHECK(std::fseek(f.get(), 0, SEEK_END) == 0, "safetensors '", path, "': cannot seek: ", std::strerror(errno));
  const long end = std::ftell(f.get());
  EMBER_CHECK(end >= 0, "safetensors '", path, "': cannot tell the file size: ", std::strerror(errno));
  std::rewind(f.get());
  const uint64_t file_size = static_cast<uint64_t>(end);
  auto read_exactly = [&](void* out, size_t n) {
    EMBER_CHECK(std::fread(out, 1, n, f.get()) == n, "safetensors '", path, "': short read (",
                n, " bytes wanted); was the file changed while being read?");
  };

  uint8_t prefix[8] = {};
  if (file_size >= 8) read_exactly(prefix, 8);
  const uint64_t header_size = checked_header_length(prefix, file_size, path);
  std::string text(header_size, '\0');
  read_exactly(text.data(), text.size());
  Header header = HeaderParser(path).parse(text, file_size - 8 - header_size);

  SafetensorsFile file;
  file.metadata = std::move(header.metadata);
  // The layouts tile the data section in order, so one sequential pass reads them all.
  for (TensorLayout& layout : header.tensors) {
    SafetensorsTensor t = tensor_from(std::move(layout));
    read_exactly(t.bytes.data(), t.bytes.size());
    check_bool_bytes(t, path);
    file.tensors.push_back(std::move(t));
  }
  return file;
}

// ---- writing ---------------------------------------------------------------------------

namespace {

// The length prefix plus the space-padded JSON header; fills in each entry's byte count.
std::vector<uint8_t> header_bytes(const std::vector<SafetensorsEntry>& tensors,
                                  const std::map<std::string, std::string>& metadata,
                                  std::vector<uint64_t>& sizes) {
  Json root = Json::object();
  if (!metadata.empty()) {
    Json meta = Json::object();
    for (const auto& [k, v] : metadata) meta.set(k, v);
    root.set(std::string(kMetadataKey), std::move(meta));
  }
  std::set<std::string_view> names;
  uint64_t offset = 0;
  sizes.clear();
  for (const SafetensorsEntry& e : tensors) {
    EMBER_CHECK(e.name != kMetadataKey, "write_safetensors: the tensor name \"__metadata__\" is reserved");
    EMBER_CHECK(names.insert(e.name).second, "write_safetensors: duplicate tensor name '", e.name, "'");
    Json shape = Json::array();
    for (int64_t d : e.shape) {
      EMBER_CHECK(d >= 0, "write_safetensors: tensor '", e.name, "': expected non-negative dims, got shape ", shape_str(e.shape));
      shape.push_back(d);
    }
    uint64_t bytes = 0;
    EMBER_CHECK(checked_byte_size(e.shape, e.dtype, bytes), "write_safetensors: tensor '", e.name, "': shape ",
                shape_str(e.shape), " overflows 64-bit byte counts");
    EMBER_CHECK(bytes == 0 || e.data, "write_safetensors: tensor '", e.name, "' has ", bytes, " bytes but no data pointer");
    Json entry = Json::object();
    entry.set("dtype", safetensors_dtype_name(e.dtype));
    entry.set("shape", std::move(shape));
    EMBER_CHECK(bytes <= uint64_t(INT64_MAX) - offset, "write_safetensors: the tensors hold more than 2^63 bytes");
    entry.set("data_offsets", Json::array({Json(static_cast<int64_t>(offset)), Json(static_cast<int64_t>(offset + bytes))}));
    root.set(e.name, std::move(entry));
    offset += bytes;
    sizes.push_back(bytes);
  }
  std::string text = root.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned
  std::vector<uint8_t> out(8 + text.size());
  write_le64(out.data(), text.size());
  std::memcpy(out.data() + 8, text.data(), text.size());
  return out;
}

}  // namespace

void write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<uint64_t> sizes;
  const std::vector<uint8_t> header = header_bytes(tensors, metadata, sizes);
  AtomicFile out(path);
  out.write(header.data(), header.size());
  for (size_t i = 0; i < tensors.size(); ++i)
    if (sizes[i]) out.write(tensors[i].data, sizes[i]);
  out.commit();
}

std::vector<uint8_t> serialize_safetensors(const std::vector<SafetensorsEntry>& tensors,
                                           const std::map<std::string, std::string>& metadata) {
  std::vector<uint64_t> sizes;
  std::vector<uint8_t> out = header_bytes(tensors, metadata, sizes);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto* p = static_cast<const uint8_t*>(tensors[i].data);
    if (sizes[i]) out.insert(out.end(), p, p + sizes[i]);
  }
  return out;
}

}  // namespace ember
