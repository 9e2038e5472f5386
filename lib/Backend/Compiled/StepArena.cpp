//===- StepArena.cpp - The memory of a compiled step's temporaries --------===//

#include "kiln/Backend/Compiled/StepArena.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <sys/mman.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace kiln {
namespace {

constexpr size_t kAlignment = 64;
/// From this size a traced buffer is mapped for itself and unmapped when
/// freed: malloc would keep the traced run's memory beside the arena.
constexpr size_t kMappedBytes = size_t(1) << 20;

size_t roundedUp(size_t bytes) {
  return std::max(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
}

void *systemMemory(size_t bytes) {
  if (bytes < kMappedBytes)
    return std::aligned_alloc(kAlignment, roundedUp(bytes));
  void *pointer = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return pointer == MAP_FAILED ? nullptr : pointer;
}

void releaseSystemMemory(void *pointer, size_t bytes) {
  if (bytes < kMappedBytes)
    std::free(pointer);
  else
    ::munmap(pointer, bytes);
}

} // namespace

void returnFreedMemoryToSystem() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

StepArena::~StepArena() {
  for (auto &[pointer, bytes] : systemLive_)
    releaseSystemMemory(pointer, bytes);
  if (arena_)
    releaseSystemMemory(arena_, arenaSize_);
}

size_t StepArena::layOut(const std::vector<size_t> &bytes, const std::vector<int64_t> &start,
                         const std::vector<int64_t> &end, std::vector<size_t> &offsets) {
  // Largest first, each at the lowest offset clear of the placed blocks it
  // shares time with (greedy by size: within a few percent of the live
  // peak on a training step, whose big buffers come first).
  std::vector<size_t> order(bytes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return bytes[a] > bytes[b]; });
  offsets.assign(bytes.size(), 0);
  std::vector<size_t> placed;
  size_t total = 0;
  for (size_t block : order) {
    std::vector<std::pair<size_t, size_t>> taken; // [offset, offset + bytes)
    for (size_t other : placed)
      if (start[other] < end[block] && start[block] < end[other])
        taken.push_back({offsets[other], offsets[other] + bytes[other]});
    std::sort(taken.begin(), taken.end());
    size_t offset = 0;
    for (auto [from, to] : taken) {
      if (offset + bytes[block] <= from)
        break;
      offset = std::max(offset, to);
    }
    offsets[block] = offset;
    total = std::max(total, offset + bytes[block]);
    placed.push_back(block);
  }
  return total;
}

void StepArena::begin() {
  run_ = RunStats();
  liveBytes_ = 0;
  cursor_ = 0;
  deviated_ = false;
  tracing_ = !planned_;
  if (tracing_) {
    events_.clear();
    blockBytes_.clear();
    blockStart_.clear();
    blockEnd_.clear();
    tracedLive_.clear();
  }
}

void StepArena::end() {
  last_ = run_;
  if (deviated_) { // trace the next run again
    planned_ = false;
    return;
  }
  if (!tracing_)
    return;
  for (int64_t &e : blockEnd_)
    if (e < 0) // never released in the run: live to its end
      e = int64_t(events_.size());
  size_t size = layOut(blockBytes_, blockStart_, blockEnd_, blockOffsets_);
  if (size > arenaSize_) {
    returnFreedMemoryToSystem();
    if (arena_)
      releaseSystemMemory(arena_, arenaSize_);
    arena_ = static_cast<char *>(systemMemory(roundedUp(size)));
    arenaSize_ = arena_ ? roundedUp(size) : 0;
  }
  planned_ = arena_ != nullptr;
  tracedLive_.clear();
}

void *StepArena::systemAllocate(size_t bytes) {
  void *pointer = systemMemory(roundedUp(bytes));
  if (pointer) {
    systemLive_[pointer] = roundedUp(bytes);
    ++run_.systemAllocations;
    run_.systemBytes += int64_t(bytes);
  }
  return pointer;
}

void *StepArena::allocate(size_t bytes, size_t alignment) {
  liveBytes_ += int64_t(roundedUp(bytes));
  run_.peakLiveBytes = std::max(run_.peakLiveBytes, liveBytes_);
  if (tracing_) {
    void *pointer = systemAllocate(bytes);
    int64_t block = int64_t(blockBytes_.size());
    blockBytes_.push_back(roundedUp(bytes));
    blockStart_.push_back(int64_t(events_.size()));
    blockEnd_.push_back(-1);
    events_.push_back({true, block});
    tracedLive_[pointer] = block;
    return pointer;
  }
  if (!deviated_) {
    // Every event so far was the trace's, so the blocks live now are the
    // plan's and this one's bytes are free.
    if (cursor_ < events_.size() && events_[cursor_].allocation && alignment <= kAlignment &&
        roundedUp(bytes) == blockBytes_[size_t(events_[cursor_].block)]) {
      ++run_.arenaAllocations;
      return arena_ + blockOffsets_[size_t(events_[cursor_++].block)];
    }
    deviated_ = true;
  }
  return systemAllocate(bytes);
}

void StepArena::release(void *pointer) {
  if (!pointer)
    return;
  auto system = systemLive_.find(pointer);
  if (system != systemLive_.end()) {
    liveBytes_ -= int64_t(system->second);
    releaseSystemMemory(pointer, system->second);
    systemLive_.erase(system);
    if (tracing_) {
      auto traced = tracedLive_.find(pointer);
      if (traced != tracedLive_.end()) {
        blockEnd_[size_t(traced->second)] = int64_t(events_.size());
        events_.push_back({false, traced->second});
        tracedLive_.erase(traced);
      }
    } else {
      deviated_ = true; // the trace freed an arena block here
    }
    return;
  }
  // An arena block: it must be the one the trace releases here.
  if (!deviated_ && cursor_ < events_.size() && !events_[cursor_].allocation &&
      arena_ + blockOffsets_[size_t(events_[cursor_].block)] == pointer) {
    liveBytes_ -= int64_t(blockBytes_[size_t(events_[cursor_].block)]);
    ++cursor_;
    return;
  }
  deviated_ = true;
}

} // namespace kiln
