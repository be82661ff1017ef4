#include "core/device.h"

#include "core/error.h"

namespace ember {

std::string Device::str() const {
  return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index);
}

std::ostream& operator<<(std::ostream& os, Device device) { return os << device.str(); }

Device parse_device(const std::string& text) {
  if (text == "cpu") return Device::cpu();
  if (text == "cuda") return Device::cuda(0);
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5) {
    const std::string digits = text.substr(5);
    bool ok = digits.find_first_not_of("0123456789") == std::string::npos && digits.size() < 4;
    if (ok) return Device::cuda(std::stoi(digits));
  }
  EMBER_FAIL("device: expected 'cpu', 'cuda' or 'cuda:N', got '", text, "'");
}

}  // namespace ember
