// The source transformation behind ember-simcc: rewrites the two pieces of CUDA syntax that the
// host compiler cannot parse into calls the SIMT simulator runs, leaving everything else (and
// every line number) as it was.
//
//   kernel<<<grid, block, smem, stream>>>(a, b);
//     -> ::ember::sim::dropin::make_launch(::ember::sim::dropin::configure(grid, block, smem, stream),
//            "kernel", <a lambda calling kernel>, <a lambda giving its address>)(a, b);
//   extern __shared__ float tile[];
//     -> float* tile = static_cast<float*>(::ember::sim::dynamic_shared_memory());
//
//   std::string out = ember::simcc::rewrite_cuda(source, "foo.cu");   // throws RewriteError
//
// Strings, character literals and comments are never rewritten. The callee before `<<<` may be
// qualified and carry template arguments (`ns::k<T, 4>`); the configuration and the arguments
// are copied verbatim, so the C++ compiler parses them (nested templates, commas and all).
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace ember::simcc {

// A launch or declaration the transformation cannot read; what() is "file:line: message".
class RewriteError : public std::runtime_error {
 public:
  RewriteError(const std::string& file, int line, const std::string& message)
      : std::runtime_error(file + ":" + std::to_string(line) + ": " + message), line_(line) {}
  int line() const noexcept { return line_; }

 private:
  int line_;
};

// The rewritten translation unit, starting with `#line 1 "<file_name>"` so that compiler
// messages name the original file and lines.
std::string rewrite_cuda(std::string_view source, std::string_view file_name);

}  // namespace ember::simcc
