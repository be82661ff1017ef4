// Indexing kernels: index_select, index_add, gather, scatter_add (contracts: ops/kernels.h).
// The accumulating ones (index_add, scatter_add) add with atomics, since two source elements
// may target one output element.
//
// Note [index checks]: an index outside [-n, n) must not touch memory. Each thread checks the
// index it reads; a bad one is skipped and recorded (the first one wins) in a small device
// record that the launcher copies back after the kernel, throwing the CPU's Error ("gather:
// index 7 is out of range for a dim of size 5"). That copy waits for the kernel: these four
// ops synchronise with the host, the one exception to "no per-op synchronisation". The
// alternative, a device-side assert, would kill the CUDA context with a message the user
// cannot catch, and not running the check would corrupt memory; negative indices count from
// the end, as on the CPU.
//
// Note [u8 accumulation]: CUDA has no 8-bit atomicAdd, so index_add/scatter_add on u8 run the
// same kernel on a single thread with plain additions (exact, slow, rare).
#include <type_traits>

#include "ops/cuda/elementwise_loops.h"
#include "ops/cuda/register.h"
#include "ops/kernels.h"

namespace ember::cuda {
namespace {

constexpr unsigned kThreads = 256;

struct BadIndex {
  unsigned long long flagged;  // 0 until a thread reports
  long long index;             // the first reported index
};

// The index if it lies in [-n, n) (negative counts from the end), else -1 after reporting it.
__device__ __forceinline__ int64_t checked_index(int64_t i, int64_t n, BadIndex* bad) {
  if (i >= -n && i < n) return i < 0 ? i + n : i;
  if (atomicCAS(&bad->flagged, 0ull, 1ull) == 0ull) bad->index = i;
  return -1;
}

template <class T>
constexpr bool has_atomic_add = std::is_floating_point_v<T> || sizeof(T) >= 4;

template <class T>
__device__ __forceinline__ void add_to(T* p, T v) {
  if constexpr (std::is_floating_point_v<T>) atomicAdd(p, v);
  else if constexpr (sizeof(T) == 8) atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
  else if constexpr (sizeof(T) == 4) atomicAdd(reinterpret_cast<int*>(p), static_cast<int>(v));
  else *p = T(*p + v);  // Note [u8 accumulation]: single-threaded launch
}

// Launch shape for n items: a grid-stride grid, or one thread where atomics are missing.
template <class T>
void launch_shape(int64_t n, bool accumulates, unsigned& grid, unsigned& block) {
  const bool serial = accumulates && !has_atomic_add<T>;
  grid = serial ? 1 : blocks_for(n, kThreads);
  block = serial ? 1 : kThreads;
}

// The device record of Note [index checks], from the caching allocator.
class BadIndexRecord {
 public:
  explicit BadIndexRecord(Device device)
      : buffer_(Tensor::empty({2}, {.dtype = DType::i64, .device = device})) {
    memset_async(buffer_.raw_data(), 0, sizeof(BadIndex), Stream{});
  }
  BadIndex* get() const { return static_cast<BadIndex*>(buffer_.raw_data()); }
  // Copies the record back (waits for the kernels before it) and throws if it was set.
  void check(const char* op, int64_t n) const {
    BadIndex host{};
    memcpy(&host, buffer_.raw_data(), sizeof(BadIndex), CopyKind::device_to_host);
    EMBER_CHECK(host.flagged == 0, op, ": index ", host.index, " is out of range for a dim of size ", n);
  }

