// Exact k-NN retrieval metrics in tiles (retrieval_metrics.h): P@1, R-Precision, MAP@R.
#include "apps/train/retrieval_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "core/error.h"
#include "core/parallel.h"

namespace ember::apps {
namespace {

struct Neighbour {
  float similarity;
  int64_t index;
};

// The ranking order of Note [Ties]: higher similarity first, then lower index.
bool ranks_before(const Neighbour& a, const Neighbour& b) {
  return a.similarity > b.similarity || (a.similarity == b.similarity && a.index < b.index);
}

// The embeddings as L2-normalised f32 rows, transposed to (D, N) so that one query's
// similarities to a tile of references are a loop over contiguous references (vectorised).
struct NormalisedEmbeddings {
  int64_t n = 0, d = 0;
  std::vector<float> rows;        // (N, D)
  std::vector<float> transposed;  // (D, N)
};

NormalisedEmbeddings normalise(const Tensor& embeddings) {
  EMBER_CHECK(embeddings.dim() == 2, "retrieval_metrics: embeddings must be (N, D), got shape ",
              shape_str(embeddings.shape()));
  EMBER_CHECK(embeddings.dtype() == DType::f32 || embeddings.dtype() == DType::f64,
              "retrieval_metrics: embeddings must be f32 or f64, got ", dtype_name(embeddings.dtype()));
  const Tensor e = embeddings.cpu().to(DType::f32).contiguous();
  NormalisedEmbeddings out{e.size(0), e.size(1), {}, {}};
  const float* src = e.data<float>();
  out.rows.assign(src, src + e.numel());
  out.transposed.resize(out.rows.size());
  for (int64_t i = 0; i < out.n; ++i) {
    float* row = out.rows.data() + i * out.d;
    double norm2 = 0;
    for (int64_t k = 0; k < out.d; ++k) norm2 += double(row[k]) * double(row[k]);
    const float scale = float(1.0 / std::max(std::sqrt(norm2), 1e-12));  // torch's F.normalize eps
    for (int64_t k = 0; k < out.d; ++k) {
      row[k] *= scale;
      out.transposed[size_t(k * out.n + i)] = row[k];
    }
  }
  return out;
}

std::vector<int64_t> label_vector(const Tensor& labels, int64_t n) {
  EMBER_CHECK(labels.dim() == 1 && labels.dtype() == DType::i64, "retrieval_metrics: labels must be (N) i64, got shape ",
              shape_str(labels.shape()), " ", dtype_name(labels.dtype()));
  EMBER_CHECK(labels.size(0) == n, "retrieval_metrics: ", n, " embeddings but ", labels.size(0), " labels");
  return labels.cpu().contiguous().to_vector<int64_t>();
}

// R per query: the other samples of its label.
std::vector<int64_t> relevant_counts(const std::vector<int64_t>& labels) {
  std::unordered_map<int64_t, int64_t> count;
  for (int64_t y : labels) ++count[y];
  std::vector<int64_t> r(labels.size());
  for (size_t i = 0; i < labels.size(); ++i) r[i] = count[labels[i]] - 1;
  return r;
}

// Queries handled together by similarity_tile: each reference value loaded feeds four rows.
constexpr int64_t query_group = 4;

// out[g * len + t] = <query g, reference t0 + t> for g < query_group, t < len (all normalised).
// Every similarity is the same sum in the same order whatever the group, tile or thread, so
// equal inputs give bitwise equal results (Note [Ties]).
void similarity_tile(const NormalisedEmbeddings& e, const float* const (&query)[query_group], int64_t t0, int64_t len,
                     float* out) {
  std::fill(out, out + query_group * len, 0.0f);
  float* out0 = out;
  float* out1 = out + len;
  float* out2 = out + 2 * len;
  float* out3 = out + 3 * len;
  for (int64_t k = 0; k < e.d; ++k) {
    const float a = query[0][k], b = query[1][k], c = query[2][k], d = query[3][k];
    const float* ref = e.transposed.data() + k * e.n + t0;
    for (int64_t t = 0; t < len; ++t) {
      const float r = ref[t];
      out0[t] += a * r;
      out1[t] += b * r;
      out2[t] += c * r;
      out3[t] += d * r;
    }
  }
}

// A query's best candidates so far. Once `pruned`, `worst` is the keep-th best candidate seen
// up to the last pruning: anything that does not rank before it can never be in the top keep.
struct Candidates {
  std::vector<Neighbour> kept;
  bool pruned = false;
  Neighbour worst{};
};

void prune(Candidates& best, size_t keep);

// Merges a tile's similarities into a query's candidates (Note [Tiles]). The list may grow to
// twice `keep` before nth_element cuts it back, so the partial sorts cost O(1) per candidate.
void merge_tile(Candidates& best, size_t keep, const float* sims, int64_t t0, int64_t len, int64_t self) {
  for (int64_t t = 0; t < len; ++t) {
    const Neighbour cand{sims[t], t0 + t};
    if (cand.index == self || (best.pruned && !ranks_before(cand, best.worst))) continue;
    best.kept.push_back(cand);
  }
  if (best.kept.size() >= 2 * keep + 64) prune(best, keep);
}

// Cuts the candidates to the best `keep` (unordered) and records the worst of them.
void prune(Candidates& best, size_t keep) {
  if (best.kept.size() <= keep) return;
  std::nth_element(best.kept.begin(), best.kept.begin() + std::ptrdiff_t(keep - 1), best.kept.end(), ranks_before);
  best.kept.resize(keep);
  best.worst = best.kept[keep - 1];  // where nth_element put the keep-th best
  best.pruned = true;
}

QueryScores score_ranking(const std::vector<Neighbour>& ranked, const std::vector<int64_t>& labels, int64_t query,
                          int64_t r) {
  QueryScores s;
  s.r = r;
  const int64_t y = labels[size_t(query)];
  s.precision_at_1 = labels[size_t(ranked[0].index)] == y ? 1.0 : 0.0;
  int64_t hits = 0;
  double precision_sum = 0;
  for (int64_t i = 0; i < r; ++i) {
    if (labels[size_t(ranked[size_t(i)].index)] != y) continue;
    ++hits;
    precision_sum += double(hits) / double(i + 1);
  }
  s.r_precision = double(hits) / double(r);
  s.map_at_r = precision_sum / double(r);
  return s;
}

}  // namespace

std::vector<QueryScores> retrieval_scores(const Tensor& embeddings, const Tensor& labels, RetrievalOptions options) {
  EMBER_CHECK(options.query_block >= 1 && options.reference_tile >= 1,
              "retrieval_metrics: query_block and reference_tile must be >= 1, got ", options.query_block, " and ",
              options.reference_tile);
  const NormalisedEmbeddings e = normalise(embeddings);
  const std::vector<int64_t> label = label_vector(labels, e.n);
  const std::vector<int64_t> r = relevant_counts(label);
  std::vector<QueryScores> scores(size_t(e.n));
  const int64_t blocks = (e.n + options.query_block - 1) / options.query_block;
  const std::vector<float> no_query(size_t(e.d), 0.0f);  // pads a last group of fewer than four
  parallel_for(0, blocks, 1, [&](int64_t block_begin, int64_t block_end) {
    std::vector<float> sims(size_t(query_group * options.reference_tile));
    std::vector<Candidates> best(size_t(options.query_block));
    std::vector<int64_t> ranked_queries;  // the block's queries with R >= 1
    for (int64_t block = block_begin; block < block_end; ++block) {
      const int64_t q0 = block * options.query_block, q1 = std::min(e.n, q0 + options.query_block);
      ranked_queries.clear();
      for (int64_t q = q0; q < q1; ++q) {
        best[size_t(q - q0)] = {};
        if (r[size_t(q)] > 0) ranked_queries.push_back(q);
        else scores[size_t(q)].lone = true;  // nothing to rank
      }
      for (int64_t t0 = 0; t0 < e.n; t0 += options.reference_tile) {
        const int64_t len = std::min(options.reference_tile, e.n - t0);
        for (size_t g = 0; g < ranked_queries.size(); g += query_group) {
          const size_t count = std::min<size_t>(query_group, ranked_queries.size() - g);
          const float* group[query_group];
          for (size_t i = 0; i < size_t(query_group); ++i)
            group[i] = i < count ? e.rows.data() + ranked_queries[g + i] * e.d : no_query.data();
          similarity_tile(e, group, t0, len, sims.data());
          for (size_t i = 0; i < count; ++i) {
            const int64_t q = ranked_queries[g + i];
            merge_tile(best[size_t(q - q0)], size_t(r[size_t(q)]), sims.data() + int64_t(i) * len, t0, len, q);
          }
        }
      }
      for (int64_t q : ranked_queries) {
        prune(best[size_t(q - q0)], size_t(r[size_t(q)]));
        std::vector<Neighbour>& ranked = best[size_t(q - q0)].kept;
        std::sort(ranked.begin(), ranked.end(), ranks_before);
        scores[size_t(q)] = score_ranking(ranked, label, q, r[size_t(q)]);
      }
    }
  });
  return scores;
}

RetrievalMetrics average_scores(const std::vector<QueryScores>& scores) {
  RetrievalMetrics m;
  for (const QueryScores& s : scores) {
    if (s.lone) {
      ++m.lone_queries;
      continue;
    }
    ++m.queries;
    m.precision_at_1 += s.precision_at_1;
    m.r_precision += s.r_precision;
    m.map_at_r += s.map_at_r;
  }
  const double n = m.queries > 0 ? double(m.queries) : std::numeric_limits<double>::quiet_NaN();
  m.precision_at_1 /= n;
  m.r_precision /= n;
  m.map_at_r /= n;
  return m;
}

RetrievalMetrics retrieval_metrics(const Tensor& embeddings, const Tensor& labels, RetrievalOptions options) {
  return average_scores(retrieval_scores(embeddings, labels, options));
}

}  // namespace ember::apps
