//===- SubstituteKernels.cpp - Override rules -> kernel calls --------------===//
//
// Matching is by op name and module path only: a rule never looks inside an
// op. Every claim is collected before anything is rewritten, so two rules
// claiming one node are reported whatever their order, and a failing
// module is left as it was.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/Config/OverrideRules.h"
#include "kiln/Passes/Kiln/Passes.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Glob.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <fmt/core.h>

#include <optional>
#include <set>

namespace kiln {
#define GEN_PASS_DEF_SUBSTITUTEKERNELS
#include "kiln/Passes/Kiln/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// A rule's options as an attribute: numbers, strings, booleans, lists and
/// objects of them.
Attribute toAttribute(Builder &b, const nlohmann::json &value) {
  switch (value.type()) {
  case nlohmann::json::value_t::boolean:
    return b.getBoolAttr(value.get<bool>());
  case nlohmann::json::value_t::number_integer:
  case nlohmann::json::value_t::number_unsigned:
    return b.getI64IntegerAttr(value.get<int64_t>());
  case nlohmann::json::value_t::number_float:
    return b.getF64FloatAttr(value.get<double>());
  case nlohmann::json::value_t::string:
    return b.getStringAttr(value.get<std::string>());
  case nlohmann::json::value_t::array: {
    SmallVector<Attribute> items;
    for (const auto &item : value)
      items.push_back(toAttribute(b, item));
    return b.getArrayAttr(items);
  }
  case nlohmann::json::value_t::object: {
    SmallVector<NamedAttribute> entries;
    for (const auto &[key, item] : value.items())
      entries.push_back(b.getNamedAttr(key, toAttribute(b, item)));
    return b.getDictionaryAttr(entries);
  }
  default:
    return b.getUnitAttr();
  }
}

/// Checks the rules against each other and the kernel registry: unique
/// names, a registered kernel that implements the target op, valid globs.
/// Returns the first problem, naming the rule, or "".
std::string checkOverrideRules(const std::vector<OverrideRule> &rules) {
  std::set<std::string> names;
  for (const OverrideRule &rule : rules) {
    std::string where = fmt::format("{}: rule '{}'", rule.source, rule.name);
    if (!names.insert(rule.name).second)
      return fmt::format("{}: a second rule named '{}' (rule names must be unique)", where,
                         rule.name);
    const KernelSpec *spec = lookupKernelSpec(rule.kernel);
    if (!spec) {
      std::string known;
      for (const KernelSpec *s : registeredKernelSpecs())
        known += (known.empty() ? "" : ", ") + s->name().str();
      return fmt::format("{}: unknown kernel '{}' (registered: {})", where, rule.kernel, known);
    }
    if (spec->targetOp() != rule.target)
      return fmt::format("{}: kernel '{}' implements '{}', not the target '{}'", where,
                         rule.kernel, spec->targetOp().str(), rule.target);
    ArrayRef<StringLiteral> known = spec->ruleOptions();
    for (const auto &[key, value] : rule.options.items())
      if (!llvm::is_contained(known, key))
        return fmt::format("{}: kernel '{}' has no option '{}' ({})", where, rule.kernel, key,
                           known.empty() ? std::string("it takes none")
                                         : "its options: " + llvm::join(known, ", "));
    for (const std::string &glob : rule.fqns)
      if (std::string error = globError(glob); !error.empty())
        return fmt::format("{}: bad glob '{}' in fqns: {}", where, glob, error);
  }
  return "";
}

std::string fqnOf(Operation *op) {
  auto fqn = op->getAttrOfType<StringAttr>("fqn");
  return fqn ? fqn.str() : "";
}

struct SubstituteKernelsPass : public kiln::impl::SubstituteKernelsBase<SubstituteKernelsPass> {
  using SubstituteKernelsBase::SubstituteKernelsBase;
  SubstituteKernelsPass(std::vector<OverrideRule> rules, const SubstituteKernelsOptions &options)
      : SubstituteKernelsBase(options), presetRules(std::move(rules)) {}

