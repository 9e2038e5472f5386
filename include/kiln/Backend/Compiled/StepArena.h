//===- StepArena.h - The memory of a compiled step's temporaries -*- C++ -*-===//
//
// A compiled step allocates the same buffers in the same order every run
// (static shapes): the first run is traced (each allocation's size, and
// when it and its release happen) through malloc, and one arena is laid
// out from the trace, blocks whose lifetimes do not overlap sharing bytes.
// Later runs take each allocation from its planned offset, checking every
// event against the trace: nothing comes from the system in steady state,
// and the arena is the step's live peak, not the sum of its buffers. A run
// that departs from the trace (a data-dependent allocation) takes the rest
// from malloc and the next run is traced again. See docs/compiled.md.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_BACKEND_COMPILED_STEPARENA_H
#define KILN_BACKEND_COMPILED_STEPARENA_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

namespace kiln {

class StepArena {
public:
  StepArena() = default;
  ~StepArena();
  StepArena(const StepArena &) = delete;
  StepArena &operator=(const StepArena &) = delete;

  /// A run starts; the run's allocations come through allocate and release.
  void begin();
  /// The run ended: a traced run becomes the plan.
  void end();
  void *allocate(size_t bytes, size_t alignment);
  void release(void *pointer);

  /// What one run took.
  struct RunStats {
    int64_t systemAllocations = 0, systemBytes = 0; ///< from malloc
    int64_t arenaAllocations = 0;                   ///< from the planned arena
    int64_t peakLiveBytes = 0;                      ///< the largest sum of live buffers
  };
  const RunStats &lastRun() const { return last_; }
  /// The arena's size (0 before the first plan).
  int64_t arenaBytes() const { return int64_t(arenaSize_); }

  /// The planner alone (tested directly): offsets for blocks of `bytes`
  /// live over [start, end) events, blocks that overlap in time never
  /// overlapping in memory; returns the total size.
  static size_t layOut(const std::vector<size_t> &bytes, const std::vector<int64_t> &start,
                       const std::vector<int64_t> &end, std::vector<size_t> &offsets);

private:
  struct Event {
    bool allocation;
    int64_t block;
  };
  void *systemAllocate(size_t bytes);

  // The trace (or plan): events and, by block, size and offset.
  std::vector<Event> events_;
  std::vector<size_t> blockBytes_, blockOffsets_;
  std::vector<int64_t> blockStart_, blockEnd_;
  bool planned_ = false;
  // The run under way.
  bool tracing_ = false, deviated_ = false;
  size_t cursor_ = 0;
  std::unordered_map<void *, int64_t> tracedLive_; ///< pointer -> block, while tracing
  std::unordered_map<void *, size_t> systemLive_;  ///< from malloc, with sizes
  int64_t liveBytes_ = 0;
  RunStats run_, last_;
  char *arena_ = nullptr;
  size_t arenaSize_ = 0;
};

/// Gives the memory malloc holds free back to the system (glibc's
/// malloc_trim; nothing elsewhere): after a compile, whose temporaries are
/// gone, and before an arena is laid out, so that the process's resident
/// memory is what it uses. On configs/brown.json: 0.09 GiB less peak RSS.
void returnFreedMemoryToSystem();

} // namespace kiln

#endif // KILN_BACKEND_COMPILED_STEPARENA_H
