//===- DeviceGrid.h - Ranks on a grid of named axes, over MPI ----*- C++ -*-===//
//
// One process per rank (MPICH, launched with mpiexec). A process started
// without a launcher is a world of one and never calls a collective. The
// grid places ranks row-major (the last axis fastest, torchtitan's mesh
// order); a collective over a set of axes runs among the ranks that differ
// only in those axes, ordered by their coordinates along them in the order
// given (upstream `shard` semantics).
//
//===----------------------------------------------------------------------===//
#ifndef KILN_BACKEND_CPU_DEVICEGRID_H
#define KILN_BACKEND_CPU_DEVICEGRID_H

#include "kiln/Runtime/Tensor.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

/// This process's MPI world, initialised on first use and finalised at exit.
class MpiWorld {
public:
  static MpiWorld &get();
  int rank() const { return rank_; }
  int size() const { return size_; }
  /// Ranks running on this machine (for sharing its cores among them).
  int localSize() const { return localSize_; }
  /// This rank's index among the ranks on its machine.
  int localRank() const { return localRank_; }
  /// Waits for every rank, sleeping rather than spinning as MPICH's blocking
  /// calls do: the waiting ranks leave the machine's cores to a rank that
  /// measures it.
  void idleBarrier() const;
  /// Every rank's `mine`, by rank, on every rank (lengths first, so texts of
  /// any length meet); waits sleeping, as idleBarrier does. A world of one
  /// returns {mine}.
  std::vector<std::string> allGatherText(const std::string &mine) const;
  /// How long this process has waited in the collective it is in, or 0
  /// outside collectives; any thread may ask (a watchdog).
  static double secondsInCollective();
  /// Ends every rank with `code` (MPI_Abort): one rank's error never leaves
  /// the others waiting in a collective.
  [[noreturn]] void abort(int code) const;

private:
  MpiWorld();
  int rank_ = 0, size_ = 1, localSize_ = 1, localRank_ = 0;
};

enum class Reduction { Sum, Average, Max, Min };

class DeviceGrid {
public:
  /// A grid of `shape` over the world (their product must be its size).
  DeviceGrid(std::vector<std::string> axisNames, std::vector<int64_t> shape);
  ~DeviceGrid();
  DeviceGrid(const DeviceGrid &) = delete;
  DeviceGrid &operator=(const DeviceGrid &) = delete;

  const std::vector<std::string> &axisNames() const { return names_; }
  const std::vector<int64_t> &shape() const { return shape_; }
  int rank() const { return rank_; }
  /// This rank's coordinate along each axis.
  const std::vector<int64_t> &coordinates() const { return coords_; }
  /// The coordinates of `rank` on a grid of `shape` (row-major, last axis
  /// fastest); needs no MPI.
  static std::vector<int64_t> coordinatesOf(const std::vector<int64_t> &shape, int64_t rank);
  /// Every axis: a group over them is the whole world.
  std::vector<int16_t> allAxes() const;
  /// Ranks in a group over `axes`, and this rank's index among them.
  int64_t groupSize(const std::vector<int16_t> &axes) const;
  int64_t groupIndex(const std::vector<int16_t> &axes) const;

  /// Opens the group over `axes` (a collective over the whole world, as
  /// each group's first collective is): ranks that reach their groups' first
  /// collectives at different points (pipeline ranks, one waiting for
  /// another's activations) open them together first, in one order.
  void openGroup(const std::vector<int16_t> &axes) { comm(axes); }

  /// Concatenates every group member's `local` along `dim`.
  Tensor allGather(const Tensor &local, const std::vector<int16_t> &axes, int64_t dim);
  /// Reduces `full` over the group and keeps this rank's block along `dim`.
  Tensor reduceScatter(const Tensor &full, const std::vector<int16_t> &axes, int64_t dim,
                       Reduction reduction);
  /// Reduces `value` over the group; every member gets the result.
  Tensor allReduce(Tensor value, const std::vector<int16_t> &axes, Reduction reduction);
  /// Splits `local` along `splitDim` into one block per group member, sends
  /// member r its block r, and concatenates the received blocks along
  /// `concatDim` in member order.
  Tensor allToAll(const Tensor &local, const std::vector<int16_t> &axes, int64_t splitDim,
                  int64_t concatDim);
  /// This rank's block of `full` along `dim` (no communication).
  Tensor slice(const Tensor &full, const std::vector<int16_t> &axes, int64_t dim) const;

  /// Point-to-point along one axis (a pipeline's transfers): the rank whose
  /// coordinates are this rank's with `peer` on `axis`.
  int peerRank(int16_t axis, int64_t peer) const;
  /// Starts sending `value` to peerRank(axis, peer) under `tag` and returns
  /// at once, holding `value` until waitSends(): sends never block, so an
  /// order in which each receive's send comes earlier in its sender's order
  /// cannot deadlock (PipelineSchedule.h).
  void isend(Tensor value, int16_t axis, int64_t peer, int tag);
  /// The tensor of `dtype` and `shape` that peerRank(axis, peer) sends under
  /// `tag`; waits sleeping, as the collectives do.
  Tensor recv(DType dtype, const Shape &shape, int16_t axis, int64_t peer, int tag);
  /// Completes every send isend started.
  void waitSends();
  /// The largest tag MPI allows (at least 32767).
  static int maxTag();

  /// Bytes this rank sent in collectives, by axis set ("dp_shard", "dp_replicate+dp_shard").
  const std::map<std::string, int64_t> &bytesSent() const { return bytesSent_; }

private:
  struct Comms;
  void *comm(const std::vector<int16_t> &axes);
  void count(const std::vector<int16_t> &axes, int64_t bytes);

  std::vector<std::string> names_;
  std::vector<int64_t> shape_, coords_;
  int rank_ = 0;
  std::unique_ptr<Comms> comms_;
  std::map<std::string, int64_t> bytesSent_;
};

} // namespace kiln

#endif // KILN_BACKEND_CPU_DEVICEGRID_H
