// Where a tensor's memory lives.
//
//   Device d = Device::cuda(0);   // "cuda:0"; whether it is a GPU or the simulator is a build property
//   Device c = parse_device("cpu");
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace ember {

enum class DeviceType : uint8_t { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  static constexpr Device cpu() { return {DeviceType::cpu, 0}; }
  static constexpr Device cuda(int index = 0) { return {DeviceType::cuda, index}; }
  constexpr bool is_cpu() const { return type == DeviceType::cpu; }
  constexpr bool is_cuda() const { return type == DeviceType::cuda; }
  friend constexpr bool operator==(Device a, Device b) = default;
  std::string str() const;  // "cpu", "cuda:0"
};

std::ostream& operator<<(std::ostream& os, Device device);
// "cpu", "cuda", "cuda:1"; anything else is an ember::Error.
Device parse_device(const std::string& text);

}  // namespace ember
