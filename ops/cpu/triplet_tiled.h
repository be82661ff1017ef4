// The all-triplet margin loss on the CPU for batches of small classes, in symmetric distance tiles
// (Note [Triplets in tiles] in ops/cpu/triplet_tiled.cpp). ops/cpu/triplet.cpp sends a batch here
// when triplets_fit_tiles(labels), and any other through whole rows of distances per anchor.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/pair_tiles.h"

namespace ember::cpu {

// The most positives (other rows of its label) that a row may have on the tiled path.
inline constexpr int64_t kMaxTiledPositives = 64;

// labels (B) i64 contiguous: whether no class has more than kMaxTiledPositives + 1 rows.
bool triplets_fit_tiles(const Tensor& labels);

// triplet_forward's contract, for a batch that fits the tiles.
void triplet_tiled(const PairTiles& tiles, const Tensor& e, const Tensor& labels, double margin, const Tensor& poison,
                   const Tensor& loss, const Tensor& triplets, const Tensor& term_grad);

}  // namespace ember::cpu
