// Indexing kernels. Indices are validated here, where they are read, so a bad index is an
// Error naming the op, the index and the valid range rather than a stray memory access.
#include "core/parallel.h"
#include "ops/kernels.h"

namespace ember::cpu {
namespace {

inline int64_t checked(int64_t i, int64_t n, const char* op) {
  EMBER_CHECK(i >= -n && i < n, op, ": index ", i, " is out of range for a dim of size ", n);
  return i < 0 ? i + n : i;
}

// Offset (in elements) of element `linear` of a tensor with `shape` and `strides`, with the
// coordinate along `dim` returned separately instead of added.
inline int64_t offset_except(int64_t linear, const Shape& shape, const Strides& strides, int64_t dim,
                             int64_t& coord_dim) {
  int64_t off = 0;
  for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
    const int64_t c = linear % shape[d];
    linear /= shape[d];
    if (d == dim) coord_dim = c;
    else off += c * strides[d];
  }
  return off;
}

}  // namespace

void index_select(const Tensor& x, const Tensor& index, const Tensor& out) {
  dispatch_all(x.dtype(), "index_select", [&]<class T>(TypeTag<T>) {
    const int64_t outer = x.size(0), n = x.size(1), inner = x.size(2), k = index.numel();
    const T* px = x.data<T>();
    const int64_t* pi = index.data<int64_t>();
    T* po = out.data<T>();
    const int64_t s0 = x.stride(0), s1 = x.stride(1), s2 = x.stride(2), si = index.stride(0);
    parallel_for(0, outer * k, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const int64_t i = r / k, j = r % k;
        const T* src = px + i * s0 + checked(pi[j * si], n, "index_select") * s1;
        T* dst = po + r * inner;
        for (int64_t c = 0; c < inner; ++c) dst[c] = src[c * s2];
      }
    });
  });
}

void index_add(const Tensor& out, const Tensor& index, const Tensor& src) {
  dispatch_numeric(out.dtype(), "index_add", [&]<class T>(TypeTag<T>) {
    const int64_t outer = out.size(0), n = out.size(1), inner = out.size(2), k = index.numel();
    T* po = out.data<T>();
    const T* ps = src.data<T>();
    const int64_t* pi = index.data<int64_t>();
    const int64_t si = index.stride(0), t0 = src.stride(0), t1 = src.stride(1), t2 = src.stride(2);
    // Rows of different `outer` never collide, so parallelise over outer only.
    parallel_for(0, outer, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        for (int64_t j = 0; j < k; ++j) {
          T* dst = po + (i * n + checked(pi[j * si], n, "index_add")) * inner;
          const T* s = ps + i * t0 + j * t1;
          for (int64_t c = 0; c < inner; ++c) dst[c] += s[c * t2];
        }
    });
  });
}

void gather(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out) {
  dispatch_all(x.dtype(), "gather", [&]<class T>(TypeTag<T>) {
    const T* px = x.data<T>();
    const int64_t* pi = index.data<int64_t>();
    T* po = out.data<T>();
    const int64_t n = x.size(dim), sxd = x.stride(dim);
    parallel_for(0, index.numel(), 8192, [&](int64_t b, int64_t e) {
      for (int64_t l = b; l < e; ++l) {
        int64_t c = 0;
        const int64_t ox = offset_except(l, index.shape(), x.strides(), dim, c);
        const int64_t oi = offset_except(l, index.shape(), index.strides(), dim, c) + c * index.stride(dim);
        po[l] = px[ox + checked(pi[oi], n, "gather") * sxd];
      }
    });
  });
}

void scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  dispatch_numeric(out.dtype(), "scatter_add", [&]<class T>(TypeTag<T>) {
    T* po = out.data<T>();
    const int64_t* pi = index.data<int64_t>();
    const T* ps = src.data<T>();
    const int64_t n = out.size(dim), sod = out.stride(dim);
    // Serial: two source elements may target the same output element.
    for (int64_t l = 0; l < index.numel(); ++l) {
      int64_t c = 0;
      const int64_t oo = offset_except(l, index.shape(), out.strides(), dim, c);
      const int64_t oi = offset_except(l, index.shape(), index.strides(), dim, c) + c * index.stride(dim);
      const int64_t os = offset_except(l, index.shape(), src.strides(), dim, c) + c * src.stride(dim);
      po[oo + checked(pi[oi], n, "scatter_add") * sod] += ps[os];
    }
  });
}

}  // namespace ember::cpu