  /// A node replaced: its rule and the rule's kernel.
  struct Replacement {
    Operation *op;
    const OverrideRule *rule;
    const KernelSpec *spec;
  };

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::vector<OverrideRule> rules;
    std::optional<KernelTarget> target = loadRules(module, rules);
    if (!target)
      return signalPassFailure();
    FailureOr<std::vector<Replacement>> replacements = claimNodes(module, rules, *target);
    if (failed(replacements))
      return signalPassFailure();
    std::map<std::string, int64_t> perRule = rewrite(module, *replacements);
    foldTransposes(module);
    if (log)
      report(module, rules, perRule);
  }

  /// The preset rules and those of the rule files, checked, and the target
  /// they are checked against; none after an error on `module`.
  std::optional<KernelTarget> loadRules(ModuleOp module, std::vector<OverrideRule> &rules) {
    rules = presetRules;
    for (const std::string &file : ruleFiles) {
      try {
        std::vector<OverrideRule> loaded = loadOverrideRuleFile(file);
        rules.insert(rules.end(), loaded.begin(), loaded.end());
      } catch (const Error &e) {
        module.emitError() << "kiln-substitute-kernels: " << e.what();
        return std::nullopt;
      }
    }
    if (std::string problem = checkOverrideRules(rules); !problem.empty()) {
      module.emitError() << "kiln-substitute-kernels: " << problem;
      return std::nullopt;
    }
    if (lnc < 1) {
      module.emitError() << "kiln-substitute-kernels: lnc " << lnc << " is not a logical "
                         << "NeuronCore config (lnc >= 1)";
      return std::nullopt;
    }
    return KernelTarget{targetName, lnc};
  }

  /// Every node a rule selects, claimed by one rule (with the nodes its
  /// kernel absorbs), whose kernel takes its form and meets the target's
  /// constraints: the replacements to make. A node two rules claim, or an
  /// exact rule's node the kernel cannot take, is an error.
  FailureOr<std::vector<Replacement>> claimNodes(ModuleOp module,
                                                 const std::vector<OverrideRule> &rules,
                                                 const KernelTarget &target) {
    // Claims: every selected node and the rules selecting it.
    llvm::MapVector<Operation *, SmallVector<const OverrideRule *>> claims;
    module.walk([&](Operation *op) {
      std::string fqn = fqnOf(op);
      if (fqn.empty())
        return;
      for (const OverrideRule &rule : rules)
        if (op->getName().getStringRef() == rule.target && selects(rule, fqn))
          claims[op].push_back(&rule);
    });

    std::vector<Replacement> replacements;
    llvm::DenseMap<Operation *, const OverrideRule *> owner;
    std::set<std::pair<std::string, std::string>> notes;
    auto claim = [&](Operation *node, const OverrideRule *rule) -> LogicalResult {
      auto [it, fresh] = owner.try_emplace(node, rule);
      if (fresh || it->second == rule)
        return success();
      return node->emitError() << "override rules '" << it->second->name << "' and '"
                               << rule->name << "' both claim " << fqnOf(node) << " ("
                               << node->getName() << ")";
    };
    for (auto &[op, selecting] : claims) {
      for (const OverrideRule *rule : selecting)
        if (failed(claim(op, rule)))
          return failure();
      const OverrideRule *rule = selecting.front();
      const KernelSpec *spec = lookupKernelSpec(rule->kernel);
      if (std::string form = spec->unsupportedForm(op); !form.empty()) {
        if (rule->exact)
          return op->emitError() << "override rule '" << rule->name << "' (exact): " << fqnOf(op)
                                 << " (" << op->getName() << ") cannot take kernel '"
                                 << rule->kernel << "': " << form;
        if (log && notes.insert({rule->name, fqnOf(op)}).second)
          llvm::errs() << "[Override] " << rule->name << ": left " << fqnOf(op) << " "
                       << op->getName() << ": " << form << "\n";
        continue;
      }
      for (Operation *absorbed : spec->absorbed(op))
        if (failed(claim(absorbed, rule)))
          return failure();
      SmallVector<std::string> violations;
      spec->checkConstraints(op, target, violations);
      if (!violations.empty()) {
        auto diag = op->emitError()
                    << "override rule '" << rule->name << "': " << fqnOf(op) << " ("
                    << op->getName() << ") violates the constraint"
                    << (violations.size() > 1 ? "s" : "") << " of kernel '" << rule->kernel
                    << "' on target " << wordOf(target.name) << " (lnc " << target.lnc << "): ";
        for (size_t i = 0; i < violations.size(); ++i)
          diag << (i ? "; " : "") << violations[i];
        return failure();
      }
      replacements.push_back({op, rule, spec});
    }
    return replacements;
  }

