//===- HfCheckpoint.cpp - Hugging Face model directories ------------------===//

#include "kiln/Runtime/HfCheckpoint.h"
#include "kiln/Support/AtomicDirectory.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Json.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

namespace kiln {

namespace fs = std::filesystem;

namespace {

/// transformers refuses safetensors files whose metadata lacks a known
/// "format", so every file says it holds PyTorch tensors, as HF's do.
const std::map<std::string, std::string> kHfMetadata{{"format", "pt"}};

/// Groups `tensors` greedily in name order into shards of at most
/// `maxShardBytes` (counting tensor bytes, as HF does); always >= 1 shard.
std::vector<TensorMap> planShards(const TensorMap &tensors, int64_t maxShardBytes) {
  std::vector<TensorMap> shards(1);
  int64_t used = 0;
  for (const auto &[name, tensor] : tensors) {
    int64_t bytes = int64_t(tensor.nbytes());
    if (!shards.back().empty() && used + bytes > maxShardBytes) {
      shards.emplace_back();
      used = 0;
    }
    shards.back().emplace(name, tensor);
    used += bytes;
  }
  return shards;
}

/// Writes the model files into the (new, empty) directory `dir`.
void writeModelFiles(const fs::path &dir, const std::string &configJson,
                     const TensorMap &tensors, int64_t maxShardBytes) {
  writeFileAtomic((dir / "config.json").string(), configJson);
  std::vector<TensorMap> shards = planShards(tensors, maxShardBytes);
  if (shards.size() == 1) {
    writeSafeTensors((dir / "model.safetensors").string(), shards[0], kHfMetadata);
    return;
  }
  nlohmann::json weightMap = nlohmann::json::object();
  int64_t totalSize = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    std::string file =
        fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
    writeSafeTensors((dir / file).string(), shards[i], kHfMetadata);
    for (const auto &[name, tensor] : shards[i]) {
      weightMap[name] = file;
      totalSize += int64_t(tensor.nbytes());
    }
  }
  nlohmann::json index = {{"metadata", {{"total_size", totalSize}}},
                          {"weight_map", weightMap}};
  writeFileAtomic((dir / "model.safetensors.index.json").string(), index.dump(2) + "\n");
}

/// `t` as F32, without copying when it already is.
Tensor asF32(const Tensor &t) { return t.dtype() == DType::F32 ? t : t.toF32(); }

/// max |x - y| over equally shaped tensors. Equal values (infinities
/// included) and NaN pairs count as 0; a NaN on one side only makes it NaN.
double maxAbsDifference(const Tensor &x, const Tensor &y) {
  Tensor fx = asF32(x), fy = asF32(y);
  const float *px = fx.data<float>(), *py = fy.data<float>();
  double worst = 0;
  for (int64_t i = 0; i < fx.numel(); ++i) {
    double a = px[i], b = py[i];
    if (a == b || (std::isnan(a) && std::isnan(b)))
      continue;
    double d = std::fabs(a - b);
    if (std::isnan(d))
      return d;
    worst = std::max(worst, d);
  }
  return worst;
}

/// NaN-propagating maximum, so one NaN tensor is not hidden in the total.
double maxOf(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? std::numeric_limits<double>::quiet_NaN()
                                        : std::max(a, b);
}

void appendNames(std::string &out, const std::string &title,
                 const std::vector<std::string> &names) {
  out += fmt::format("{}: {}\n", title, names.size());
  for (const std::string &n : names)
    out += fmt::format("  {}\n", n);
}

} // namespace

bool isStackedKey(const std::string &key) { return key.find('*') != std::string::npos; }

std::string stackMemberKey(const std::string &stackedKey, int64_t index) {
  size_t star = stackedKey.find('*');
  return stackedKey.substr(0, star) + std::to_string(index) + stackedKey.substr(star + 1);
}

