#include "ops/pair_tiles.h"

#include <atomic>

#include "core/error.h"

namespace ember {
namespace {
std::atomic<int64_t> g_rows{PairTiles{}.rows}, g_cols{PairTiles{}.cols};
}  // namespace

PairTiles pair_tiles() { return {g_rows.load(), g_cols.load()}; }

void set_pair_tiles(PairTiles tiles) {
  EMBER_CHECK(tiles.rows >= 1 && tiles.cols >= 1, "set_pair_tiles: expected rows >= 1 and cols >= 1, got ",
              tiles.rows, " x ", tiles.cols);
  g_rows.store(tiles.rows);
  g_cols.store(tiles.cols);
}

}  // namespace ember
