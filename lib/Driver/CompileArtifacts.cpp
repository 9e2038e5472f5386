//===- CompileArtifacts.cpp - What every kiln compile target writes -------===//

#include "kiln/Driver/CompileArtifacts.h"
#include "kiln/Backend/Neuron/NeuronConformance.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Dialect/Kiln/IR/Sharding.h"
#include "kiln/Driver/NeuronManifest.h"
#include "kiln/Support/AtomicDirectory.h"
#include "kiln/Support/Diagnostics.h"
#include "kiln/Support/Error.h"

#include "mlir/IR/BuiltinTypes.h"

#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <map>

using namespace mlir;
using json = nlohmann::json;

namespace kiln {

void lockOutputFolder(const std::string &outDir, std::optional<FileLock> &lock) {
  if (outDir.empty())
    fail("compile: -o DIR is required (the directory the artifacts go to)");
  namespace fs = std::filesystem;
  fs::path dir(trimTrailingSlashes(outDir));
  std::string name = dir.filename().string();
  if (name.empty() || name == "." || name == "..")
    fail("compile: -o '{}' must name a folder of its own (kiln compile replaces it as a "
         "whole), not '{}'",
         outDir, outDir);
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    fail("compile: -o '{}' exists and is not a directory", outDir);
  fs::path parent = dir.has_parent_path() ? dir.parent_path() : fs::path(".");
  fs::create_directories(parent, ec);
  if (ec)
    fail("compile: cannot create the output directory '{}': {}", outDir, ec.message());
  lock.emplace((parent / ("." + name + ".kiln-compile.lock")).string(), "-o");
  if (!lock->acquired())
    fail("compile: '{}' is being written by another kiln compile ({}): two compiles into "
         "one folder would mix their artifacts; wait for it, or give this one its own -o "
         "folder",
         outDir, lock->holder());
  if (fs::is_directory(dir, ec) && !fs::is_empty(dir, ec) &&
      !fs::exists(dir / "manifest.json", ec))
    fail("compile: -o '{}' holds files but no manifest.json, so it is not a kiln compile's "
         "folder: kiln compile replaces its folder as a whole; give a new or empty one",
         outDir);
  for (const std::string &stale : removeTemporarySiblings(outDir))
    fmt::print(stderr, "compile: removed {}, left by an interrupted compile\n", stale);
}


json describeParameters(func::FuncOp step, func::FuncOp loss, ArrayRef<int64_t> grid,
                        ArrayRef<std::string> axisNames) {
  std::map<std::string, SmallVector<int64_t>> paramShapes;
  for (unsigned i = 0; i < loss.getNumArguments(); ++i)
    if (auto key = loss.getArgAttrOfType<StringAttr>(i, kParamAttr))
      paramShapes[key.str()] =
          SmallVector<int64_t>(cast<RankedTensorType>(loss.getArgumentTypes()[i]).getShape());
  json params = json::array();
  for (unsigned i = 0; i < step.getNumArguments(); ++i) {
    auto type = cast<RankedTensorType>(step.getArgumentTypes()[i]);
    json p{{"parameter", i}, {"shape", type.getShape()}};
    std::string name;
    for (StringRef role : {kParamAttr, kStateAttr, kInputAttr, kGradAttr})
      if (auto s = step.getArgAttrOfType<StringAttr>(i, role)) {
        p["role"] = role.drop_front(5).str(); // "param", "state", "input", "grad"
        p["name"] = name = s.str();
      }
    // A pipeline stage's activations, numbered: what it received
    // ("transfer"), kept from its forward ("residual"), or the cotangent of
    // what it sent.
    for (StringRef role : {kTransferAttr, kResidualAttr, kCotangentAttr})
      if (auto n = step.getArgAttrOfType<IntegerAttr>(i, role)) {
        p["role"] = role.drop_front(5).str();
        p["number"] = n.getInt();
      }
    if (auto microbatch = step.getArgAttrOfType<IntegerAttr>(i, kMicrobatchAttr))
      p["microbatch"] = microbatch.getInt();
    SmallVector<int64_t> whole(type.getShape());
    std::optional<Sharding> sharding;
    if (Attribute attr = step.getArgAttr(i, kShardingAttr)) {
      succeedOrFail(*step.getContext(), "@train_step argument #" + std::to_string(i), [&] {
        FailureOr<Sharding> s =
            Sharding::fromAttr(attr, type.getRank(), axisNames, [&] { return step.emitError(); });
        if (succeeded(s))
          sharding = *s;
        return LogicalResult(s);
      });
    }
    // The whole shape: a parameter's (and its moments') from the global
    // @loss, anything else from the split.
    std::string key = name;
    for (const char *prefix : {"exp_avg_sq.", "exp_avg."})
      if (StringRef(name).starts_with(prefix))
        key = name.substr(strlen(prefix));
    json split = json::array();
    if (sharding)
      for (auto [d, axes] : llvm::enumerate(sharding->dims)) {
        if (axes.empty())
          continue;
        int64_t n = 1;
        json names = json::array();
        for (int16_t a : axes) {
          n *= grid[a];
          names.push_back(axisNames[a]);
        }
        whole[d] = type.getDimSize(d) * n;
        json entry{{"dim", d}, {"axes", names}, {"block", type.getDimSize(d)}};
        if (int64_t padded = sharding->padding(d))
          entry["padded_to"] = padded;
        split.push_back(entry);
      }
    if (auto it = paramShapes.find(key); it != paramShapes.end() && it->second.size() == whole.size())
      whole = it->second;
    p["whole_shape"] = whole;
    p["split"] = split;
    params.push_back(p);
  }
  return params;
}


json describeOutputs(func::FuncOp step) {
  json outputs = json::array();
  for (unsigned i = 0; i < step.getNumResults(); ++i) {
    json o{{"index", i}};
    for (StringRef role : {kParamAttr, kStateAttr, kOutputAttr, kGradAttr})
      if (auto s = step.getResultAttrOfType<StringAttr>(i, role))
        o[role.drop_front(5).str()] = s.str();
    for (StringRef role : {kTransferAttr, kResidualAttr, kCotangentAttr})
      if (auto n = step.getResultAttrOfType<IntegerAttr>(i, role))
        o[role.drop_front(5).str()] = n.getInt();
    outputs.push_back(o);
  }
  return outputs;
}

void describeEntry(const xla::HloModuleProto &proto, nlohmann::json &params,
                   nlohmann::json &outputs) {
  const auto &shapes = proto.host_program_shape().parameters();
  if (shapes.size() != int(params.size()) + 1)
    fail("compile: the HLO entry has {} parameters, expected {} and the rank", shapes.size(),
         params.size());
  params.push_back({{"parameter", params.size()},
                    {"role", kRankParameter.str()},
                    {"name", kRankParameter.str()},
                    {"shape", json::array()},
                    {"whole_shape", json::array()},
                    {"split", json::array()}});
  std::vector<std::string> inputNames = neuron::neffInputNames(proto);
  for (size_t i = 0; i < params.size(); ++i) {
    params[i]["dtype"] = manifestDtype(shapes[int(i)].element_type());
    params[i]["neff_name"] = i < inputNames.size() ? inputNames[i] : "";
  }
  std::vector<std::string> outputNames = neuron::neffOutputNames(proto);
  for (size_t i = 0; i < outputs.size(); ++i)
    outputs[i]["neff_name"] = i < outputNames.size() ? outputNames[i] : "";
}

} // namespace kiln
