#include "ops/shape_ops.h"

#include <algorithm>
#include <optional>

#include "autograd/graph.h"
#include "ops/kernels.h"
#include "ops/ops.h"

namespace ember {

using autograd::needs_grad;
using autograd::record;
using autograd::TensorList;

namespace {

// Records a view op whose backward maps the output gradient back with `back`.
template <class Back>
Tensor recorded_view(const char* name, const Tensor& x, Tensor y, Back back) {
  if (needs_grad(x))
    record(name, {x}, y, [back](const Tensor& g) -> TensorList { return {back(g)}; });
  return y;
}

Shape infer_shape(const Shape& shape, int64_t numel, const char* op, const Shape& from) {
  Shape out = shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      EMBER_CHECK(infer < 0, op, ": only one dim can be -1, got ", shape_str(shape));
      infer = int64_t(i);
    } else {
      EMBER_CHECK(out[i] >= 0, op, ": invalid size ", out[i], " in ", shape_str(shape));
      known = checked_size_mul(known, out[i], op);
    }
  }
  if (infer >= 0) {
    EMBER_CHECK(known != 0 && numel % known == 0, op, ": shape ", shape_str(shape), " is invalid for ", numel,
                " elements (input shape ", shape_str(from), ")");
    out[size_t(infer)] = numel / known;
  }
  EMBER_CHECK(numel_of(out, op) == numel, op, ": shape ", shape_str(shape), " is invalid for an input of shape ",
              shape_str(from), " (", numel, " elements)");
  return out;
}

