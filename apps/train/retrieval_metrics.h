// Retrieval accuracy of embeddings: every sample queries all the others by cosine similarity
// (exact k-NN, the query itself excluded), scored as pytorch-metric-learning's
// AccuracyCalculator scores "precision_at_1", "r_precision" and "mean_average_precision_at_r"
// (reference = query set, ref_includes_query = True, avg_of_avgs = False).
//
//   RetrievalMetrics m = retrieval_metrics(test_embeddings, test_labels);   // (N, D), (N) i64
//   std::cout << m.precision_at_1 << " " << m.r_precision << " " << m.map_at_r << "\n";
//
// Definitions, for a query q of label y, with neighbours ranked by similarity:
//   R        the number of other samples of label y (the query is not its own reference).
//   P@1      1 if the nearest neighbour has label y, else 0.
//   R-Prec   (neighbours of label y among the first R) / R.
//   MAP@R    (1 / R) * sum over the positions i <= R holding label y of (label-y hits in 1..i) / i.
// A query with R = 0 (its class has no other member) is left out of all three averages, as
// PML leaves out "lone" queries; if every query is lone the averages are NaN.
//
// Note [Ties]: neighbours of equal similarity rank by reference index, lower first (PML's
// order for ties is whatever faiss returns). The similarity of a pair is computed the same way
// whatever the tiling, so results do not depend on RetrievalOptions or the thread count.
//
// Note [Tiles]: the N x N similarities are never held. Queries are processed in blocks (in
// parallel on the thread pool, core/parallel.h); each block walks the references in tiles,
// and for each query keeps its best R candidates: those of a tile that beat the R-th best seen
// so far join a list that a partial sort (nth_element) cuts back to R whenever it doubles.
// Memory: a 4 x tile buffer plus block x (2R + tile) candidates.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace ember::apps {

struct RetrievalMetrics {
  double precision_at_1 = 0;
  double r_precision = 0;
  double map_at_r = 0;
  int64_t queries = 0;       // queries averaged (those with R >= 1)
  int64_t lone_queries = 0;  // queries left out (R = 0)
};

// One query's scores; `lone` when R = 0 (the scores are then 0 and not meaningful).
struct QueryScores {
  bool lone = false;
  int64_t r = 0;
  double precision_at_1 = 0;
  double r_precision = 0;
  double map_at_r = 0;
};

struct RetrievalOptions {
  int64_t query_block = 32;      // queries per parallel work item
  int64_t reference_tile = 1024; // references per similarity tile
};

// Per-query scores. embeddings: (N, D) floating, any device (copied to the CPU as f32; rows are
// L2-normalised); labels: (N) i64.
std::vector<QueryScores> retrieval_scores(const Tensor& embeddings, const Tensor& labels,
                                          RetrievalOptions options = {});
// The averages of retrieval_scores over the non-lone queries.
RetrievalMetrics retrieval_metrics(const Tensor& embeddings, const Tensor& labels, RetrievalOptions options = {});
RetrievalMetrics average_scores(const std::vector<QueryScores>& scores);

}  // namespace ember::apps
