#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/safetensors.h"
#include "support/test_support.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {

template <class T>
std::vector<T> values_of(const SafetensorsTensor& t) {
  REQUIRE(t.bytes.size() % sizeof(T) == 0);
  std::vector<T> out(t.bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), t.bytes.data(), t.bytes.size());
  return out;
}

// A file from a header text and a data section: the bad files of the malformed-input tests.
std::vector<uint8_t> make_file(const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> out(8 + header.size() + data_bytes, 0);
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  std::memcpy(out.data() + 8, header.data(), header.size());
  return out;
}

SafetensorsFile parse(const std::vector<uint8_t>& bytes) {
  return parse_safetensors(bytes.data(), bytes.size(), "bad.safetensors");
}

// A fresh directory under the build tree's temp dir, removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("ember_safetensors_test_" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

}  // namespace

TEST_CASE("safetensors: round trip of every dtype, 0-d and empty tensors, metadata") {
  const float f32[6] = {1.5f, -2.f, 0.f, 3.25f, 1e-30f, -7.f};
  const double f64[2] = {1.0 / 3.0, -1e300};
  const int64_t i64[3] = {INT64_MIN, 0, INT64_MAX};
  const int32_t i32[2] = {-5, 1 << 30};
  const uint8_t u8[5] = {0, 1, 128, 254, 255};
  const bool boolean[3] = {true, false, true};
  const uint16_t bf16[2] = {0x3F80, 0xC040};
  const uint16_t f16[2] = {0x3C00, 0x7BFF};
  const float scalar = 42.f;
  const std::vector<SafetensorsEntry> entries = {
      {"w", DType::f32, {2, 3}, f32},     {"d", DType::f64, {2}, f64},
      {"l", DType::i64, {3, 1}, i64},     {"i", DType::i32, {1, 2}, i32},
      {"p", DType::u8, {5}, u8},          {"m", DType::boolean, {3}, boolean},
      {"b", DType::bf16, {2}, bf16},      {"h", DType::f16, {1, 1, 2}, f16},
      {"s", DType::f32, {}, &scalar},     {"e", DType::f32, {0, 7}, nullptr},
  };
  const std::map<std::string, std::string> metadata = {{"format", "ember"}, {"epoch", "3"}, {"quote", "a\"b\n"}};

  TempDir dir;
  const std::string path = dir.file("all.safetensors");
  write_safetensors(path, entries, metadata);
  const SafetensorsFile from_disk = read_safetensors(path);
  const std::vector<uint8_t> bytes = serialize_safetensors(entries, metadata);
  const SafetensorsFile from_memory = parse_safetensors(bytes.data(), bytes.size(), "memory");
  CHECK(fs::file_size(path) == bytes.size());  // the file is exactly the serialized bytes

  for (const SafetensorsFile* file : {&from_disk, &from_memory}) {
    CHECK(file->metadata == metadata);
    REQUIRE(file->tensors.size() == entries.size());
    for (size_t i = 0; i < entries.size(); ++i) {  // written in order, so read back in order
      const SafetensorsTensor& t = file->tensors[i];
      INFO("tensor " << entries[i].name);
      CHECK(t.name == entries[i].name);
      CHECK(t.dtype == entries[i].dtype);
      CHECK(t.shape == entries[i].shape);
    }
    CHECK(values_of<float>(*file->find("w")) == std::vector<float>(f32, f32 + 6));
    CHECK(values_of<double>(*file->find("d")) == std::vector<double>(f64, f64 + 2));
    CHECK(values_of<int64_t>(*file->find("l")) == std::vector<int64_t>(i64, i64 + 3));
    CHECK(values_of<int32_t>(*file->find("i")) == std::vector<int32_t>(i32, i32 + 2));
    CHECK(file->find("p")->bytes == std::vector<uint8_t>(u8, u8 + 5));
    CHECK(file->find("m")->bytes == std::vector<uint8_t>{1, 0, 1});
    CHECK(values_of<uint16_t>(*file->find("b")) == std::vector<uint16_t>{0x3F80, 0xC040});
    CHECK(values_of<uint16_t>(*file->find("h")) == std::vector<uint16_t>{0x3C00, 0x7BFF});
    CHECK(values_of<float>(*file->find("s")) == std::vector<float>{42.f});
    CHECK(file->find("e")->bytes.empty());
    CHECK(file->find("nope") == nullptr);
  }
}

