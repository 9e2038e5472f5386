//===- FusedExperts.cpp - Transformers v5's fused expert tensors ----------===//

#include "kiln/Runtime/FusedExperts.h"
#include "kiln/Support/Error.h"

#include <regex>

namespace kiln {

namespace {
const char *const kGateUp = "gate_up_proj";
const char *const kDown = "down_proj";

struct FusedPair {
  std::string gateUp, down; // stored keys; empty where absent
};
} // namespace

std::map<std::string, FusedExpertMember>
fusedExpertMembers(const std::vector<std::string> &names,
                   const std::function<Tensor(const std::string &)> &get,
                   const std::string &path) {
  static const std::regex fusedKey(R"((.*\.mlp\.experts)\.(gate_up_proj|down_proj))");
  static const std::regex perExpertKey(R"(.*\.mlp\.experts\.\d+\.(gate|up|down)_proj\.weight)");
  std::map<std::string, FusedPair> pairs; // by "<prefix>.mlp.experts"
  std::string perExpert;
  for (const std::string &name : names) {
    std::smatch m;
    if (name.find(".mlp.experts.") == std::string::npos) // most keys; skips the regexes
      continue;
    if (std::regex_match(name, m, fusedKey))
      (m[2] == kGateUp ? pairs[m[1]].gateUp : pairs[m[1]].down) = name;
    else if (perExpert.empty() && std::regex_match(name, perExpertKey))
      perExpert = name;
  }
  std::map<std::string, FusedExpertMember> members;
  if (pairs.empty())
    return members;
  if (!perExpert.empty()) {
    const FusedPair &first = pairs.begin()->second;
    fail("{}: holds fused expert tensors ('{}', Transformers v5's in-memory layout) and "
         "per-expert ones ('{}'); a checkpoint stores its experts one way",
         path, first.gateUp.empty() ? first.down : first.gateUp, perExpert);
  }
  for (const auto &[prefix, pair] : pairs) {
    if (pair.gateUp.empty() || pair.down.empty())
      fail("{}: '{}' has no '{}' beside it; fused experts come as the pair '{}.{}' "
           "[experts, 2 x moe_intermediate_size, hidden_size] and '{}.{}' [experts, "
           "hidden_size, moe_intermediate_size]",
           path, pair.gateUp.empty() ? pair.down : pair.gateUp,
           prefix + "." + (pair.gateUp.empty() ? kGateUp : kDown), prefix, kGateUp, prefix,
           kDown);
    Tensor gateUp = get(pair.gateUp), down = get(pair.down);
    const Shape &gu = gateUp.shape(), &d = down.shape();
    bool fits = gu.size() == 3 && d.size() == 3 && gu[1] % 2 == 0 && gu[0] == d[0] &&
                gu[2] == d[1] && gu[1] / 2 == d[2] && gateUp.dtype() == down.dtype();
    if (!fits)
      fail("{}: '{}' {} {} and '{}' {} {} do not fit together: expected [E, 2I, H] and "
           "[E, H, I] of one dtype",
           path, pair.gateUp, shapeToString(gu), dtypeName(gateUp.dtype()), pair.down,
           shapeToString(d), dtypeName(down.dtype()));
    int64_t experts = gu[0], inter = d[2], hidden = d[1];
    size_t block = size_t(inter * hidden) * dtypeSize(gateUp.dtype());
    for (int64_t e = 0; e < experts; ++e) {
      std::string expert = prefix + "." + std::to_string(e) + ".";
      members[expert + "gate_proj.weight"] = {pair.gateUp, {inter, hidden}, 2 * e * block};
      members[expert + "up_proj.weight"] = {pair.gateUp, {inter, hidden}, (2 * e + 1) * block};
      members[expert + "down_proj.weight"] = {pair.down, {hidden, inter}, e * block};
    }
  }
  return members;
}

Tensor fusedExpertView(const Tensor &fused, const FusedExpertMember &member) {
  // The view keeps the fused tensor (and so its file mapping) alive.
  auto owner = std::make_shared<Tensor>(fused);
  const char *base = static_cast<const char *>(fused.rawData());
  return Tensor(fused.dtype(), member.shape, owner, base + member.byteOffset);
}

} // namespace kiln