 private:
  Tensor buffer_;
};

// x: (outer, n, inner) any strides, index: (k,) -> out: (outer, k, inner) contiguous.
struct SelectGeometry {
  int64_t outer, n, inner, k;
  int64_t s0, s1, s2, si;  // strides of x, of index
};

template <class T>
__global__ void index_select_kernel(SelectGeometry g, const T* x, const int64_t* index, T* out, BadIndex* bad) {
  const int64_t total = g.outer * g.k * g.inner;
  for (int64_t l = global_thread_index(); l < total; l += grid_threads()) {
    const int64_t c = l % g.inner, j = l / g.inner % g.k, i = l / (g.inner * g.k);
    const int64_t r = checked_index(index[j * g.si], g.n, bad);
    if (r >= 0) out[l] = x[i * g.s0 + r * g.s1 + c * g.s2];
  }
}

// out: (outer, n, inner) contiguous, index: (k,), src: (outer, k, inner) with strides
// (s0, s1, s2): out[i, index[j], c] += src[i, j, c].
template <class T>
__global__ void index_add_kernel(SelectGeometry g, T* out, const int64_t* index, const T* src, BadIndex* bad) {
  const int64_t total = g.outer * g.k * g.inner;
  for (int64_t l = global_thread_index(); l < total; l += grid_threads()) {
    const int64_t c = l % g.inner, j = l / g.inner % g.k, i = l / (g.inner * g.k);
    const int64_t r = checked_index(index[j * g.si], g.n, bad);
    if (r >= 0) add_to(out + (i * g.n + r) * g.inner + c, src[i * g.s0 + j * g.s1 + c * g.s2]);
  }
}

// Over index's shape: operand 0 is out (gather) or out with stride 0 along dim (scatter_add),
// 1 the index, 2 x with stride 0 along dim (gather) or src (scatter_add); `n` and `stride` are
// the size and stride along dim of the tensor that is indexed.
template <class T, bool kScatter>
__global__ void gather_scatter_kernel(int64_t total, StridedOperands<3> a, int64_t n, int64_t stride, BadIndex* bad) {
  for (int64_t l = global_thread_index(); l < total; l += grid_threads()) {
    int64_t off[3];
    operand_offsets(a, l, off);
    const int64_t r = checked_index(reinterpret_cast<const int64_t*>(a.data[1])[off[1]], n, bad);
    if (r < 0) continue;
    T* first = reinterpret_cast<T*>(a.data[0]);
    const T* third = reinterpret_cast<const T*>(a.data[2]);
    if constexpr (kScatter) add_to(first + off[0] + r * stride, third[off[2]]);
    else first[off[0]] = third[off[2] + r * stride];
  }
}

// Operands of gather_scatter_kernel over index's (uncoalesced) shape.
StridedOperands<3> along_index(const Tensor& first, const Tensor& index, const Tensor& third, int64_t dim,
                               bool zero_first, const char* op) {
  EMBER_CHECK(index.dim() <= kMaxElementwiseDims, op, ": at most ", kMaxElementwiseDims, " dims on cuda, got ",
              index.dim());
  StridedOperands<3> a{};
  a.dims = int(index.dim());
  a.data[0] = static_cast<char*>(first.raw_data());
  a.data[1] = static_cast<char*>(index.raw_data());
  a.data[2] = static_cast<char*>(third.raw_data());
  for (int d = 0; d < a.dims; ++d) {
    a.sizes[d] = index.size(d);
    a.strides[0][d] = zero_first && d == dim ? 0 : first.stride(d);
    a.strides[1][d] = index.stride(d);
    a.strides[2][d] = !zero_first && d == dim ? 0 : third.stride(d);
  }
  return a;
}

template <class T, bool kScatter>
void launch_gather_scatter(const char* op, const Tensor& first, int64_t dim, const Tensor& index, const Tensor& third) {
  const int64_t total = index.numel();
  if (total == 0) return;
  const Tensor& indexed = kScatter ? first : third;
  const int64_t n = indexed.dim() ? indexed.size(dim) : 1, stride = indexed.dim() ? indexed.stride(dim) : 0;
  const BadIndexRecord bad(first.device());
  unsigned grid, block;
  launch_shape<T>(total, kScatter, grid, block);
  launch<gather_scatter_kernel<T, kScatter>>(grid, block, 0, Stream{}, total,
                                             along_index(first, index, third, dim, kScatter, op), n, stride, bad.get());
  bad.check(op, n);
}

SelectGeometry select_geometry(const Tensor& strided, const Tensor& index, int64_t n) {
  return {strided.size(0), n, strided.size(2), index.numel(),
          strided.stride(0), strided.stride(1), strided.stride(2), index.stride(0)};
}

}  // namespace

void index_select(const Tensor& x, const Tensor& index, const Tensor& out) {
  const SelectGeometry g = select_geometry(x, index, x.size(1));
  if (g.outer * g.k * g.inner == 0) return;
  dispatch_all(x.dtype(), "index_select", [&]<class T>(TypeTag<T>) {
    const BadIndexRecord bad(x.device());
    launch<index_select_kernel<T>>(blocks_for(g.outer * g.k * g.inner, kThreads), kThreads, 0, Stream{}, g,
                                   x.data<T>(), index.data<int64_t>(), out.data<T>(), bad.get());
    bad.check("index_select", g.n);
  });
}

void index_add(const Tensor& out, const Tensor& index, const Tensor& src) {
  const SelectGeometry g = select_geometry(src, index, out.size(1));
  if (g.outer * g.k * g.inner == 0) return;
  dispatch_numeric(out.dtype(), "index_add", [&]<class T>(TypeTag<T>) {
    const BadIndexRecord bad(out.device());
    unsigned grid, block;
    launch_shape<T>(g.outer * g.k * g.inner, true, grid, block);
    launch<index_add_kernel<T>>(grid, block, 0, Stream{}, g, out.data<T>(), index.data<int64_t>(), src.data<T>(),
                                bad.get());
    bad.check("index_add", g.n);
  });
}

void gather(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out) {
  dispatch_all(x.dtype(), "gather", [&]<class T>(TypeTag<T>) { launch_gather_scatter<T, false>("gather", out, dim, index, x); });
}

void scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  dispatch_numeric(out.dtype(), "scatter_add", [&]<class T>(TypeTag<T>) {
    launch_gather_scatter<T, true>("scatter_add", out, dim, index, src);
  });
}

void bind_index_kernels() {
  ember::index_select_kernel.set_cuda(&cuda::index_select);
  ember::index_add_kernel.set_cuda(&cuda::index_add);
  ember::gather_kernel.set_cuda(&cuda::gather);
  ember::scatter_add_kernel.set_cuda(&cuda::scatter_add);
}

}  // namespace ember::cuda
