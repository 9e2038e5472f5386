//===- DeviceGrid.cpp - Ranks on a grid of named axes, over MPI -----------===//

#include "kiln/Backend/CPU/DeviceGrid.h"
#include "kiln/Support/Error.h"

#include <fmt/ranges.h>
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace kiln {

namespace {

/// Launched by mpiexec (Hydra's process-manager interface sets these); a
/// plain process never initialises MPI, so a 1-rank run is unchanged.
bool launchedByMpiexec() { return std::getenv("PMI_RANK") || std::getenv("PMI_SIZE"); }

void finalize() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized)
    MPI_Finalize();
}

/// A 16-bit float moves as its bits (all-gather, all-to-all); MPI has no
/// arithmetic on it, so a reduction widens it to f32 first.
bool isHalf(DType dtype) { return dtype == DType::BF16 || dtype == DType::F16; }

MPI_Datatype mpiType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return MPI_FLOAT;
  case DType::BF16:
  case DType::F16:
    return MPI_UINT16_T;
  case DType::I64:
    return MPI_INT64_T;
  case DType::I32:
    return MPI_INT32_T;
  default:
    fail("collectives move f32, bf16, f16, i64 or i32 tensors, not {}", dtypeName(dtype));
  }
}

MPI_Op mpiOp(Reduction reduction) {
  switch (reduction) {
  case Reduction::Sum:
  case Reduction::Average:
    return MPI_SUM;
  case Reduction::Max:
    return MPI_MAX;
  case Reduction::Min:
    return MPI_MIN;
  }
  return MPI_SUM;
}

/// Divides a sum by the group size for Reduction::Average.
void average(Tensor &t, Reduction reduction, int64_t n) {
  if (reduction != Reduction::Average)
    return;
  if (t.dtype() != DType::F32)
    fail("an average needs an f32 tensor, got {}", dtypeName(t.dtype()));
  float *p = t.mutableData<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] /= float(n);
}

/// How a tensor splits into n blocks along `dim`: `outer` slices, each of n
/// runs of `inner` elements, run r of every slice belonging to block r.
struct Blocks {
  int64_t outer = 1, inner = 1;
};
Blocks blocksOf(const Shape &full, int64_t dim, int64_t n) {
  if (dim < 0 || dim >= int64_t(full.size()))
    fail("collective dimension {} is outside a tensor of rank {}", dim, full.size());
  if (full[dim] % n)
    fail("dimension {} of {} does not split into {} equal blocks", dim, shapeToString(full),
         n);
  Blocks b;
  for (int64_t i = 0; i < dim; ++i)
    b.outer *= full[i];
  b.inner = full[dim] / n;
  for (size_t i = dim + 1; i < full.size(); ++i)
    b.inner *= full[i];
  return b;
}

/// Tensor order [outer][n][inner] -> member order [n][outer][inner]: each
/// member's block contiguous (what MPI sends to or receives from member r).
void toMemberOrder(const char *src, char *dst, Blocks b, int64_t n, size_t elt) {
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < b.outer; ++o)
      std::memcpy(dst + (r * b.outer * b.inner + o * b.inner) * elt,
                  src + ((o * n + r) * b.inner) * elt, b.inner * elt);
}

/// The inverse: member order [n][outer][inner] -> tensor order.
void fromMemberOrder(const char *src, char *dst, Blocks b, int64_t n, size_t elt) {
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < b.outer; ++o)
      std::memcpy(dst + ((o * n + r) * b.inner) * elt,
                  src + (r * b.outer * b.inner + o * b.inner) * elt, b.inner * elt);
}

} // namespace

MpiWorld::MpiWorld() {
  if (!launchedByMpiexec())
    return;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    std::atexit(finalize);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
  MPI_Comm_size(local, &localSize_);
  MPI_Comm_rank(local, &localRank_);
  MPI_Comm_free(&local);
}

MpiWorld &MpiWorld::get() {
  static MpiWorld world;
  return world;
}