TEST_CASE("safetensors: header layout is padded to 8 bytes and names every field") {
  const int32_t v[3] = {1, 2, 3};
  const std::vector<uint8_t> bytes = serialize_safetensors({{"x", DType::i32, {3}, v}}, {{"k", "vv"}});
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  CHECK(n == 88);  // 81 bytes of JSON + 7 spaces
  CHECK(bytes.size() == 8 + n + 12);
  const std::string header(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(n));
  CHECK(header.rfind(R"({"__metadata__":{"k":"vv"},"x":{"dtype":"I32","shape":[3],"data_offsets":[0,12]}})", 0) == 0);
  CHECK(header.find_first_not_of(' ', 81) == std::string::npos);
  // No metadata: no __metadata__ key at all.
  const std::vector<uint8_t> plain = serialize_safetensors({{"x", DType::i32, {3}, v}});
  CHECK(std::string(plain.begin() + 8, plain.end()).find("__metadata__") == std::string::npos);
  CHECK(parse_safetensors(plain.data(), plain.size(), "plain").metadata.empty());
}

TEST_CASE("safetensors: a file written by Python (json + numpy) loads with its values") {
  const SafetensorsFile file = read_safetensors(std::string(EMBER_TEST_DATA_DIR) + "/python_written.safetensors");
  CHECK(file.metadata == std::map<std::string, std::string>{
                             {"format", "pt"}, {"written_by", "make_safetensors_fixture.py"}, {"note", "caf\xC3\xA9 \xE2\x98\x83"}});
  // Data-offset order, which differs from the header's name order in that file.
  std::vector<std::string> names;
  for (const auto& t : file.tensors) names.push_back(t.name);
  CHECK(names == std::vector<std::string>{"bias", "labels", "counts", "empty", "scalar", "weight", "brain", "half", "mask", "pixels"});

  const SafetensorsTensor& weight = *file.find("weight");
  CHECK(weight.dtype == DType::f32);
  CHECK(weight.shape == std::vector<int64_t>{2, 3});
  CHECK(values_of<float>(weight) == std::vector<float>{-1.f, -0.5f, 0.f, 0.5f, 1.f, 1.5f});
  CHECK(values_of<double>(*file.find("bias")) == std::vector<double>{1.0 / 3.0, -2.5e-300, 1e300});
  CHECK(values_of<int64_t>(*file.find("labels")) == std::vector<int64_t>{0, -1, int64_t{1} << 40, -(int64_t{1} << 62)});
  CHECK(file.find("counts")->shape == std::vector<int64_t>{2, 1});
  CHECK(values_of<int32_t>(*file.find("counts")) == std::vector<int32_t>{7, -8});
  CHECK(file.find("pixels")->shape == std::vector<int64_t>{1, 1, 3});
  CHECK(file.find("pixels")->bytes == std::vector<uint8_t>{0, 127, 255});
  CHECK(file.find("mask")->dtype == DType::boolean);
  CHECK(file.find("mask")->bytes == std::vector<uint8_t>{1, 0, 1});
  CHECK(file.find("half")->dtype == DType::f16);
  CHECK(values_of<uint16_t>(*file.find("half")) == std::vector<uint16_t>{0x3C00, 0xC000, 0x2E66, 0x7BFF});
  CHECK(file.find("brain")->dtype == DType::bf16);
  CHECK(values_of<uint16_t>(*file.find("brain")) == std::vector<uint16_t>{0x3F80, 0xC040, 0x3E20, 0x7F62});
  CHECK(file.find("scalar")->shape.empty());
  CHECK(values_of<float>(*file.find("scalar")) == std::vector<float>{42.25f});
  CHECK(file.find("empty")->shape == std::vector<int64_t>{0, 4});
  CHECK(file.find("empty")->bytes.empty());
}