  /// Each replacement made, logged once per (rule, node) across functions;
  /// the nodes each rule replaced.
  std::map<std::string, int64_t> rewrite(ModuleOp module,
                                         const std::vector<Replacement> &replacements) {
    std::set<std::pair<std::string, std::string>> logged;
    std::map<std::string, int64_t> perRule;
    OpBuilder b(module.getContext());
    for (const Replacement &r : replacements) {
      std::string fqn = fqnOf(r.op);
      b.setInsertionPoint(r.op);
      KernelCall call{b.getStringAttr(r.rule->name), b.getStringAttr(fqn),
                      cast<DictionaryAttr>(toAttribute(b, r.rule->options))};
      SmallVector<Operation *> absorbed = r.spec->absorbed(r.op);
      SmallVector<Value> values = r.spec->substitute(b, r.op, call);
      r.op->replaceAllUsesWith(values);
      r.op->erase();
      for (Operation *dead : absorbed)
        if (dead->use_empty())
          dead->erase();
      if (logged.insert({r.rule->name, fqn}).second) {
        ++perRule[r.rule->name];
        if (log)
          llvm::errs() << "[Override] " << r.rule->name << ": " << fqn << " " << r.rule->target
                       << " -> " << r.rule->kernel << "\n";
      }
    }
    return perRule;
  }

  /// The count of nodes replaced, and a warning for each rule that matched
  /// nothing.
  static void report(ModuleOp module, const std::vector<OverrideRule> &rules,
                     const std::map<std::string, int64_t> &perRule) {
    int64_t total = 0;
    for (auto &[name, count] : perRule)
      total += count;
    if (!rules.empty())
      llvm::errs() << "[Override] " << total << " node" << (total == 1 ? "" : "s")
                   << " replaced by " << perRule.size() << " of " << rules.size() << " rule"
                   << (rules.size() == 1 ? "" : "s") << "\n";
    for (const OverrideRule &rule : rules)
      if (!perRule.count(rule.name)) {
        std::string globs;
        for (const std::string &glob : rule.fqns)
          globs += (globs.empty() ? "" : ", ") + glob;
        module.emitWarning() << "override rule '" << rule.name << "' (" << rule.source
                             << ") matched nothing: no " << rule.target << " node"
                             << (globs.empty() ? "" : " at " + globs) << " it could replace";
      }
  }

  /// Kernels of one layout in a row (rope, then attention) leave a
  /// transpose out of the layout feeding one back in: both go.
  static void foldTransposes(ModuleOp module) {
    SmallVector<TransposeOp> transposes;
    module.walk([&](TransposeOp t) { transposes.push_back(t); });
    for (TransposeOp t : transposes) {
      SmallVector<OpFoldResult> folded;
      if (failed(t->fold(folded)) || folded.size() != 1 || !isa<Value>(folded[0]))
        continue;
      Operation *inner = t.getInput().getDefiningOp();
      t.replaceAllUsesWith(cast<Value>(folded[0]));
      t.erase();
      if (inner && isa<TransposeOp>(inner) && inner->use_empty())
        inner->erase();
    }
  }

  static bool selects(const OverrideRule &rule, const std::string &fqn) {
    if (rule.fqns.empty())
      return true;
    for (const std::string &glob : rule.fqns)
      if (globMatch(glob, fqn))
        return true;
    return false;
  }

  std::vector<OverrideRule> presetRules;
};

} // namespace

std::unique_ptr<Pass> kiln::createSubstituteKernels(std::vector<OverrideRule> rules,
                                                    const SubstituteKernelsOptions &options) {
  return std::make_unique<SubstituteKernelsPass>(std::move(rules), options);
}
