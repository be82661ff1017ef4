// ClassBalancedSampler (class_balanced_sampler.h): MPerClassSampler's batches drawn from Philox.
#include "datasets/class_balanced_sampler.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "core/error.h"

namespace ember {
namespace {

// 64-bit random words at consecutive positions of a reservation of Philox blocks (two words per
// block), the way random_permutation (data_loader.h) draws them.
class RandomWords {
 public:
  RandomWords(Generator& gen, uint64_t words) : gen_(gen), first_(gen.reserve((words + 1) / 2)) {}
  // A uniform integer in [0, n); the modulo bias is below 2^-40 for any n that fits in memory.
  uint64_t below(uint64_t n) {
    const auto w = gen_.block(first_ + next_ / 2);
    const uint64_t r = next_ % 2 == 0 ? (uint64_t(w[1]) << 32 | w[0]) : (uint64_t(w[3]) << 32 | w[2]);
    ++next_;
    return r % n;
  }

 private:
  Generator& gen_;
  uint64_t first_;
  uint64_t next_ = 0;
};

}  // namespace

std::vector<int64_t> labels_as_vector(const Tensor& labels) {
  EMBER_CHECK(labels.dim() == 1 && labels.dtype() == DType::i64 && labels.device().type == DeviceType::cpu,
              "ClassBalancedSampler: labels must be a (N) i64 CPU tensor, got shape ", shape_str(labels.shape()), " ",
              dtype_name(labels.dtype()), " on ", labels.device());
  const Tensor c = labels.contiguous();
  const int64_t* p = c.data<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

ClassBalancedSampler::ClassBalancedSampler(const Tensor& labels, ClassBalancedOptions options)
    : ClassBalancedSampler(labels_as_vector(labels), options) {}

ClassBalancedSampler::ClassBalancedSampler(const std::vector<int64_t>& labels, ClassBalancedOptions options)
    : options_(options) {
  const int64_t m = options.per_class, b = options.batch_size;
  EMBER_CHECK(m >= 1, "ClassBalancedSampler: per_class must be at least 1, got ", m);
  EMBER_CHECK(b >= 1 && b % m == 0, "ClassBalancedSampler: batch_size must be a positive multiple of per_class (",
              m, "), got ", b);
  std::map<int64_t, std::vector<int64_t>> by_class;
  for (size_t i = 0; i < labels.size(); ++i) by_class[labels[i]].push_back(int64_t(i));
  for (auto& [label, indices] : by_class) classes_.push_back(std::move(indices));
  EMBER_CHECK(b / m <= num_classes(), "ClassBalancedSampler: batch_size / per_class = ", b / m,
              " classes per batch, but the labels have only ", num_classes(), " classes (batch_size must be at most ",
              num_classes() * m, ")");
  const int64_t length = options.length > 0 ? options.length : int64_t(labels.size());
  EMBER_CHECK(options.length >= 0, "ClassBalancedSampler: length must be >= 0 (0: the dataset size), got ",
              options.length);
  batches_ = length / b;
  EMBER_CHECK(batches_ >= 1, "ClassBalancedSampler: an epoch of ", length, " samples holds no batch of ", b);
}

// Per batch: shuffle the classes (classes - 1 draws) and take the first batch_size / m; from
// each, m samples: Floyd's algorithm (m draws, no copy of the class), or independent picks when
// the class has fewer than m. The count of draws per epoch is fixed.
std::vector<int64_t> ClassBalancedSampler::draw_order(Generator& gen) const {
  const int64_t m = options_.per_class, b = options_.batch_size, c = num_classes();
  RandomWords words(gen, uint64_t(batches_) * uint64_t(c - 1 + b));
  std::vector<int64_t> order;
  order.reserve(size_t(length()));
  std::vector<int64_t> class_order(static_cast<size_t>(c)), picked;
  for (int64_t batch = 0; batch < batches_; ++batch) {
    std::iota(class_order.begin(), class_order.end(), int64_t{0});
    for (int64_t i = c - 1; i > 0; --i) std::swap(class_order[size_t(i)], class_order[words.below(uint64_t(i + 1))]);
    for (int64_t k = 0; k < b / m; ++k) {
      const std::vector<int64_t>& members = classes_[size_t(class_order[size_t(k)])];
      const int64_t n = int64_t(members.size());
      picked.clear();
      for (int64_t j = n - m; j < n; ++j) {  // Floyd: m distinct positions of 0..n-1
        const int64_t t = n < m ? int64_t(words.below(uint64_t(n))) : int64_t(words.below(uint64_t(j + 1)));
        const bool seen = n >= m && std::find(picked.begin(), picked.end(), t) != picked.end();
        picked.push_back(seen ? j : t);
      }
      for (int64_t p : picked) order.push_back(members[size_t(p)]);
    }
  }
  return order;
}

}  // namespace ember