namespace {
/// When this process entered the collective it waits in (steady-clock
/// nanoseconds), 0 outside one: read by a watchdog on another thread.
std::atomic<int64_t> collectiveSinceNs{0};

int64_t steadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Marks the scope of one collective call.
struct InCollective {
  InCollective() { collectiveSinceNs.store(steadyNowNs()); }
  ~InCollective() { collectiveSinceNs.store(0); }
};

/// Waits for `request` sleeping between tests, leaving the cores to ranks
/// still working (MPICH's blocking calls spin).
void waitIdle(MPI_Request &request) {
  InCollective marked;
  for (int done = 0;;) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done)
      return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}
} // namespace

double MpiWorld::secondsInCollective() {
  int64_t since = collectiveSinceNs.load();
  return since ? double(steadyNowNs() - since) / 1e9 : 0;
}

void MpiWorld::idleBarrier() const {
  if (size_ == 1)
    return;
  MPI_Request request;
  MPI_Ibarrier(MPI_COMM_WORLD, &request);
  waitIdle(request);
}

std::vector<std::string> MpiWorld::allGatherText(const std::string &mine) const {
  if (size_ == 1)
    return {mine};
  if (mine.size() > size_t(std::numeric_limits<int>::max()))
    fail("rank {}: {} bytes are too many to gather in one MPI call", rank_, mine.size());
  int length = int(mine.size());
  std::vector<int> lengths(size_), offsets(size_);
  MPI_Request request;
  MPI_Iallgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD, &request);
  waitIdle(request);
  int64_t total = 0;
  for (int r = 0; r < size_; ++r) {
    offsets[r] = int(total);
    total += lengths[r];
  }
  if (total > std::numeric_limits<int>::max())
    fail("{} bytes from {} ranks are too many to gather in one MPI call", total, size_);
  std::string all(size_t(total), '\0');
  MPI_Iallgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(),
                  MPI_CHAR, MPI_COMM_WORLD, &request);
  waitIdle(request);
  std::vector<std::string> texts(size_);
  for (int r = 0; r < size_; ++r)
    texts[r] = all.substr(size_t(offsets[r]), size_t(lengths[r]));
  return texts;
}

void MpiWorld::abort(int code) const {
  if (size_ > 1)
    MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

struct DeviceGrid::Comms {
  std::map<std::vector<int16_t>, MPI_Comm> byAxes;
  /// Sends under way and the tensors they read.
  std::vector<std::pair<MPI_Request, Tensor>> sends;
};

DeviceGrid::DeviceGrid(std::vector<std::string> axisNames, std::vector<int64_t> shape)
    : names_(std::move(axisNames)), shape_(std::move(shape)), comms_(new Comms) {
  MpiWorld &world = MpiWorld::get();
  int64_t product = 1;
  for (int64_t s : shape_)
    product *= s;
  if (product != world.size())
    fail("a device grid of {} ranks cannot run on a world of {}", product, world.size());
  rank_ = world.rank();
  coords_ = coordinatesOf(shape_, rank_);
}

std::vector<int64_t> DeviceGrid::coordinatesOf(const std::vector<int64_t> &shape,
                                               int64_t rank) {
  std::vector<int64_t> coords(shape.size(), 0);
  for (int64_t i = int64_t(shape.size()) - 1; i >= 0; --i) {
    coords[i] = rank % shape[i];
    rank /= shape[i];
  }
  return coords;
}

DeviceGrid::~DeviceGrid() {
  int finalized = 0;
  if (!comms_->sends.empty() && (MPI_Finalized(&finalized), !finalized))
    waitSends();
  if (MpiWorld::get().size() > 1 && (MPI_Finalized(&finalized), !finalized))
    for (auto &[axes, comm] : comms_->byAxes)
      MPI_Comm_free(&comm);
}

int64_t DeviceGrid::groupSize(const std::vector<int16_t> &axes) const {
  int64_t n = 1;
  for (int16_t a : axes) {
    if (a < 0 || a >= int16_t(shape_.size()))
      fail("grid axis {} is outside a grid of {} axes", a, shape_.size());
    n *= shape_[a];
  }
  return n;
}

int64_t DeviceGrid::groupIndex(const std::vector<int16_t> &axes) const {
  int64_t index = 0;
  for (int16_t a : axes)
    index = index * shape_[a] + coords_[a];
  return index;
}

void *DeviceGrid::comm(const std::vector<int16_t> &axes) {
  auto it = comms_->byAxes.find(axes);
  if (it != comms_->byAxes.end())
    return &it->second;
  // Members share every coordinate outside `axes` (the colour) and are
  // ordered by their coordinates along `axes` (the key).
  int64_t color = 0;
  for (size_t a = 0; a < shape_.size(); ++a)
    if (std::find(axes.begin(), axes.end(), int16_t(a)) == axes.end())
      color = color * shape_[a] + coords_[a];
  MPI_Comm comm;
  MPI_Comm_split(MPI_COMM_WORLD, int(color), int(groupIndex(axes)), &comm);
  return &comms_->byAxes.emplace(axes, comm).first->second;
}

int DeviceGrid::peerRank(int16_t axis, int64_t peer) const {
  if (axis < 0 || axis >= int16_t(shape_.size()) || peer < 0 || peer >= shape_[axis])
    fail("point-to-point: no rank {} on axis {} of a grid of shape [{}]", peer, axis,
         fmt::join(shape_, ", "));
  int64_t rank = 0;
  for (size_t a = 0; a < shape_.size(); ++a)
    rank = rank * shape_[a] + (int16_t(a) == axis ? peer : coords_[a]);
  return int(rank);
}

int DeviceGrid::maxTag() {
  MpiWorld::get();
  int *value = nullptr, found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &found);
  return found && value ? *value : 32767;
}

