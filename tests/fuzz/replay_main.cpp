// Replays fuzz inputs without libFuzzer: each file named on the command line, or each file of
// each directory named, is passed once to LLVMFuzzerTestOneInput. An input that breaks the
// target's contract aborts (or escapes as an exception), failing the test.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void replay(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::cout << file.filename().string() << " (" << bytes.size() << " bytes)\n";
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  int inputs = 0;
  for (int a = 1; a < argc; ++a) {
    const std::filesystem::path path(argv[a]);
    if (std::filesystem::is_directory(path)) {
      std::vector<std::filesystem::path> files;
      for (const auto& entry : std::filesystem::directory_iterator(path))
        if (entry.is_regular_file()) files.push_back(entry.path());
      std::sort(files.begin(), files.end());
      for (const auto& file : files) replay(file), ++inputs;
    } else {
      replay(path), ++inputs;
    }
  }
  if (inputs == 0) {
    std::cerr << "replay: no inputs found in the paths given\n";
    return 1;
  }
  std::cout << "replayed " << inputs << " inputs\n";
  return 0;
}
