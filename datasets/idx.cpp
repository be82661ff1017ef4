#include "datasets/idx.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <span>

#include "core/error.h"

namespace ember {

namespace {

constexpr uint8_t kUnsignedByte = 0x08;

// Names of the element types the IDX format defines, for the "unsupported" message.
const char* idx_type_name(uint8_t type) {
  switch (type) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "i16";
    case 0x0C: return "i32";
    case 0x0D: return "f32";
    case 0x0E: return "f64";
    default: return nullptr;
  }
}

std::string hex_byte(uint8_t b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", b);
  return buf;
}

bool is_gzip(std::span<const uint8_t> file) { return file.size() >= 2 && file[0] == 0x1f && file[1] == 0x8b; }

// Inflates a gzip file held in memory a piece at a time (zlib's inflate with the gzip
// wrapper, which checks each member's CRC and length at its end). Members that follow one
// another read as one stream, as with gzip -d; bytes after the last member that do not start
// another one are corrupt data, not ignored.
class GzipReader {
 public:
  GzipReader(std::span<const uint8_t> file, const std::string& what) : unfed_(file), what_(what) {
    EMBER_CHECK(inflateInit2(&zs_, 16 + MAX_WBITS) == Z_OK, "read_idx '", what, "': cannot start zlib's inflate");
  }
  ~GzipReader() { inflateEnd(&zs_); }
  GzipReader(const GzipReader&) = delete;
  GzipReader& operator=(const GzipReader&) = delete;

  // Appends up to `n` more bytes to `out`, growing it as data arrives (never by more than a
  // chunk beyond what was read); fewer only at the end of the data.
  void read_up_to(std::vector<uint8_t>& out, uint64_t n) {
    constexpr uint64_t kChunk = 1 << 20;
    while (n > 0 && !ended_) {
      const auto want = static_cast<uInt>(std::min(n, kChunk));
      const size_t old_size = out.size();
      out.resize(old_size + want);
      zs_.next_out = out.data() + old_size;
      zs_.avail_out = want;
      inflate_some();
      const uInt got = want - zs_.avail_out;
      out.resize(old_size + got);
      n -= got;
    }
  }

 private:
  z_stream zs_{};
  std::span<const uint8_t> unfed_;  // input not yet handed to zlib (avail_in is 32-bit)
  const std::string& what_;
  bool ended_ = false;

  // Byte i of the input zlib has not consumed yet, or -1 past its end.
  int peek(size_t i) const {
    if (i < zs_.avail_in) return zs_.next_in[i];
    i -= zs_.avail_in;
    return i < unfed_.size() ? unfed_[i] : -1;
  }

  void feed() {
    if (zs_.avail_in > 0 || unfed_.empty()) return;
    const size_t n = std::min<size_t>(unfed_.size(), size_t{1} << 30);
    zs_.next_in = const_cast<Bytef*>(unfed_.data());  // zlib does not write to its input
    zs_.avail_in = static_cast<uInt>(n);
    unfed_ = unfed_.subspan(n);
  }

