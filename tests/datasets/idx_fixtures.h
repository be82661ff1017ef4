// Small synthetic IDX files for the datasets tests, plain or gzip-compressed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ember::test {

// Header (magic with `type`, big-endian dims) followed by `data`.
std::vector<uint8_t> idx_bytes(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data, uint8_t type = 0x08);

// `bytes` as one gzip member, in memory.
std::vector<uint8_t> gzip_bytes(const std::vector<uint8_t>& bytes);

// Writes `bytes` to `path`, gzip-compressed when `gzip` is true.
void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes, bool gzip = false);

// A fresh directory removed at the end of its scope.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& tag);
  ~TempDir();
  std::string file(const std::string& name) const { return (path / name).string(); }
};

}  // namespace ember::test
