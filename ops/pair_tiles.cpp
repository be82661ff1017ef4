#include "ops/pair_tiles.h"

#include <atomic>

#include "core/error.h"

namespace ember {
namespace {
std::atomic<int64_t> g_rows{PairTiles{}.rows}, g_cols{PairTiles{}.cols}, g_whole_rows{PairTiles{}.whole_rows};
}  // namespace

PairTiles pair_tiles() { return {g_rows.load(), g_cols.load(), g_whole_rows.load()}; }

void set_pair_tiles(PairTiles tiles) {
  EMBER_CHECK(tiles.rows >= 1 && tiles.cols >= 1, "set_pair_tiles: expected rows >= 1 and cols >= 1, got ",
              tiles.rows, " x ", tiles.cols);
  EMBER_CHECK(tiles.whole_rows >= 0, "set_pair_tiles: expected whole_rows >= 0, got ", tiles.whole_rows);
  g_rows.store(tiles.rows);
  g_cols.store(tiles.cols);
  g_whole_rows.store(tiles.whole_rows);
}

}  // namespace ember
