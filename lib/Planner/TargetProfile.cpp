//===- TargetProfile.cpp - A machine the planner plans for ----------------===//

#include "kiln/Planner/TargetProfile.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Json.h"

#include <fmt/format.h>

#include <cmath>
#include <set>

namespace kiln {

const std::map<std::string, std::string> &builtinTargetTexts(); // BuiltinTargets.cpp

namespace {

/// What a field may physically be. Past it a value is a typo or hostile (a
/// latency of 1e308 s, a bandwidth of 1e-300 B/s, a reserve past 2^63
/// bytes) and would surface far from the file, as infinities, a wrapped
/// integer or a schedule that never ends.
struct Range {
  double low, high;
  bool lowOpen; ///< (low, high] rather than [low, high]
  const char *unit;

  bool holds(double x) const {
    return std::isfinite(x) && (lowOpen ? x > low : x >= low) && x <= high;
  }
  std::string describe() const {
    return fmt::format("{}{:g}, {:g}]{}{}", lowOpen ? "(" : "[", low, high, *unit ? " " : "",
                       unit);
  }
};

constexpr double kPebibyte = double(int64_t(1) << 50);
constexpr Range kRanks{1, 65536, false, "ranks"};
constexpr Range kPrice{0, 1e6, false, "USD per hour"};
// Flops and bandwidths go up to an idealised machine's (free communication
// in a test); their floors are what a wrong unit gives.
constexpr Range kFlops{1e6, 1e30, false, "FLOP/s"};
constexpr Range kMemory{double(1 << 20), kPebibyte, false, "bytes"};
constexpr Range kReserve{0, kPebibyte, false, "bytes"};
constexpr Range kBandwidth{1e3, 1e30, false, "bytes/s"};
constexpr Range kSeconds{0, 1, false, "s"};
constexpr Range kFraction{0, 1, true, ""};
constexpr Range kOverhead{0, 4, false, "of the live peak"};

/// Reads a profile by dotted field paths, naming the file and the path in
/// every error, and refuses fields it does not know (a misspelt efficiency
/// would otherwise be silently ignored).
class ProfileReader {
public:
  ProfileReader(const nlohmann::json &root, std::string source)
      : root_(root), source_(std::move(source)) {}

  const nlohmann::json &field(const std::string &path) {
    known_.insert(path);
    const nlohmann::json *node = &root_;
    size_t start = 0;
    while (true) {
      size_t dot = path.find('.', start);
      std::string key = path.substr(start, dot == std::string::npos ? dot : dot - start);
      if (!node->is_object() || !node->contains(key))
        fail("{}: missing field '{}'", source_, path);
      node = &(*node)[key];
      if (dot == std::string::npos)
        return *node;
      start = dot + 1;
    }
  }

  std::string string(const std::string &path) {
    const nlohmann::json &v = field(path);
    if (!v.is_string())
      fail("{}: field '{}' must be a string, got {}", source_, path, briefJson(v));
    return v.get<std::string>();
  }

  /// A number within `range`, or "measured" where `measured` can supply it.
  double number(const std::string &path, const Range &range,
                const std::function<double()> &measured = {}) {
    const nlohmann::json &v = field(path);
    if (v.is_string() && v.get<std::string>() == "measured") {
      if (!measured)
        fail("{}: field '{}' cannot be \"measured\"; give a number", source_, path);
      return measured();
    }
    if (!v.is_number() || !range.holds(v.get<double>()))
      fail("{}: field '{}' must be a number in {}{}, got {}", source_, path, range.describe(),
           measured ? " or \"measured\"" : "", briefJson(v));
    return v.get<double>();
  }

  bool has(const std::string &key) const { return root_.contains(key); }

  bool boolean(const std::string &path) {
    const nlohmann::json &v = field(path);
    if (!v.is_boolean())
      fail("{}: field '{}' must be true or false, got {}", source_, path, briefJson(v));
    return v.get<bool>();
  }

