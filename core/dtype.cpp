#include "core/dtype.h"

namespace ember {

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::i64: return "i64";
    case DType::i32: return "i32";
    case DType::u8: return "u8";
    case DType::boolean: return "bool";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
  }
  return "?";
}

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32: case DType::i32: return 4;
    case DType::f64: case DType::i64: return 8;
    case DType::u8: case DType::boolean: return 1;
    case DType::bf16: case DType::f16: return 2;
  }
  return 0;
}

bool is_floating(DType dtype) {
  return dtype == DType::f32 || dtype == DType::f64 || dtype == DType::bf16 || dtype == DType::f16;
}

bool is_integral(DType dtype) {
  return dtype == DType::i64 || dtype == DType::i32 || dtype == DType::u8;
}

}  // namespace ember
