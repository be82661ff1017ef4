// The all-triplet margin loss on the CPU for batches of small classes, in symmetric distance tiles
// (Note [Triplets in tiles] in ops/cpu/triplet_tiled.cpp). ops/cpu/triplet.cpp offers every batch
// here first, and takes a batch that does not fit through whole rows of distances per anchor.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/pair_tiles.h"

namespace ember::cpu {

// The most positives (other rows of its label) that a row may have on the tiled path.
inline constexpr int64_t kMaxTiledPositives = 64;

// triplet_forward's contract for a batch in which no class has more than kMaxTiledPositives + 1
// rows (labels (B) i64 contiguous); false, with nothing written, for any other batch.
bool triplet_tiled(const PairTiles& tiles, const Tensor& e, const Tensor& labels, double margin, const Tensor& poison,
                   const Tensor& loss, const Tensor& triplets, const Tensor& term_grad);

}  // namespace ember::cpu