  int64_t integer(const std::string &path, const Range &range,
                  const std::function<double()> &measured = {}) {
    const nlohmann::json &v = field(path);
    if (v.is_string() && measured)
      return int64_t(number(path, range, measured));
    if (!v.is_number_integer() || !range.holds(double(v.get<int64_t>())))
      fail("{}: field '{}' must be an integer in {}{}, got {}", source_, path, range.describe(),
           measured ? " or \"measured\"" : "", briefJson(v));
    return v.get<int64_t>();
  }

  double fraction(const std::string &path) {
    const nlohmann::json &v = field(path);
    if (!v.is_number() || !kFraction.holds(v.get<double>()))
      fail("{}: field '{}' is an achieved fraction of peak, in {}; got {}", source_, path,
           kFraction.describe(), briefJson(v));
    return v.get<double>();
  }

  int64_t dtypeBytes(const std::string &path) {
    std::string name = string(path);
    if (name == "f32")
      return 4;
    if (name == "bf16" || name == "f16")
      return 2;
    fail("{}: field '{}' must be \"f32\", \"bf16\" or \"f16\", got \"{}\"", source_, path, name);
  }

  /// Every field of the file was read (sources aside).
  void finish(std::map<std::string, std::string> &sources) {
    if (root_.contains("sources")) {
      const nlohmann::json &s = root_["sources"];
      if (!s.is_object())
        fail("{}: field 'sources' must be an object of field path -> source text", source_);
      for (auto &[key, value] : s.items()) {
        if (!value.is_string())
          fail("{}: field 'sources.{}' must be a string, got {}", source_, key, briefJson(value));
        sources[key] = value.get<std::string>();
      }
    }
    checkKnown(root_, "");
  }

private:
  void checkKnown(const nlohmann::json &node, const std::string &prefix) {
    for (auto &[key, value] : node.items()) {
      std::string path = prefix.empty() ? key : prefix + "." + key;
      if (path == "sources")
        continue;
      if (known_.count(path))
        continue;
      if (value.is_object()) {
        bool anyKnown = false;
        for (const std::string &k : known_)
          anyKnown |= k.rfind(path + ".", 0) == 0;
        if (anyKnown) {
          checkKnown(value, path);
          continue;
        }
      }
      fail("{}: unknown field '{}'", source_, path);
    }
  }