  // One call of inflate; it makes progress or throws.
  void inflate_some() {
    feed();
    const int ret = inflate(&zs_, Z_NO_FLUSH);
    if (ret == Z_OK) return;
    if (ret == Z_STREAM_END) {
      feed();
      const size_t rest = zs_.avail_in + unfed_.size();
      if (rest == 0) {
        ended_ = true;
        return;
      }
      EMBER_CHECK(peek(0) == 0x1f && peek(1) == 0x8b, "read_idx '", what_, "': corrupt gzip data: the ", rest,
                  " bytes after the end of the gzip data do not start another gzip member");
      EMBER_CHECK(inflateReset(&zs_) == Z_OK, "read_idx '", what_, "': cannot restart zlib's inflate");
      return;
    }
    // Z_BUF_ERROR with room to write: the input ran out inside a member.
    if (ret == Z_BUF_ERROR) EMBER_FAIL("read_idx '", what_, "': corrupt or truncated gzip data: unexpected end of file");
    EMBER_FAIL("read_idx '", what_, "': corrupt gzip data: ", zs_.msg ? zs_.msg : zError(ret));
  }
};

// Header plus data size the IDX header at the start of `bytes` promises; nullopt when the
// header is incomplete or its product overflows (parse_idx then reports it).
std::optional<uint64_t> promised_size(const std::vector<uint8_t>& bytes) {
  if (bytes.size() < 4) return std::nullopt;
  const size_t header = 4 + 4 * size_t(bytes[3]);
  if (bytes.size() < header) return std::nullopt;
  uint64_t total = 1;
  for (size_t i = 4; i < header; i += 4) {
    const uint64_t d = (uint64_t{bytes[i]} << 24) | (uint64_t{bytes[i + 1]} << 16) | (uint64_t{bytes[i + 2]} << 8) |
                       bytes[i + 3];
    if (__builtin_mul_overflow(total, d, &total)) return std::nullopt;
  }
  if (__builtin_add_overflow(total, uint64_t{header}, &total)) return std::nullopt;
  return total;
}

// Note [Bounded inflate]: a small gzip file can inflate to gigabytes. The IDX header says how
// many bytes follow, so the file is inflated only that far plus one byte (to detect trailing
// data); and that promise must fit what the compressed size can hold at all (deflate expands
// at most 1032:1), so a lying header fails before any large allocation.
constexpr uint64_t kMaxDeflateRatio = 1032;

// The IDX image in a file's bytes: inflated when they are gzip (recognised by the magic
// bytes, not the name), else the bytes themselves.
std::vector<uint8_t> idx_image(std::vector<uint8_t> file, const std::string& what) {
  if (!is_gzip(file)) return file;
  GzipReader gz(file, what);
  std::vector<uint8_t> bytes;
  gz.read_up_to(bytes, 4);
  if (bytes.size() == 4) gz.read_up_to(bytes, 4 * uint64_t{bytes[3]});
  if (const std::optional<uint64_t> total = promised_size(bytes)) {
    const uint64_t most = kMaxDeflateRatio * uint64_t{file.size()} + 64;
    EMBER_CHECK(*total <= most, "read_idx '", what, "': the header promises ", *total, " bytes, but a file of ",
                file.size(), " bytes inflates to at most ", most);
    gz.read_up_to(bytes, *total - bytes.size() + 1);
    EMBER_CHECK(bytes.size() <= *total, "read_idx '", what, "': the data inflates beyond the ", *total,
                " bytes its header promises (trailing data)");
  }
  return bytes;
}

struct FileCloser { void operator()(std::FILE* f) const { std::fclose(f); } };

std::vector<uint8_t> read_file(const std::string& path) {
  struct stat st {};
  EMBER_CHECK(::stat(path.c_str(), &st) == 0, "read_idx '", path, "': cannot open the file: ", std::strerror(errno));
  EMBER_CHECK(S_ISREG(st.st_mode), "read_idx '", path, "': expected a regular file");
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  EMBER_CHECK(f, "read_idx '", path, "': cannot open the file: ", std::strerror(errno));
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  EMBER_CHECK(std::fread(bytes.data(), 1, bytes.size(), f.get()) == bytes.size(), "read_idx '", path, "': short read (",
              bytes.size(), " bytes wanted); was the file changed while being read?");
  return bytes;
}

}  // namespace

IdxArray parse_idx(std::vector<uint8_t> bytes, const std::string& what) {
  const size_t size = bytes.size();
  EMBER_CHECK(size >= 4, "read_idx '", what, "': expected at least 4 bytes (the IDX magic), got ", size);
  EMBER_CHECK(bytes[0] == 0 && bytes[1] == 0, "read_idx '", what, "': not an IDX file: expected the magic to start with 0x00 0x00, got ",
              hex_byte(bytes[0]), " ", hex_byte(bytes[1]));
  const uint8_t type = bytes[2];
  if (type != kUnsignedByte) {
    const char* name = idx_type_name(type);
    if (name) EMBER_FAIL("read_idx '", what, "': unsupported element type ", hex_byte(type), " (", name, "); ember reads only 0x08 (unsigned byte)");
    EMBER_FAIL("read_idx '", what, "': not an IDX file: unknown element type ", hex_byte(type));
  }
  const size_t ndims = bytes[3];
  EMBER_CHECK(ndims >= 1, "read_idx '", what, "': expected at least 1 dimension, got 0");
  const size_t header = 4 + 4 * ndims;
  EMBER_CHECK(size >= header, "read_idx '", what, "': truncated header: ", ndims, " dims need ", header,
              " header bytes, the file has ", size);

  IdxArray array;
  uint64_t numel = 1;
  bool overflow = false;
  for (size_t i = 0; i < ndims; ++i) {
    const uint8_t* p = bytes.data() + 4 + 4 * i;
    const uint32_t d = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
    array.dims.push_back(d);
    overflow |= __builtin_mul_overflow(numel, uint64_t{d}, &numel);
  }
  EMBER_CHECK(!overflow, "read_idx '", what, "': dims ", shape_str(array.dims), " overflow 64-bit element counts");
  const uint64_t data_size = size - header;
  EMBER_CHECK(data_size >= numel, "read_idx '", what, "': truncated: dims ", shape_str(array.dims), " need ", numel,
              " data bytes, the file has ", data_size);
  EMBER_CHECK(data_size == numel, "read_idx '", what, "': ", data_size - numel, " trailing bytes after the ", numel,
              " data bytes of dims ", shape_str(array.dims));
  bytes.erase(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(header));
  array.data = std::move(bytes);
  return array;
}

IdxArray parse_idx_file(std::vector<uint8_t> file, const std::string& what) {
  return parse_idx(idx_image(std::move(file), what), what);
}

IdxArray read_idx(const std::string& path) { return parse_idx_file(read_file(path), path); }

}  // namespace ember