TEST_CASE("safetensors: malformed files fail with a specific error") {
  struct Case { const char* name; std::vector<uint8_t> bytes; const char* message; };
  const std::string x = R"("x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  std::vector<uint8_t> long_header = make_file("{}", 0);
  long_header[0] = 200;
  std::vector<uint8_t> huge_header = make_file("{}", 0);
  huge_header[7] = 0xFF;
  const Case cases[] = {
      {"empty file", {}, "'bad.safetensors': expected at least 8 bytes (the header length), got 0"},
      {"shorter than 8 bytes", {2, 0, 0, 0}, "expected at least 8 bytes (the header length), got 4"},
      {"header length past the end", long_header, "header length 200 exceeds the 2 bytes after the 8-byte length prefix"},
      {"header length near 2^64", huge_header, "exceeds the 2 bytes"},
      {"header not JSON", make_file("{\"x\": ", 0), "'bad.safetensors': header: invalid JSON at byte 6"},
      {"header not an object", make_file("[1, 2]", 0), "expected the header to be a JSON object, got an array"},
      {"empty header", make_file("", 0), "invalid JSON at byte 0"},
      {"duplicate keys", make_file("{" + x + "," + x + "}", 8), "duplicate key \"x\""},
      {"unknown dtype", make_file(R"({"x":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}})", 2),
       "tensor 'x': unsupported dtype \"F8_E4M3\" (ember reads F32, F64, I64, I32, U8, BOOL, BF16, F16)"},
      {"dtype not a string", make_file(R"({"x":{"dtype":4,"shape":[2],"data_offsets":[0,8]}})", 8),
       "tensor 'x': expected dtype to be a string, got an integer"},
      {"shape not a list", make_file(R"({"x":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", 8),
       "tensor 'x': expected shape to be a list of non-negative integers, got an integer"},
      {"negative dim", make_file(R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8),
       "expected shape to be a list of non-negative integers, got -2 in it"},
      {"fractional dim", make_file(R"({"x":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", 8),
       "expected shape to be a list of non-negative integers, got a number in it"},
      {"huge dims overflow", make_file(R"({"x":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8),
       "tensor 'x': shape (4294967296, 4294967296) of F32 overflows 64-bit byte counts"},
      {"missing key", make_file(R"({"x":{"dtype":"F32","shape":[2]}})", 8), "tensor 'x': missing \"data_offsets\""},
      {"unexpected key", make_file(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"strides":[1]}})", 8),
       "tensor 'x': unexpected key \"strides\""},
      {"entry not an object", make_file(R"({"x":[1]})", 0), "tensor 'x': expected an object with dtype, shape and data_offsets, got an array"},
      {"offsets not a pair", make_file(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,4,8]}})", 8),
       "expected data_offsets to be a list [begin, end], got a list of 3"},
      {"offsets reversed", make_file(R"({"x":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8),
       "data_offsets [8, 0) end before they begin"},
      {"offsets out of range", make_file(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4),
       "tensor 'x': data_offsets [0, 8) exceed the data section of 4 bytes"},
      {"size mismatch", make_file(R"({"x":{"dtype":"F64","shape":[2],"data_offsets":[0,8]}})", 8),
       "tensor 'x': shape (2,) of F64 needs 16 bytes, but data_offsets [0, 8) hold 8"},
      {"overlap", make_file(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})", 6),
       "tensor 'b' at [2, 6) overlaps tensor 'a' at [0, 4)"},
      {"gap", make_file(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]}})", 6),
       "data bytes [2, 4) belong to no tensor (a gap before tensor 'b')"},
      {"gap at the start", make_file(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}})", 3), "data bytes [0, 1) belong to no tensor"},
      {"trailing data", make_file(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", 5),
       "data bytes [2, 5) at the end belong to no tensor"},
      {"data without tensors", make_file("{}", 3), "data bytes [0, 3) at the end belong to no tensor"},
      {"metadata not an object", make_file(R"({"__metadata__":"v"})", 0), "expected \"__metadata__\" to be an object of strings, got a string"},
      {"metadata value not a string", make_file(R"({"__metadata__":{"epoch":3}})", 0),
       "expected \"__metadata__\" values to be strings, got an integer for key \"epoch\""},
      {"bool byte not 0 or 1", [] { auto f = make_file(R"({"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", 2); f.back() = 7; return f; }(),
       "tensor 'm' (BOOL) holds byte 7 at element 1; expected 0 or 1"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    CHECK_THROWS_AS(parse(c.bytes), Error);
    CHECK_THROWS_WITH(parse(c.bytes), Catch::Contains(c.message) && Catch::Contains("safetensors 'bad.safetensors'"));
  }
  // Valid edge cases next to the invalid ones: no tensors at all, a shape with a zero dim
  // whose other dims would overflow, trailing spaces in the header.
  CHECK(parse(make_file("{}", 0)).tensors.empty());
  CHECK(parse(make_file(R"({"z":{"dtype":"F32","shape":[4611686018427387904,0],"data_offsets":[0,0]}})", 0)).tensors.size() == 1);
  CHECK(parse(make_file("{}      ", 0)).tensors.empty());
}

TEST_CASE("safetensors: reading files that are missing, truncated or changed") {
  TempDir dir;
  CHECK_THROWS_WITH(read_safetensors(dir.file("missing.safetensors")),
                    Catch::Contains("missing.safetensors': cannot open the file: No such file or directory"));
  const double v[4] = {1, 2, 3, 4};
  const std::string path = dir.file("t.safetensors");
  write_safetensors(path, {{"v", DType::f64, {4}, v}});
  fs::resize_file(path, fs::file_size(path) - 3);
  CHECK_THROWS_WITH(read_safetensors(path), Catch::Contains("t.safetensors': tensor 'v': data_offsets [0, 32) exceed the data section of 29 bytes"));
  fs::resize_file(path, 5);
  CHECK_THROWS_WITH(read_safetensors(path), Catch::Contains("expected at least 8 bytes (the header length), got 5"));
}

TEST_CASE("safetensors: writing is atomic and validates its input") {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  const float a[2] = {1.f, 2.f};
  const float b[2] = {3.f, 4.f};
  write_safetensors(path, {{"w", DType::f32, {2}, a}});
  write_safetensors(path, {{"w", DType::f32, {2}, b}});  // replaces the old file
  CHECK(values_of<float>(read_safetensors(path).tensors.at(0)) == std::vector<float>{3.f, 4.f});

  // A failed write leaves the old file as it was and no temporary file behind.
  CHECK_THROWS_WITH(write_safetensors(path, {{"w", DType::f32, {2}, a}, {"w", DType::f32, {2}, a}}),
                    "write_safetensors: duplicate tensor name 'w'");
  CHECK_THROWS_WITH(write_safetensors(path, {{"__metadata__", DType::f32, {2}, a}}), Catch::Contains("is reserved"));
  CHECK_THROWS_WITH(write_safetensors(path, {{"n", DType::f32, {-1}, a}}), Catch::Contains("expected non-negative dims, got shape (-1,)"));
  CHECK_THROWS_WITH(write_safetensors(path, {{"o", DType::f32, {INT64_MAX, 4}, a}}), Catch::Contains("overflows 64-bit byte counts"));
  CHECK_THROWS_WITH(write_safetensors(path, {{"p", DType::f32, {2}, nullptr}}), Catch::Contains("has 8 bytes but no data pointer"));
  CHECK(values_of<float>(read_safetensors(path).tensors.at(0)) == std::vector<float>{3.f, 4.f});
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir.path)) files += entry.is_regular_file();
  CHECK(files == 1);

  CHECK_THROWS_WITH(write_safetensors(dir.file("no/such/dir/x.safetensors"), {{"w", DType::f32, {2}, a}}),
                    Catch::Contains("the directory '") && Catch::Contains("no/such/dir' does not exist"));
}

