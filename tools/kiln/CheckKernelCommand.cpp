//===- CheckKernelCommand.cpp - kiln check-kernel -------------------------===//
//
// A registered kernel's CPU implementation against the op(s) it replaces,
// forward and backward, on random inputs (kiln/Driver/KernelCheck.h).
//
//===----------------------------------------------------------------------===//

#include "Commands.h"
#include "kiln/Driver/KernelCheck.h"
#include "kiln/Support/CommandLine.h"
#include "kiln/Support/Error.h"

#include <fmt/core.h>
#include <fmt/ranges.h>

namespace kiln {

namespace {

/// "seq=512,head_dim=128" as (name, value) pairs.
KernelCheckShape parseShape(const std::string &text) {
  KernelCheckShape shape;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = std::min(text.find(',', start), text.size());
    std::string item = text.substr(start, comma - start);
    size_t eq = item.find('=');
    int64_t value = 0;
    size_t used = 0;
    try {
      if (eq != std::string::npos)
        value = std::stoll(item.substr(eq + 1), &used);
    } catch (const std::exception &) {
      used = 0;
    }
    if (eq == std::string::npos || eq == 0 || used == 0 || eq + 1 + used != item.size())
      fail("check-kernel: --shape '{}': each entry must be name=integer, got '{}'", text, item);
    shape.push_back({item.substr(0, eq), value});
    start = comma + 1;
  }
  return shape;
}

std::string shapeText(const KernelCheckShape &shape) {
  std::string text;
  for (const auto &[name, value] : shape)
    text += fmt::format("{}{}={}", text.empty() ? "" : ",", name, value);
  return text;
}

bool report(const KernelCheckReport &r, bool bf16, uint64_t seed) {
  fmt::print("{} (replaces {}) {} {} seed {}\n", r.kernel, r.target, shapeText(r.shape),
             bf16 ? "bf16" : "f32", seed);
  for (const auto &o : r.outputs)
    fmt::print("  {:<10} max abs {:<12.4g} max rel {:.4g}\n", o.name, o.maxAbs, o.maxRel);
  fmt::print("  {} (tolerance {:g} max abs)\n", r.passed() ? "PASS" : "FAIL", r.tolerance);
  return r.passed();
}

} // namespace

int runCheckKernel(const std::vector<std::string> &allArgs) {
  std::vector<std::string> args = allArgs;
  std::string name;
  if (!args.empty() && args.front().rfind("--", 0) != 0) {
    name = args.front();
    args.erase(args.begin());
  }
  OptionList options("check-kernel", args, {"all"});
  bool all = options.flag("all");
  std::optional<std::string> shape = options.value("shape");
  std::string dtype = options.value("dtype").value_or("f32");
  int64_t seed = options.integer("seed", 0);
  options.finish();
  if (all == !name.empty())
    fail("check-kernel: name one kernel or give --all (registered: {})",
         fmt::format("{}", fmt::join(registeredKernelNames(), ", ")));
  if (dtype != "f32" && dtype != "bf16")
    fail("check-kernel: --dtype must be f32 or bf16, got '{}'", dtype);
  if (all && shape)
    fail("check-kernel: --shape names one kernel's dimensions; it cannot go with --all");
  KernelCheckOptions check;
  check.bf16 = dtype == "bf16";
  check.seed = uint64_t(seed);
  if (shape)
    check.shape = parseShape(*shape);
  bool passed = true;
  for (const std::string &kernel : all ? registeredKernelNames() : std::vector<std::string>{name})
    passed &= report(checkKernel(kernel, check), check.bf16, check.seed);
  return passed ? 0 : 1;
}

} // namespace kiln