void DeviceGrid::isend(Tensor value, int16_t axis, int64_t peer, int tag) {
  MPI_Request request;
  MPI_Isend(value.rawData(), int(value.numel()), mpiType(value.dtype()), peerRank(axis, peer), tag,
            MPI_COMM_WORLD, &request);
  count({axis}, int64_t(value.nbytes()));
  comms_->sends.emplace_back(request, std::move(value));
}

Tensor DeviceGrid::recv(DType dtype, const Shape &shape, int16_t axis, int64_t peer, int tag) {
  Tensor out = Tensor::uninitialized(dtype, shape);
  MPI_Request request;
  MPI_Irecv(out.mutableData<char>(), int(out.numel()), mpiType(dtype), peerRank(axis, peer), tag,
            MPI_COMM_WORLD, &request);
  waitIdle(request);
  return out;
}

void DeviceGrid::waitSends() {
  for (auto &[request, value] : comms_->sends)
    waitIdle(request);
  comms_->sends.clear();
}

void DeviceGrid::count(const std::vector<int16_t> &axes, int64_t bytes) {
  std::string key;
  for (int16_t a : axes)
    key += (key.empty() ? "" : "+") + names_[a];
  bytesSent_[key] += bytes;
}

Tensor DeviceGrid::allGather(const Tensor &local, const std::vector<int16_t> &axes,
                             int64_t dim) {
  int64_t n = groupSize(axes);
  Shape shape = local.shape();
  if (dim < 0 || dim >= int64_t(shape.size()))
    fail("all_gather dimension {} is outside a tensor of rank {}", dim, shape.size());
  shape[dim] *= n;
  if (n == 1)
    return local;
  Blocks b = blocksOf(shape, dim, n);
  Tensor out = Tensor::uninitialized(local.dtype(), shape);
  // Gathering along the outermost split, member blocks are contiguous in the
  // result: receive in place. Otherwise receive blocks, then interleave.
  Tensor raw = b.outer == 1 ? out : Tensor::uninitialized(local.dtype(), shape);
  InCollective marked;
  MPI_Allgather(local.rawData(), int(local.numel()), mpiType(local.dtype()),
                raw.mutableData<char>(), int(local.numel()), mpiType(local.dtype()),
                *static_cast<MPI_Comm *>(comm(axes)));
  count(axes, int64_t(local.nbytes()) * (n - 1));
  if (b.outer > 1)
    fromMemberOrder(raw.data<char>(), out.mutableData<char>(), b, n, dtypeSize(local.dtype()));
  return out;
}

