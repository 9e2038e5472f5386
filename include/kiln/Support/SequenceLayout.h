//===- SequenceLayout.h - True positions of a laid-out sequence --*- C++ -*-===//
//
// Context parallelism splits the sequence dimension over ranks. With causal
// attention the last rank would score most pairs, so torchtitan's head-tail
// load balancer lays the sequence out in 2 x cp chunks where layout chunk 2r
// holds chunk r and layout chunk 2r + 1 holds chunk 2 cp - 1 - r: a contiguous
// split over cp then gives rank r a head and a tail chunk. What depends on
// positions (the causal mask, rope) reads them through this map. Inline: the
// dialect, the CPU kernels and the HLO lowering share it.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_SUPPORT_SEQUENCELAYOUT_H
#define KILN_SUPPORT_SEQUENCELAYOUT_H

#include <cstdint>
#include <optional>
#include <vector>

namespace kiln {

struct SequenceLayout {
  /// 0: natural order; else the number of head-tail chunks (2 x cp), which
  /// divides the sequence.
  int64_t headTailChunks = 0;

  /// The layout a `head_tail_chunks` attribute names (absent: natural).
  static SequenceLayout ofChunks(std::optional<uint64_t> chunks) {
    return SequenceLayout{int64_t(chunks.value_or(0))};
  }
  /// Whether `chunks` head-tail chunks lay out a sequence of `seq` rows: an
  /// even count (2 x cp) that divides it.
  static bool validChunks(int64_t chunks, int64_t seq) {
    return chunks >= 2 && chunks % 2 == 0 && seq % chunks == 0;
  }

  /// The true position of row `index` of a laid-out sequence of `seq` rows.
  int64_t position(int64_t index, int64_t seq) const {
    if (headTailChunks <= 0)
      return index;
    int64_t chunk = seq / headTailChunks, c = index / chunk, r = c / 2;
    int64_t source = c % 2 ? headTailChunks - 1 - r : r;
    return source * chunk + index % chunk;
  }

  /// The true positions of rows [first, first + count).
  std::vector<int64_t> positions(int64_t first, int64_t count, int64_t seq) const {
    std::vector<int64_t> out(count);
    for (int64_t i = 0; i < count; ++i)
      out[i] = position(first + i, seq);
    return out;
  }
};

} // namespace kiln

#endif // KILN_SUPPORT_SEQUENCELAYOUT_H
