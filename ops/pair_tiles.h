// How the pairwise (metric) losses stream the B x B similarity matrix: in tiles of rows x cols,
// so that no loss holds the whole matrix (Note [Streamed pairs] in ops/cpu/similarity_tiles.h).
// The tile is a process-wide setting; the defaults suit the CPU's caches, and tests vary it
// (streamed == unstreamed, tiles that do not divide B).
//
//   set_pair_tiles({.rows = 7, .cols = 13});
//   Tensor loss = ntxent_loss(emb, labels);   // now computed in 7 x 13 tiles
//   set_pair_tiles({});                        // the defaults again
#pragma once

#include <cstdint>

namespace ember {

struct PairTiles {
  int64_t rows = 64;   // rows of a tile (one task's rows on the CPU; both sides of a symmetric tile)
  int64_t cols = 288;  // columns of a tile (a multiple of the f32 GEMM's 48: Note [Prepacked rows])
};

PairTiles pair_tiles();
void set_pair_tiles(PairTiles tiles);  // each >= 1 (an Error otherwise)

}  // namespace ember