TEST_CASE("safetensors: dtype names") {
  CHECK(safetensors_dtype_name(DType::bf16) == "BF16");
  CHECK(safetensors_dtype_name(DType::boolean) == "BOOL");
  CHECK(safetensors_dtype("I64", "t") == DType::i64);
  CHECK_THROWS_WITH(safetensors_dtype("f32", "t"), Catch::StartsWith("t: unsupported dtype \"f32\""));
}

// Note [Replace targets] (core/atomic_file.h).
TEST_CASE("safetensors: writing through a symlink replaces its target, and the link stays a link") {
  TempDir dir;
  const float a[2] = {1.f, 2.f};
  fs::create_directories(dir.path / "real");
  const std::string target = dir.file("real/model.safetensors"), link = dir.file("last.safetensors");
  write_safetensors(target, {{"w", DType::f32, {2}, a}});
  fs::create_symlink(target, link);
  const float b[2] = {3.f, 4.f};
  write_safetensors(link, {{"w", DType::f32, {2}, b}});
  CHECK(fs::is_symlink(link));
  CHECK(values_of<float>(read_safetensors(target).tensors.at(0)) == std::vector<float>{3.f, 4.f});
  size_t leftovers = 0;  // no temporary file beside the link or the target
  for (const auto& entry : fs::recursive_directory_iterator(dir.path)) leftovers += entry.path().string().find(".tmp.") != std::string::npos;
  CHECK(leftovers == 0);

  // A dangling link: the file it names is created.
  const std::string dangling = dir.file("dangling.safetensors");
  fs::create_symlink(dir.file("real/new.safetensors"), dangling);
  write_safetensors(dangling, {{"w", DType::f32, {2}, a}});
  CHECK(fs::is_symlink(dangling));
  CHECK(fs::is_regular_file(dir.file("real/new.safetensors")));
}

