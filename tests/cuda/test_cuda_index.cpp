// Indexing kernels on cuda (ops/cuda/index.cu) against the CPU, including repeated indices
// (atomics), negative indices, non-contiguous operands, the single-thread u8 path, and
// out-of-range indices reported as an Error without touching memory (Note [index checks]).
#include "cuda_ops_support.h"

using namespace ember;
using test::check_equal;
using test::check_matches;
using test::kCuda;
using test::Layout;
using test::on_cuda;
using Catch::Matchers::Contains;

namespace {
Generator gen(31);
}

TEST_CASE("cuda: index_select and index_add (repeated and negative indices) equal the CPU's") {
  Tensor x = randn({4, 9, 5}, {}, &gen);
  Tensor idx = tensor<int64_t>({8, 0, -1, 3, 3, 8, 2});
  for (int64_t d : {0, 1, 2}) {
    INFO("dim " << d);
    Tensor i = d == 0 ? tensor<int64_t>({3, 0, -4, 3}) : (d == 2 ? tensor<int64_t>({4, 0, 4, -2}) : idx);
    check_matches(index_select(on_cuda(x, Layout::permuted), d, on_cuda(i, Layout::strided)), index_select(x, d, i), 0, 0);
    Shape src_shape = x.shape();
    src_shape[size_t(d)] = i.numel();
    Tensor src = randn(src_shape, {}, &gen);
    check_matches(index_add(on_cuda(x), d, on_cuda(i), on_cuda(src, Layout::strided)), index_add(x, d, i, src), 1e-6, 1e-6);
  }
  for (DType dt : {DType::f64, DType::i64, DType::i32, DType::u8, DType::boolean}) {
    INFO(dtype_name(dt));
    Tensor v = randint(0, 20, {6, 7}, {.dtype = DType::i64}, &gen).to(dt);
    Tensor i = tensor<int64_t>({6, 6, 0, -7});
    test::check_close(index_select(on_cuda(v), 1, on_cuda(i)), index_select(v, 1, i), 0, 0);
    if (dt == DType::boolean) continue;
    Tensor src = randint(0, 5, {6, 4}, {.dtype = DType::i64}, &gen).to(dt);
    test::check_close(index_add(on_cuda(v), 1, on_cuda(i), on_cuda(src)), index_add(v, 1, i, src), 0, 0);
  }
}

TEST_CASE("cuda: gather and scatter_add (collisions, strided index and source) equal the CPU's") {
  Tensor x = randn({5, 8, 3}, {}, &gen);
  for (int64_t d : {0, 1, 2}) {
    INFO("dim " << d);
    Tensor index = randint(0, x.size(d), {4, 6, 3}, {.dtype = DType::i64}, &gen);
    check_matches(gather(on_cuda(x, Layout::permuted), d, on_cuda(index, Layout::strided)), gather(x, d, index), 0, 0);
    Tensor src = randn({4, 6, 3}, {}, &gen);
    check_matches(scatter_add(on_cuda(x), d, on_cuda(index, Layout::permuted), on_cuda(src, Layout::strided)),
                  scatter_add(x, d, index, src), 1e-6, 1e-6);
  }
  for (DType dt : {DType::f64, DType::i64, DType::i32, DType::u8}) {
    INFO(dtype_name(dt));
    Tensor v = randint(0, 20, {3, 10}, {.dtype = DType::i64}, &gen).to(dt);
    Tensor index = randint(0, 10, {3, 12}, {.dtype = DType::i64}, &gen), src = randint(0, 5, {3, 12}, {.dtype = DType::i64}, &gen).to(dt);
    test::check_close(scatter_add(on_cuda(v), 1, on_cuda(index), on_cuda(src)), scatter_add(v, 1, index, src), 0, 0);
    test::check_close(gather(on_cuda(v), 1, on_cuda(index)), gather(v, 1, index), 0, 0);
  }
  Tensor labels = tensor<int64_t>({2, 0, 4, 4});
  check_equal<float>(one_hot(on_cuda(labels), 5, DType::f32), one_hot(labels, 5, DType::f32));
}

TEST_CASE("cuda: an out-of-range index, checked on the device, is an Error naming the op and the index") {
  Tensor x = on_cuda(randn({4, 5}, {}, &gen));
  REQUIRE_THROWS_WITH(index_select(x, 0, on_cuda(tensor<int64_t>({1, 4, 0}))),
                      Contains("index_select: index 4 is out of range for a dim of size 4"));
  REQUIRE_THROWS_WITH(index_add(x, 1, on_cuda(tensor<int64_t>({-6})), on_cuda(ones({4, 1}))),
                      Contains("index_add: index -6 is out of range for a dim of size 5"));
  REQUIRE_THROWS_WITH(gather(x, 1, on_cuda(tensor<int64_t>({0, 1, 1000}, {1, 3}))),
                      Contains("gather: index 1000 is out of range for a dim of size 5"));
  Tensor target = zeros({2, 3}, {.device = kCuda});
  REQUIRE_THROWS_WITH(scatter_add(target, 0, on_cuda(tensor<int64_t>({0, 2, 1}, {1, 3})), on_cuda(ones({1, 3}))),
                      Contains("scatter_add: index 2 is out of range for a dim of size 2"));
  CHECK(target.cpu().to_vector<float>() == std::vector<float>(6, 0.0f));
  // The device is usable afterwards, and a valid call after a failed one does not report again.
  check_matches(gather(x, 1, on_cuda(tensor<int64_t>({4, 0}, {1, 2}))), gather(x.cpu(), 1, tensor<int64_t>({4, 0}, {1, 2})), 0, 0);
}
