#include "core/error.h"

namespace ember {

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

namespace detail {
void throw_error(std::string message, const char* file, int line) {
  throw Error(std::move(message), file, line);
}
}  // namespace detail

}  // namespace ember