Tensor DeviceGrid::reduceScatter(const Tensor &full, const std::vector<int16_t> &axes,
                                 int64_t dim, Reduction reduction) {
  if (isHalf(full.dtype()))
    return reduceScatter(full.toF32(), axes, dim, reduction).to(full.dtype());
  int64_t n = groupSize(axes);
  Blocks b = blocksOf(full.shape(), dim, n);
  Shape shape = full.shape();
  shape[dim] /= n;
  Tensor out = Tensor::uninitialized(full.dtype(), shape);
  if (n == 1) {
    std::memcpy(out.mutableData<char>(), full.rawData(), full.nbytes());
    return out;
  }
  // Member blocks must be contiguous, block r for member r: they already are
  // when scattering along the outermost split.
  Tensor send = full;
  if (b.outer > 1) {
    send = Tensor::uninitialized(full.dtype(), full.shape());
    toMemberOrder(full.data<char>(), send.mutableData<char>(), b, n, dtypeSize(full.dtype()));
  }
  InCollective marked;
  MPI_Reduce_scatter_block(send.rawData(), out.mutableData<char>(), int(out.numel()),
                           mpiType(full.dtype()), mpiOp(reduction),
                           *static_cast<MPI_Comm *>(comm(axes)));
  count(axes, int64_t(out.nbytes()) * (n - 1));
  average(out, reduction, n);
  return out;
}

Tensor DeviceGrid::allToAll(const Tensor &local, const std::vector<int16_t> &axes,
                            int64_t splitDim, int64_t concatDim) {
  int64_t n = groupSize(axes);
  Blocks split = blocksOf(local.shape(), splitDim, n);
  Shape block = local.shape();
  block[splitDim] /= n;
  if (concatDim < 0 || concatDim >= int64_t(block.size()))
    fail("all_to_all concat dimension {} is outside a tensor of rank {}", concatDim,
         block.size());
  Shape shape = block;
  shape[concatDim] *= n;
  Blocks concat = blocksOf(shape, concatDim, n);
  size_t elt = dtypeSize(local.dtype());
  int64_t blockBytes = numElements(block) * int64_t(elt);
  std::vector<char> send(size_t(n * blockBytes)), recv(send.size());
  toMemberOrder(static_cast<const char *>(local.rawData()), send.data(), split, n, elt);
  if (n == 1) {
    recv.swap(send);
  } else {
    InCollective marked;
    MPI_Alltoall(send.data(), int(blockBytes), MPI_BYTE, recv.data(), int(blockBytes), MPI_BYTE,
                 *static_cast<MPI_Comm *>(comm(axes)));
  }
  count(axes, blockBytes * (n - 1));
  // Member q's block lands at position q along the concatenated dimension.
  Tensor out = Tensor::uninitialized(local.dtype(), shape);
  fromMemberOrder(recv.data(), out.mutableData<char>(), concat, n, elt);
  return out;
}

std::vector<int16_t> DeviceGrid::allAxes() const {
  std::vector<int16_t> axes(coords_.size());
  for (size_t a = 0; a < axes.size(); ++a)
    axes[a] = int16_t(a);
  return axes;
}

Tensor DeviceGrid::allReduce(Tensor value, const std::vector<int16_t> &axes,
                             Reduction reduction) {
  if (isHalf(value.dtype()))
    return allReduce(value.toF32(), axes, reduction).to(value.dtype());
  int64_t n = groupSize(axes);
  Tensor out = value.isUniquelyOwned() ? std::move(value) : value.to(value.dtype());
  if (n == 1)
    return out;
  InCollective marked;
  MPI_Allreduce(MPI_IN_PLACE, out.mutableData<char>(), int(out.numel()), mpiType(out.dtype()),
                mpiOp(reduction), *static_cast<MPI_Comm *>(comm(axes)));
  count(axes, 2 * int64_t(out.nbytes()) * (n - 1) / n);
  average(out, reduction, n);
  return out;
}

Tensor DeviceGrid::slice(const Tensor &full, const std::vector<int16_t> &axes,
                         int64_t dim) const {
  int64_t n = groupSize(axes), r = groupIndex(axes);
  Blocks b = blocksOf(full.shape(), dim, n);
  Shape shape = full.shape();
  shape[dim] /= n;
  Tensor out = Tensor::uninitialized(full.dtype(), shape);
  size_t elt = dtypeSize(full.dtype());
  auto *src = static_cast<const char *>(full.rawData());
  for (int64_t o = 0; o < b.outer; ++o)
    std::memcpy(out.mutableData<char>() + o * b.inner * elt,
                src + ((o * n + r) * b.inner) * elt, b.inner * elt);
  return out;
}

} // namespace kiln
