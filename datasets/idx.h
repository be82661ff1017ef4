// IDX files, the format of MNIST and Fashion-MNIST: raw or gzip-compressed.
//
//   IdxArray images = read_idx("data/mnist/train-images-idx3-ubyte");     // or ...-ubyte.gz
//   // images.dims == {60000, 28, 28}; images.data holds 60000*28*28 bytes, row-major
//
// Layout: magic 0x00 0x00 <element type> <number of dims>, then each dim as a big-endian
// uint32, then the elements row-major. ember reads element type 0x08 (unsigned byte), the
// only one MNIST-style data sets use; the others (i8, i16, i32, f32, f64) are rejected by
// name. The header, the element count (overflow-checked) and the file length must agree
// exactly: a short file or trailing bytes are errors, not silently truncated data sets.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember {

struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;  // row-major, product(dims) bytes
};

// Reads a plain or gzip-compressed IDX file; gzip is recognised by its magic bytes, not by
// the file name.
IdxArray read_idx(const std::string& path);

// Parses an uncompressed IDX image held in memory; `what` names it in errors.
IdxArray parse_idx(std::vector<uint8_t> bytes, const std::string& what);

// A whole IDX file's bytes, plain or gzip (one or more members), as read_idx reads them: gzip
// is inflated only as far as the header promises (Note [Bounded inflate] in idx.cpp).
IdxArray parse_idx_file(std::vector<uint8_t> file, const std::string& what);

}  // namespace ember
