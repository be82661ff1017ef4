// How the pairwise (metric) losses stream the B x B similarity matrix: in tiles of rows x cols,
// so that no loss holds the whole matrix (Note [Streamed pairs] in ops/cpu/similarity_tiles.h).
// The class losses (ArcFace, ProxyAnchor) hold blocks of whole rows of their B x C cosines where
// the rows are short (`whole_rows`), tiles otherwise. The setting is process-wide; the defaults
// suit the CPU's caches, and tests vary it (streamed == unstreamed, tiles that do not divide B).
//
//   set_pair_tiles({.rows = 7, .cols = 13});
//   Tensor loss = ntxent_loss(emb, labels);   // now computed in 7 x 13 tiles
//   set_pair_tiles({.rows = 7, .cols = 13, .whole_rows = 0});   // class losses in tiles too
//   set_pair_tiles({});                        // the defaults again
#pragma once

#include <cstdint>

namespace ember {

// Note [Tile rows]: 128 rows (64 until 2026-12-06): at batch 512, dim 128 on 2 Zen 5 cores, the
// pair and triplet losses took 8-11% less time per forward + backward than with 64 (a loop of 20
// steps, alternated, three rounds), and 96 fell between. A symmetric pass then has 4 blocks: 4
// diagonal tiles, then rounds of 2 (one per thread), each a GEMM twice as large. The class losses
// changed less (ArcFace and ProxyAnchor 0-9%, within the noise of some rounds).
struct PairTiles {
  int64_t rows = 128;  // rows of a tile (one task's rows on the CPU; both sides of a symmetric tile)
  int64_t cols = 288;  // columns of a tile (a multiple of the f32 GEMM's 48: Note [Prepacked rows])
  // The values of S in a block of whole rows of a class loss on the CPU (Note [Whole rows of cross
  // similarities] in ops/cpu/whole_cross_rows.h: 128 KiB in f32, rows of up to 1,024 values); 0:
  // always tiles of rows x cols.
  int64_t whole_rows = 32 * 1024;
};

PairTiles pair_tiles();
void set_pair_tiles(PairTiles tiles);  // rows, cols >= 1 and whole_rows >= 0 (an Error otherwise)

}  // namespace ember
