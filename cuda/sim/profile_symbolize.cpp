// Source lines of code addresses (profile_symbolize.h).
//
// Note [symbolizing]: the addresses are grouped by the object file that holds them
// (dl_iterate_phdr: its path and load bias; the main program's path is /proc/self/exe's target), written to a
// file as offsets in that object, and handed to one symbolizer run per object. Both tools,
// given --print-address/-a and inlined frames, answer each address with a line "0x..." and
// then one "file:line[:column]" line per frame, innermost first (llvm-symbolizer adds a blank
// line), which is all the parser relies on.
#include "cuda/sim/profile_symbolize.h"

#include <link.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string_view>

namespace ember::sim::profile {
namespace {

struct Module {
  std::string path;
  uintptr_t bias = 0;
};

std::string main_program_path() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  return n > 0 ? std::string(path, size_t(n)) : std::string{};
}

Module module_of(uintptr_t pc) {
  struct Query {
    uintptr_t pc;
    Module found;
    bool first = true;
  } q{pc, {}, true};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto& q = *static_cast<Query*>(data);
        const bool main_program = q.first;
        q.first = false;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          const uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
          if (ph.p_type == PT_LOAD && q.pc >= begin && q.pc < begin + ph.p_memsz) {
            q.found = {main_program || !info->dlpi_name[0] ? main_program_path() : info->dlpi_name, info->dlpi_addr};
            return 1;
          }
        }
        return 0;
      },
      &q);
  return q.found;
}

std::string find_on_path(std::string_view name) {
  const char* path = std::getenv("PATH");
  std::string_view dirs = path ? path : "/usr/bin:/bin";
  while (!dirs.empty()) {
    const size_t colon = dirs.find(':');
    std::string candidate = std::string(dirs.substr(0, colon)) + "/" + std::string(name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    dirs = colon == std::string_view::npos ? std::string_view{} : dirs.substr(colon + 1);
  }
  return {};
}

std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The command that reads offsets from stdin for `object`, or "" without a symbolizer.
std::string symbolizer_command(const std::string& object) {
  for (const char* name : {"llvm-symbolizer-16", "llvm-symbolizer"}) {
    const std::string tool = find_on_path(name);
    if (!tool.empty())
      return quoted(tool) + " --obj=" + quoted(object) + " --print-address --inlining --functions=none";
  }
  const std::string tool = find_on_path("addr2line");
  return tool.empty() ? std::string{} : quoted(tool) + " -e " + quoted(object) + " -a -i";
}

bool all_digits(std::string_view s) { return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos; }

// "file:line", "file:line:column", either with a " (discriminator n)" tail.
SourceLine parse_location(std::string_view text) {
  text = text.substr(0, text.find(" ("));
  SourceLine where{std::string(text), 0};
  const size_t last = text.rfind(':');
  if (last == std::string_view::npos || !all_digits(text.substr(last + 1))) return where;
  const size_t before = text.rfind(':', last - 1);
  if (before != std::string_view::npos && all_digits(text.substr(before + 1, last - before - 1))) {
    return {std::string(text.substr(0, before)), unsigned(std::atoi(std::string(text.substr(before + 1)).c_str()))};
  }
  return {std::string(text.substr(0, last)), unsigned(std::atoi(std::string(text.substr(last + 1)).c_str()))};
}

bool user_code(const std::string& file) {
  return file.find("/cuda/sim/") == std::string::npos && file.rfind("/usr/", 0) != 0;
}

// The frames of each offset, in order; fewer entries than offsets when the tool fails.
std::vector<std::vector<SourceLine>> run_symbolizer(const std::string& command, const std::vector<uintptr_t>& offsets) {
  std::vector<std::vector<SourceLine>> frames;
  char input[] = "/tmp/ember-profile-XXXXXX";
  const int fd = mkstemp(input);
  if (fd < 0) return frames;
  std::string text;
  for (uintptr_t o : offsets) {
    char line[32];
    std::snprintf(line, sizeof line, "0x%llx\n", static_cast<unsigned long long>(o));
    text += line;
  }
  const bool written = write(fd, text.data(), text.size()) == ssize_t(text.size());
  close(fd);
  FILE* out = written ? popen((command + " < " + quoted(input) + " 2>/dev/null").c_str(), "r") : nullptr;
  if (out) {
    char buffer[4096];
    while (std::fgets(buffer, sizeof buffer, out)) {
      std::string_view line(buffer);
      while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
      if (line.empty()) continue;
      if (line.substr(0, 2) == "0x") frames.emplace_back();
      else if (!frames.empty()) frames.back().push_back(parse_location(line));
    }
    pclose(out);
  }
  unlink(input);
  return frames;
}

}  // namespace

std::vector<SourceLine> symbolize(const std::vector<uintptr_t>& pcs) {
  std::vector<SourceLine> lines(pcs.size(), SourceLine{"??", 0});
  std::map<std::string, std::vector<size_t>> by_object;  // object path -> indices into pcs
  std::map<std::string, uintptr_t> bias;
  for (size_t i = 0; i < pcs.size(); ++i) {
    const Module m = module_of(pcs[i]);
    if (m.path.empty()) continue;
    by_object[m.path].push_back(i);
    bias[m.path] = m.bias;
  }
  for (const auto& [object, indices] : by_object) {
    const std::string command = symbolizer_command(object);
    if (command.empty()) break;
    std::vector<uintptr_t> offsets;
    for (size_t i : indices) offsets.push_back(pcs[i] - bias[object]);
    const std::vector<std::vector<SourceLine>> frames = run_symbolizer(command, offsets);
    for (size_t j = 0; j < frames.size() && j < indices.size(); ++j) {
      if (frames[j].empty()) continue;
      const SourceLine* pick = &frames[j].back();
      for (const SourceLine& f : frames[j])
        if (user_code(f.file)) { pick = &f; break; }
      lines[indices[j]] = *pick;
    }
  }
  return lines;
}

}  // namespace ember::sim::profile