// Strides that let (shape, strides) be read as `target` without a copy, if any (PyTorch's
// computeStride): each run of merged input dims must be contiguous in memory.
std::optional<Strides> view_strides(const Shape& shape, const Strides& strides, const Shape& target) {
  if (numel_of(shape) == 0 || shape.empty()) return contiguous_strides(target);
  Strides out(target.size());
  int64_t view_d = int64_t(target.size()) - 1;
  int64_t base_stride = strides.back(), tensor_numel = 1, view_numel = 1;
  for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= shape[size_t(d)];
    const bool chunk_ends = d == 0 || (shape[size_t(d - 1)] != 1 &&
                                       strides[size_t(d - 1)] != tensor_numel * base_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || target[size_t(view_d)] == 1)) {
      out[size_t(view_d)] = view_numel * base_stride;
      view_numel *= target[size_t(view_d)];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (d > 0) {
      base_stride = strides[size_t(d - 1)];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

// normalize_dim accepts dim 0 / -1 of a 0-d tensor (for reductions); ops that index a dim's
// size must refuse it instead of reading past the empty shape.
void check_has_dims(const Tensor& x, const char* op) {
  EMBER_CHECK(x.dim() > 0, op, ": expected a tensor with at least one dim, got a 0-d tensor");
}

}  // namespace

Tensor view(const Tensor& x, const Shape& shape) {
  const Shape target = infer_shape(shape, x.numel(), "view", x.shape());
  auto strides = view_strides(x.shape(), x.strides(), target);
  EMBER_CHECK(strides.has_value(), "view: shape ", shape_str(target), " is incompatible with the input's layout (shape ",
              shape_str(x.shape()), ", strides ", shape_str(x.strides()), "); use reshape(), which copies");
  Shape from = x.shape();
  return recorded_view("view", x, Tensor::view_of(x, target, *strides, x.offset()),
                       [from](const Tensor& g) { return g.reshape(from); });
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  const Shape target = infer_shape(shape, x.numel(), "reshape", x.shape());
  if (view_strides(x.shape(), x.strides(), target)) return view(x, target);
  return view(x.contiguous(), target);
}

Tensor permute(const Tensor& x, const Dims& order) {
  EMBER_CHECK(int64_t(order.size()) == x.dim(), "permute: expected ", x.dim(), " dims, got ", shape_str(order));
  Shape shape(order.size());
  Strides strides(order.size());
  Dims inverse(order.size());
  std::vector<bool> seen(order.size(), false);
  for (size_t i = 0; i < order.size(); ++i) {
    const int64_t d = normalize_dim(order[i], x.dim(), "permute");
    EMBER_CHECK(!seen[size_t(d)], "permute: dim ", order[i], " repeats in ", shape_str(order));
    seen[size_t(d)] = true;
    shape[i] = x.shape()[size_t(d)];
    strides[i] = x.strides()[size_t(d)];
    inverse[size_t(d)] = int64_t(i);
  }
  return recorded_view("permute", x, Tensor::view_of(x, shape, strides, x.offset()),
                       [inverse](const Tensor& g) { return g.permute(inverse); });
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  if (x.dim() == 0) {  // transpose(0, 0) of a scalar is the scalar (as in PyTorch)
    normalize_dim(dim0, 0, "transpose");
    normalize_dim(dim1, 0, "transpose");
    return permute(x, {});
  }
  Dims order(size_t(x.dim()));
  for (int64_t i = 0; i < x.dim(); ++i) order[size_t(i)] = i;
  std::swap(order[size_t(normalize_dim(dim0, x.dim(), "transpose"))], order[size_t(normalize_dim(dim1, x.dim(), "transpose"))]);
  return permute(x, order);
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  if (x.dim() == 0) return x.reshape({1});
  const int64_t s = normalize_dim(start_dim, x.dim(), "flatten"), e = normalize_dim(end_dim, x.dim(), "flatten");
  EMBER_CHECK(s <= e, "flatten: start_dim ", start_dim, " comes after end_dim ", end_dim);
  Shape shape(x.shape().begin(), x.shape().begin() + s);
  int64_t n = 1;
  for (int64_t d = s; d <= e; ++d) n *= x.shape()[size_t(d)];
  shape.push_back(n);
  shape.insert(shape.end(), x.shape().begin() + e + 1, x.shape().end());
  return reshape(x, shape);
}

Tensor squeeze(const Tensor& x) {
  Shape shape;
  for (int64_t n : x.shape()) if (n != 1) shape.push_back(n);
  return reshape(x, shape);
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  const int64_t d = normalize_dim(dim, x.dim(), "squeeze");
  if (x.dim() == 0 || x.shape()[size_t(d)] != 1) return x;
  Shape shape = x.shape();
  Strides strides = x.strides();
  shape.erase(shape.begin() + d);
  strides.erase(strides.begin() + d);
  Shape from = x.shape();
  return recorded_view("squeeze", x, Tensor::view_of(x, shape, strides, x.offset()),
                       [from](const Tensor& g) { return g.reshape(from); });
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  const int64_t d = normalize_dim(dim, x.dim() + 1, "unsqueeze");
  Shape shape = x.shape();
  Strides strides = x.strides();
  const int64_t stride = d < x.dim() ? x.strides()[size_t(d)] * x.shape()[size_t(d)] : 1;
  shape.insert(shape.begin() + d, 1);
  strides.insert(strides.begin() + d, stride);
  Shape from = x.shape();
  return recorded_view("unsqueeze", x, Tensor::view_of(x, shape, strides, x.offset()),
                       [from](const Tensor& g) { return g.reshape(from); });
}

Tensor expand(const Tensor& x, const Shape& shape) {
  EMBER_CHECK(int64_t(shape.size()) >= x.dim(), "expand: cannot expand shape ", shape_str(x.shape()), " to ",
              shape_str(shape), " (fewer dims)");
  Shape target = shape;
  const size_t lead = shape.size() - size_t(x.dim());
  for (size_t i = 0; i < shape.size(); ++i) {
    const bool own = i >= lead;
    if (target[i] == -1) {
      EMBER_CHECK(own, "expand: -1 is not allowed for the new leading dim ", i);
      target[i] = x.shape()[i - lead];
    }
    if (own) {
      const int64_t n = x.shape()[i - lead];
      EMBER_CHECK(n == target[i] || n == 1, "expand: cannot expand shape ", shape_str(x.shape()), " to ",
                  shape_str(shape), " (dim ", i, ": ", n, " vs ", target[i], ")");
    }
  }
  if (target == x.shape()) return x;
  Strides strides = broadcast_strides(x.shape(), x.strides(), target);
  Shape from = x.shape();
  return recorded_view("expand", x, Tensor::view_of(x, target, strides, x.offset()),
                       [from](const Tensor& g) { return sum_to(g, from); });
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  check_has_dims(x, "slice");
  const int64_t d = normalize_dim(dim, x.dim(), "slice");
  EMBER_CHECK(step > 0, "slice: step must be positive, got ", step);
  const int64_t n = x.shape()[size_t(d)];
  auto clampi = [n](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n); };
  start = clampi(start);
  end = std::max(clampi(end), start);
  Shape shape = x.shape();
  Strides strides = x.strides();
  shape[size_t(d)] = (end - start + step - 1) / step;
  strides[size_t(d)] *= step;
  Tensor y = Tensor::view_of(x, shape, strides, x.offset() + start * x.strides()[size_t(d)]);
  Shape from = x.shape();
  return recorded_view("slice", x, y, [from, d, start, end, step](const Tensor& g) {
    Tensor gx = zeros(from, g.options());
    gx.slice(d, start, end, step).copy_(g);
    return gx;
  });
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  check_has_dims(x, "narrow");
  const int64_t d = normalize_dim(dim, x.dim(), "narrow");
  const int64_t n = x.shape()[size_t(d)];
  if (start < 0) start += n;
  EMBER_CHECK(start >= 0 && length >= 0 && start + length <= n, "narrow: range [", start, ", ", start + length,
              ") is out of bounds for dim ", dim, " of size ", n);
  return slice(x, d, start, start + length);
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  check_has_dims(x, "select");
  const int64_t d = normalize_dim(dim, x.dim(), "select");
  const int64_t n = x.shape()[size_t(d)];
  EMBER_CHECK(index >= -n && index < n, "select: index ", index, " is out of range for dim ", dim, " of size ", n);
  if (index < 0) index += n;
  return squeeze(narrow(x, d, index, 1), d);
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  EMBER_CHECK(!tensors.empty(), "cat: expected at least one tensor");
  const Tensor& first = tensors[0];
  EMBER_CHECK(first.dim() > 0, "cat: expected tensors with at least one dim, got a 0-d tensor (use stack)");
  const int64_t d = normalize_dim(dim, first.dim(), "cat");
  Shape shape = first.shape();
  shape[size_t(d)] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    check_same_device("cat", first, t);
    check_same_dtype("cat", first, t);
    EMBER_CHECK(t.dim() == first.dim(), "cat: tensor ", i, " has rank ", t.dim(), ", expected ", first.dim());
    for (int64_t k = 0; k < t.dim(); ++k)
      EMBER_CHECK(k == d || t.shape()[size_t(k)] == first.shape()[size_t(k)], "cat: tensor ", i, " has shape ",
                  shape_str(t.shape()), ", expected ", shape_str(first.shape()), " except in dim ", d);
    shape[size_t(d)] += t.shape()[size_t(d)];
  }
  Tensor out = Tensor::empty(shape, first.options());
  std::vector<int64_t> sizes;
  int64_t at = 0;
  for (const Tensor& t : tensors) {
    const int64_t n = t.shape()[size_t(d)];
    copy_kernel(out.device(), t, Tensor::view_of(out, t.shape(), out.strides(), at * out.strides()[size_t(d)]));
    sizes.push_back(n);
    at += n;
  }
  bool any = false;
  for (const Tensor& t : tensors) any = any || needs_grad(t);
  if (any)
    autograd::record("cat", tensors, out, [sizes, d](const Tensor& g) -> TensorList {
      TensorList grads;
      int64_t start = 0;
      for (int64_t n : sizes) {
        grads.push_back(g.narrow(d, start, n));
        start += n;
      }
      return grads;
    });
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  EMBER_CHECK(!tensors.empty(), "stack: expected at least one tensor");
  const int64_t d = normalize_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  for (size_t i = 0; i < tensors.size(); ++i) {
    EMBER_CHECK(tensors[i].shape() == tensors[0].shape(), "stack: tensor ", i, " has shape ",
                shape_str(tensors[i].shape()), ", expected ", shape_str(tensors[0].shape()));
    parts.push_back(tensors[i].unsqueeze(d));
  }
  return cat(parts, d);
}

std::vector<Tensor> split(const Tensor& x, int64_t size, int64_t dim) {
  EMBER_CHECK(size > 0, "split: size must be positive, got ", size);
  check_has_dims(x, "split");
  const int64_t d = normalize_dim(dim, x.dim(), "split");
  std::vector<Tensor> parts;
  const int64_t n = x.shape()[size_t(d)];
  for (int64_t start = 0; start < n; start += size) parts.push_back(x.narrow(d, start, std::min(size, n - start)));
  return parts;
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  EMBER_CHECK(chunks > 0, "chunk: chunks must be positive, got ", chunks);
  check_has_dims(x, "chunk");
  const int64_t n = x.shape()[size_t(normalize_dim(dim, x.dim(), "chunk"))];
  return split(x, std::max<int64_t>(1, (n + chunks - 1) / chunks), dim);
}

}  // namespace ember