TEST_CASE("safetensors: a target that is a device, FIFO or directory is refused and left as it was") {
  TempDir dir;
  const float a[2] = {1.f, 2.f};
  // /dev/null must stay a device: replacing it would break the whole machine.
  CHECK_THROWS_WITH(write_safetensors("/dev/null", {{"w", DType::f32, {2}, a}}),
                    Catch::Contains("'/dev/null' exists and is not a regular file (a device)"));
  CHECK(fs::is_character_file("/dev/null"));
  const std::string fifo = dir.file("pipe");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(write_safetensors(fifo, {{"w", DType::f32, {2}, a}}), Catch::Contains("(a FIFO)"));
  CHECK(fs::is_fifo(fifo));
  fs::create_directories(dir.path / "sub");
  CHECK_THROWS_WITH(write_safetensors(dir.file("sub"), {{"w", DType::f32, {2}, a}}), Catch::Contains("(a directory)"));
  // A link to a device is refused the same way, and stays a link.
  fs::create_symlink("/dev/null", dir.file("null_link"));
  CHECK_THROWS_WITH(write_safetensors(dir.file("null_link"), {{"w", DType::f32, {2}, a}}), Catch::Contains("(a device)"));
  CHECK(fs::is_symlink(dir.file("null_link")));
  CHECK_THROWS_WITH(check_output_path("", "--save"), Catch::Contains("--save: expected a file name"));
  CHECK_NOTHROW(check_output_path(dir.file("fresh.safetensors"), "--save"));
}

TEST_CASE("safetensors: reading a FIFO or a directory is an error, not a hang") {
  TempDir dir;
  const std::string fifo = dir.file("pipe");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(read_safetensors(fifo), Catch::Contains("expected a regular file, got a FIFO"));
  CHECK_THROWS_WITH(read_safetensors(dir.path.string()), Catch::Contains("expected a regular file, got a directory"));
}