Tensor stackTensors(const std::vector<Tensor> &members) {
  if (members.empty())
    fail("internal: stacking no tensors");
  Shape shape = members[0].shape();
  shape.insert(shape.begin(), int64_t(members.size()));
  Tensor out = Tensor::uninitialized(members[0].dtype(), shape);
  auto *dst = static_cast<char *>(out.mutableData<void>());
  for (const Tensor &m : members) {
    if (m.shape() != members[0].shape() || m.dtype() != members[0].dtype())
      fail("internal: stacking tensors of different shapes or dtypes");
    std::memcpy(dst, m.rawData(), m.nbytes());
    dst += m.nbytes();
  }
  return out;
}

TensorMap unstackTensors(const TensorMap &tensors) {
  TensorMap out;
  for (const auto &[key, tensor] : tensors) {
    if (!isStackedKey(key)) {
      out.emplace(key, tensor);
      continue;
    }
    Shape memberShape(tensor.shape().begin() + 1, tensor.shape().end());
    auto *src = static_cast<const char *>(tensor.rawData());
    for (int64_t i = 0; i < tensor.dim(0); ++i) {
      Tensor member = Tensor::uninitialized(tensor.dtype(), memberShape);
      std::memcpy(member.mutableData<void>(), src, member.nbytes());
      src += member.nbytes();
      out.emplace(stackMemberKey(key, i), std::move(member));
    }
  }
  return out;
}

void saveHfCheckpoint(const std::string &dir, const std::string &configJson,
                      const TensorMap &tensors, int64_t maxShardBytes,
                      const std::function<void(const std::string &)> &writeMore) {
  if (maxShardBytes <= 0)
    fail("{}: max shard size must be > 0 bytes, got {}", dir, maxShardBytes);
  try {
    std::error_code ec;
    if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
      fail("exists and is not a directory");
    writeDirectoryAtomic(dir, [&](const std::string &tmp) {
      writeModelFiles(tmp, configJson, tensors, maxShardBytes);
      if (writeMore)
        writeMore(tmp);
    });
  } catch (const std::exception &e) {
    fail("{}: cannot save checkpoint: {}", dir, e.what());
  }
}

CheckpointDiff diffCheckpoints(const std::string &a, const std::string &b) {
  Checkpoint ca = Checkpoint::open(a), cb = Checkpoint::open(b);
  CheckpointDiff diff;
  for (const std::string &name : ca.names()) {
    if (!cb.contains(name)) {
      diff.missing.push_back(name);
      continue;
    }
    Tensor x = ca.get(name), y = cb.get(name);
    std::string why;
    if (x.shape() != y.shape())
      why = fmt::format("shape {} vs {}", shapeToString(x.shape()), shapeToString(y.shape()));
    if (x.dtype() != y.dtype())
      why += fmt::format("{}dtype {} vs {}", why.empty() ? "" : ", ", dtypeName(x.dtype()),
                         dtypeName(y.dtype()));
    if (!why.empty())
      diff.mismatched.emplace_back(name, why);
    if (x.shape() == y.shape())
      diff.maxAbsDiff[name] = maxAbsDifference(x, y);
  }
  for (const std::string &name : cb.names())
    if (!ca.contains(name))
      diff.unexpected.push_back(name);
  return diff;
}

std::string formatCheckpointDiff(const CheckpointDiff &diff, const std::string &a,
                                 const std::string &b) {
  std::string out = fmt::format("checkpoint diff: A = {}, B = {}\n", a, b);
  appendNames(out, "missing keys (in A, not in B)", diff.missing);
  appendNames(out, "unexpected keys (in B, not in A)", diff.unexpected);
  out += fmt::format("shape/dtype mismatches: {}\n", diff.mismatched.size());
  for (const auto &[name, why] : diff.mismatched)
    out += fmt::format("  {}: {}\n", name, why);
  out += fmt::format("compared tensors: {}\n", diff.maxAbsDiff.size());
  double overall = 0;
  for (const auto &[name, d] : diff.maxAbsDiff) {
    out += fmt::format("  {}  max_abs_diff {:.3e}\n", name, d);
    overall = maxOf(overall, d);
  }
  if (diff.maxAbsDiff.empty())
    out += "max_abs_diff over all tensors: n/a\n";
  else
    out += fmt::format("max_abs_diff over all tensors: {:.3e}\n", overall);
  return out;
}

} // namespace kiln
