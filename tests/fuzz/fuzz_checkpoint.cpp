// Fuzz target for a training checkpoint's metadata reader (nn/checkpoint.h,
// check_checkpoint_format + read_checkpoint_metadata: what load_checkpoint does with the
// __metadata__ strings). The input is the entries one per line, in the order progress, rng,
// config, format, history (a missing line is a missing entry; without a fourth line the format
// is right; without a fifth there is no history, as in checkpoints from before it), so
// mutations land in the JSON texts rather than in an outer layer of escaping. Any
// input either loads or throws ember::Error, and what loads is valid and survives the writer:
// checkpoint_metadata of the result reads back equal. Another exception, a crash, a leak or a
// sanitizer report is a finding. Built as a corpus replay test and a libFuzzer binary (Note
// [Fuzzing] in CMakeLists.txt).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>

#include "core/error.h"
#include "nn/checkpoint.h"

namespace {

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_checkpoint: %s\n", what);
  std::abort();
}

std::map<std::string, std::string> entries(std::string_view text) {
  std::map<std::string, std::string> metadata = {{"format", "ember.training_checkpoint.v1"}};
  const char* keys[] = {"progress", "rng", "config", "format", "history"};
  for (const char* key : keys) {
    if (text.empty()) break;
    const size_t end = std::min(text.find('\n'), text.size());
    metadata[key] = std::string(text.substr(0, end));
    text.remove_prefix(std::min(end + 1, text.size()));
  }
  return metadata;
}

ember::TrainingCheckpoint read(const std::map<std::string, std::string>& metadata, const char* path) {
  ember::check_checkpoint_format(metadata, path);
  ember::TrainingCheckpoint ck;
  ember::read_checkpoint_metadata(metadata, path, ck);
  return ck;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ember::TrainingCheckpoint ck;
  try {
    ck = read(entries({reinterpret_cast<const char*>(data), size}), "fuzz input");
  } catch (const ember::Error&) {
    return 0;  // the contract: malformed metadata is an ember::Error
  }
  if (ck.epoch < 0 || ck.step < 0) finding("loaded a negative epoch or step");
  for (const auto& [name, value] : ck.counters)
    if (value < 0) finding("loaded a negative counter");
  // The writer must accept what the reader accepts, and its output read back the same.
  const ember::TrainingCheckpoint back = read(ember::checkpoint_metadata(ck), "fuzz round trip");
  if (back.epoch != ck.epoch || back.step != ck.step || back.counters != ck.counters || back.rng != ck.rng ||
      back.config != ck.config || back.history != ck.history)
    finding("checkpoint_metadata of a loaded checkpoint reads back different");
  return 0;
}