  const nlohmann::json &root_;
  std::string source_;
  std::set<std::string> known_;
};

Link readLink(ProfileReader &r, const std::string &path, const std::function<double()> &measured) {
  Link link;
  link.name = r.string(path + ".name");
  link.bandwidth = r.number(path + ".bandwidth", kBandwidth, measured);
  link.latencySeconds = r.number(path + ".latency_seconds", kSeconds);
  return link;
}

} // namespace

double TargetProfile::achievedFlops(OpClass opClass) const {
  switch (opClass) {
  case OpClass::Matmul:
    return matmulPeakFlops * efficiency.matmul;
  case OpClass::Attention:
    return matmulPeakFlops * efficiency.attention;
  case OpClass::Vector:
    return vectorPeakFlops * efficiency.vector;
  }
  return vectorPeakFlops;
}

std::vector<std::string> builtinTargetNames() {
  std::vector<std::string> names;
  for (const auto &[name, text] : builtinTargetTexts())
    names.push_back(name);
  return names;
}

TargetProfile parseTargetProfile(const std::string &text, const std::string &source,
                                 const MachineProbe &probe) {
  nlohmann::json root = parseJson(text, source);
  if (!root.is_object())
    fail("{}: expected a JSON object (a target profile) at the top level", source);
  ProfileReader r(root, source);
  TargetProfile t;
  t.source = source;
  t.name = r.string("name");
  t.description = r.string("description");
  t.ranksPerNode = r.integer("ranks_per_node", kRanks);
  t.ranksPerDevice = r.integer("ranks_per_device", kRanks);
  t.pricePerHourUsd = r.number("price_per_hour_usd", kPrice);
  t.precision.computeBytes = r.dtypeBytes("precision.compute");
  t.precision.masterBytes = r.dtypeBytes("precision.master");
  t.precision.reduceBytes = r.dtypeBytes("precision.reduce");
  t.precision.optimizerBytes = r.dtypeBytes("precision.optimizer");
  t.matmulPeakFlops = r.number("peak_flops_per_rank.matmul", kFlops, probe.sgemmFlops);
  t.vectorPeakFlops = r.number("peak_flops_per_rank.vector", kFlops, probe.sgemmFlops);
  // Optional: a target without a Float8 rate plans no Float8 linears.
  if (root.contains("peak_flops_per_rank") && root["peak_flops_per_rank"].is_object() &&
      root["peak_flops_per_rank"].contains("matmul_float8"))
    t.float8PeakFlops = r.number("peak_flops_per_rank.matmul_float8", kFlops);
  std::function<double()> memoryBytes;
  if (probe.memoryBytes)
    memoryBytes = [&] { return double(probe.memoryBytes()); };
  t.memoryBytes = r.integer("memory_bytes_per_rank", kMemory, memoryBytes);
  t.memoryBandwidth = r.number("memory_bandwidth_per_rank", kBandwidth, probe.memoryBandwidth);
  t.runtimeReserveBytes = int64_t(r.number("runtime_reserve_bytes", kReserve));
  if (r.has("allocator_overhead"))
    t.allocatorOverhead = r.number("allocator_overhead", kOverhead);
  t.intraNode = readLink(r, "interconnect.intra_node", probe.memoryBandwidth);
  t.interNode = readLink(r, "interconnect.inter_node", {});
  t.overlapCommunication = r.boolean("overlap_communication");
  t.efficiency.matmul = r.fraction("efficiency.matmul");
  t.efficiency.attention = r.fraction("efficiency.attention");
  t.efficiency.vector = r.fraction("efficiency.vector");
  t.efficiency.memory = r.fraction("efficiency.memory");
  t.efficiency.collective = r.fraction("efficiency.collective");
  t.efficiency.opOverheadSeconds = r.number("efficiency.op_overhead_seconds", kSeconds);
  if (r.has("gemm_seconds")) {
    const nlohmann::json &v = r.field("gemm_seconds");
    if (!v.is_string() || v.get<std::string>() != "measured")
      fail("{}: field 'gemm_seconds' must be \"measured\" (every GEMM timed at its shape on "
           "the machine at hand), got {}; leave it out to run GEMMs at efficiency.matmul",
           source, briefJson(v));
    if (!probe.gemmSeconds)
      fail("{}: field 'gemm_seconds' cannot be \"measured\" here (no machine to time GEMMs "
           "on); leave it out to run GEMMs at efficiency.matmul",
           source);
    t.gemmSeconds = probe.gemmSeconds;
  }
  r.finish(t.sources);
  if (t.ranksPerNode % t.ranksPerDevice != 0)
    fail("{}: field 'ranks_per_device' ({}) must divide 'ranks_per_node' ({})", source,
         t.ranksPerDevice, t.ranksPerNode);
  if (t.runtimeReserveBytes >= t.memoryBytes)
    fail("{}: field 'runtime_reserve_bytes' ({}) leaves nothing of 'memory_bytes_per_rank' ({})",
         source, t.runtimeReserveBytes, t.memoryBytes);
  return t;
}

TargetProfile loadTargetProfile(const std::string &nameOrPath, const MachineProbe &probe) {
  std::string source;
  std::string text = targetProfileText(nameOrPath, source);
  return parseTargetProfile(text, source, probe);
}

std::string targetProfileText(const std::string &nameOrPath, std::string &source) {
  const auto &texts = builtinTargetTexts();
  auto it = texts.find(nameOrPath);
  if (it != texts.end()) {
    source = "targets/" + it->first + ".json";
    return it->second;
  }
  bool looksLikeFile = nameOrPath.find('/') != std::string::npos ||
                       nameOrPath.find(".json") != std::string::npos;
  if (!looksLikeFile) {
    std::string names;
    for (const std::string &name : builtinTargetNames())
      names += (names.empty() ? "" : ", ") + name;
    fail("unknown target '{}': give a profile JSON file or one of {}", nameOrPath, names);
  }
  source = nameOrPath;
  return readFile(nameOrPath);
}

} // namespace kiln
