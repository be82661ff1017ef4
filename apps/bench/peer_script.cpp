#include "apps/bench/peer_script.h"

#include "apps/bench/openmp_spin.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <utility>

namespace ember::bench {

std::string peer_python() {
  const char* env = std::getenv("EMBER_PYTHON");
  return env && *env ? env : "/usr/bin/python3";
}

std::string peer_script_path(const std::string& script) {
  return std::string(EMBER_APPS_SOURCE_DIR) + "/bench/" + script;
}

namespace {

// The script's stdout lines (no newlines); none where the interpreter or the script is missing.
std::vector<std::string> run_peer_lines(const std::string& script, const std::vector<std::string>& args) {
  std::vector<std::string> lines;
  const std::string path = peer_script_path(script), python = peer_python();
  if (!std::filesystem::exists(path) || !std::filesystem::exists(python)) return lines;
  std::string cmd = "'" + python + "' '" + path + "'";
  for (const std::string& a : args) cmd += " '" + a + "'";
  cmd += " 2>/dev/null";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  if (!pipe) return lines;
  char line[512];
  while (std::fgets(line, sizeof line, pipe.get())) {
    std::string s(line);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    lines.push_back(std::move(s));
  }
  return lines;
}

}  // namespace

std::map<std::string, double> run_peer_script(const std::string& script, const std::vector<std::string>& args) {
  std::map<std::string, double> rows;
  for (const std::string& s : run_peer_lines(script, args)) {
    const size_t space = s.rfind(' ');
    if (space == std::string::npos || space == 0) continue;
    char* end = nullptr;
    const double ms = std::strtod(s.c_str() + space + 1, &end);
    if (end && *end == '\0') rows[s.substr(0, space)] = ms;
  }
  return rows;
}

std::string peer_identity() {
  const std::vector<std::string> lines = run_peer_lines("torch_blas.py", {});
  return lines.empty() ? "PyTorch not found (" + peer_python() + " without torch)"
                       : lines.front() + ", " + openmp_spin_setting();
}

}  // namespace ember::bench
