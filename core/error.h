// Errors: every failure a user can cause is an ember::Error whose message names the op, what
// was expected and what was given.
//
//   EMBER_CHECK(a.dim() == 2, "matmul: expected a 2-D tensor, got ", a.dim(), "-D");
//   try { ... } catch (const ember::Error& e) { std::cerr << e.what() << "\n"; }
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace ember {

// The one exception type ember throws for bad input or failed operations.
class Error : public std::runtime_error {
 public:
  Error(std::string message, const char* file, int line)
      : std::runtime_error(std::move(message)), file_(file), line_(line) {}
  // Where in ember's sources the check failed (for bug reports, not for users).
  const char* file() const noexcept { return file_; }
  int line() const noexcept { return line_; }

 private:
  const char* file_;
  int line_;
};

// An allocation that failed even after the caches were emptied.
class OutOfMemory : public Error {
 public:
  using Error::Error;
};

// "(3, 4)": how shapes appear in every message.
std::string shape_str(const std::vector<int64_t>& shape);

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
[[noreturn]] void throw_error(std::string message, const char* file, int line);
}  // namespace detail

}  // namespace ember

// Throws ember::Error with the concatenated message when `cond` is false.
#define EMBER_CHECK(cond, ...)                                                              \
  do {                                                                                      \
    if (!(cond)) [[unlikely]]                                                               \
      ::ember::detail::throw_error(::ember::detail::concat(__VA_ARGS__), __FILE__, __LINE__); \
  } while (0)

// Unconditional failure with the same message rules.
#define EMBER_FAIL(...) \
  ::ember::detail::throw_error(::ember::detail::concat(__VA_ARGS__), __FILE__, __LINE__)
