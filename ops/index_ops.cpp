#include "ops/index_ops.h"

#include "autograd/graph.h"
#include "ops/reduced_precision.h"
#include "ops/kernels.h"
#include "ops/ops.h"

namespace ember {

using autograd::needs_grad;
using autograd::record;
using autograd::save;
using autograd::TensorList;

namespace {

void check_index(const char* op, const Tensor& x, const Tensor& index) {
  EMBER_CHECK(index.dtype() == DType::i64, op, ": index must be i64, got ", dtype_name(index.dtype()));
  check_same_device(op, x, index);
}

// (outer, n, inner) view of a contiguous tensor around dim d.
Tensor around(const Tensor& t, int64_t d) {
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= t.shape()[size_t(i)];
  for (int64_t i = d + 1; i < t.dim(); ++i) inner *= t.shape()[size_t(i)];
  return t.reshape({outer, t.dim() ? t.shape()[size_t(d)] : 1, inner});
}

void check_gather_shapes(const char* op, const Tensor& x, int64_t d, const Tensor& index) {
  EMBER_CHECK(index.dim() == x.dim(), op, ": index must have the input's rank ", x.dim(), ", got shape ",
              shape_str(index.shape()));
  for (int64_t k = 0; k < x.dim(); ++k)
    EMBER_CHECK(k == d || index.shape()[size_t(k)] <= x.shape()[size_t(k)], op, ": index shape ",
                shape_str(index.shape()), " exceeds input shape ", shape_str(x.shape()), " in dim ", k);
}

}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  check_index("index_select", x, index);
  EMBER_CHECK(index.dim() == 1, "index_select: index must be 1-D, got shape ", shape_str(index.shape()));
  const int64_t d = normalize_dim(dim, x.dim(), "index_select");
  Shape shape = x.shape();
  if (x.dim()) shape[size_t(d)] = index.numel();
  Tensor out = Tensor::empty(shape, x.options());
  Tensor xc = x.contiguous();
  index_select_kernel(x.device(), around(xc, d), index, around(out, d));
  if (needs_grad(x))
    record("index_select", {x}, out, [idx = save(index), d, from = x.shape()](const Tensor& g) -> TensorList {
      return {index_add(zeros(from, g.options()), d, idx.get("index_select"), g)};
    });
  return out;
}

Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  check_index("index_add", x, index);
  check_same_dtype("index_add", x, src);
  if (is_reduced_float(x.dtype())) return narrowed(index_add(widened(x), dim, index, widened(src)), x.dtype());
  const int64_t d = normalize_dim(dim, x.dim(), "index_add");
  Shape expected = x.shape();
  if (x.dim()) expected[size_t(d)] = index.numel();
  EMBER_CHECK(src.shape() == expected, "index_add: src has shape ", shape_str(src.shape()), ", expected ",
              shape_str(expected));
  Tensor out = x.clone().detach();
  index_add_kernel(x.device(), around(out, d), index, around(src.contiguous(), d));
  if (needs_grad({x, src}))
    record("index_add", {x, src}, out, [idx = save(index), d](const Tensor& g) -> TensorList {
      return {g, index_select(g, d, idx.get("index_add"))};
    });
  return out;
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  check_index("gather", x, index);
  const int64_t d = normalize_dim(dim, x.dim(), "gather");
  check_gather_shapes("gather", x, d, index);
  Tensor out = Tensor::empty(index.shape(), x.options());
  gather_kernel(x.device(), x, d, index, out);
  if (needs_grad(x))
    record("gather", {x}, out, [idx = save(index), d, from = x.shape()](const Tensor& g) -> TensorList {
      return {scatter_add(zeros(from, g.options()), d, idx.get("gather"), g)};
    });
  return out;
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  check_index("scatter_add", x, index);
  check_same_dtype("scatter_add", x, src);
  if (is_reduced_float(x.dtype())) return narrowed(scatter_add(widened(x), dim, index, widened(src)), x.dtype());
  const int64_t d = normalize_dim(dim, x.dim(), "scatter_add");
  check_gather_shapes("scatter_add", x, d, index);
  EMBER_CHECK(src.shape() == index.shape(), "scatter_add: src has shape ", shape_str(src.shape()),
              ", expected the index's shape ", shape_str(index.shape()));
  Tensor out = x.clone().detach();
  scatter_add_kernel(x.device(), out, d, index, src);
  if (needs_grad({x, src}))
    record("scatter_add", {x, src}, out, [idx = save(index), d](const Tensor& g) -> TensorList {
      return {g, gather(g, d, idx.get("scatter_add"))};
    });
  return out;
}

Tensor one_hot(const Tensor& labels, int64_t classes, DType dtype) {
  EMBER_CHECK(labels.dtype() == DType::i64, "one_hot: labels must be i64, got ", dtype_name(labels.dtype()));
  EMBER_CHECK(classes > 0, "one_hot: classes must be positive, got ", classes);
  // Note [one_hot negatives]: scatter_add counts a negative index from the end, so -1 would
  // silently become class `classes - 1`. A class is never negative: the minimum is read back
  // (on CUDA scatter_add synchronises for its own index check anyway, Note [index checks]).
  if (labels.numel() > 0) {
    const auto lowest = int64_t(min(labels).item());
    EMBER_CHECK(lowest >= 0, "one_hot: classes are in [0, ", classes, "), got a negative label ", lowest);
  }
  Shape shape = labels.shape();
  shape.push_back(classes);
  Tensor out = zeros(shape, {.dtype = dtype, .device = labels.device()});
  Tensor idx = labels.unsqueeze(-1).contiguous();
  scatter_add_kernel(labels.device(), out, labels.dim(), idx, ones(idx.shape(), {.dtype = dtype, .device = labels.device()}));
  return out;
}

}  // namespace ember
