//===- Help.cpp - kiln help, kiln <command> --help ------------------------===//

#include "Commands.h"
#include "kiln/Driver/ConfigHelp.h"
#include "kiln/Support/Error.h"

#include <fmt/core.h>

namespace kiln {

namespace {

struct CommandHelp {
  const char *name;
  /// Takes --config and --section.key=value overrides: its help lists the
  /// config keys.
  bool configKeys;
  const char *usage;
};

/// Each command's usage, in the order `kiln --help` lists them (a command
/// with two forms has two entries).
const CommandHelp kCommands[] = {
    {"capture", true,
     R"(  capture --model <dir|flavor> [--batch B] [--seq S] [-o out.mlir] [--summary]
          [--train-step [--config run.json] [--section.key=value ...]
           [--rank R | --dump-ranks DIR]]
          capture a Qwen3 model as kiln dialect IR (@forward and @loss; with
          --train-step also @loss_grad and @train_step; --rank R: rank R's
          program, --dump-ranks: every rank's)
  capture --list-flavors
          list the built-in Qwen3 flavors with their parameter counts
)"},
    {"compile", true,
     R"(  compile --config <run.json> [--model <dir|flavor>] [--target trn2|trn1|cpu] -o DIR
          [--allow-oversize] [--section.key=value ...]
          the per-rank training step as XLA HLO for neuronx-cc (model.hlo.pb,
          model.hlo.txt, model.hlo.mlir, manifest.json, compile.sh); see
          docs/neuron.md. --target cpu: as native code for this CPU
          (train_step.o, manifest.json), which kiln train
          --compile.enable=true --compile.artifact=DIR links; see
          docs/compiled.md
)"},
    {"check-hlo", true, R"(  check-hlo DIR --config <run.json> [--model <dir>] [--tolerance T]
          [--save-io IO_DIR] [--backend evaluator|compiled] [--section.key=value ...]
  check-hlo --neuron DIR
          evaluate DIR/model.hlo.pb on every rank on the CPU (--backend
          compiled: DIR/model.hlo.mlir compiled to native code, one rank; see
          docs/compiled.md) and compare one step (loss, grad norm, weights)
          with the CPU runtime's; --neuron: check the module against the
          Neuron conformance rules alone
)"},
    {"eval", false, R"(  eval    --model <dir> --tokens <tokens.json> [--json]
          mean next-token loss of a token batch under a checkpoint
)"},
    {"train", true, R"(  train   --config <run.json> [--section.key=value ...]
          capture the whole training step (forward, loss, backward, AdamW) and
          train on CPU; torchtitan-style config sections, see docs/cli.md
)"},
    {"plan", true,
     R"(  plan    --target <name|profile.json> [--config run.json] [--model <dir|flavor>]
          [--section.key=value ...] [--nodes N] [--json] [--trace trace.json] [--timing]
          [--search [--search-by=tokens_per_second|usd_per_million_tokens]
           [--search-top N] [--search-max-local-batch B] [--search-ac LIST]
           [--search-max-pp P] [--search-max-cp C] [--search-whole-model]]
  plan    --validate [--published runs.json] [--json]
  plan    --fit <target> --fit-factors LIST [--published runs.json] [-o profile.json] [--json]
          memory per rank, step time, MFU and cost of the run's per-rank
          program on a target (trn2.48xlarge, p5.48xlarge, cpu, ...);
          --validate: every published run planned against its figures;
          --fit: a target's efficiency factors fitted to its published runs
)"},
    {"calibrate-cpu", true,
     R"(  calibrate-cpu --config <run.json> [--steps N] [--section.key=value ...]
          time every op of N training steps on this machine and fit the cpu
          profile's efficiency factors to them (docs/planner.md)
)"},
    {"tokenize", false, R"(  tokenize --tokenizer <tokenizer.json> [--decode] [--input <file>]
          Qwen3 byte-level BPE: text to ids, or ids back to text (stdin default)
)"},
    {"ckpt", false, R"(  ckpt diff <checkpoint-a> <checkpoint-b>
          missing/unexpected keys and per-tensor max-abs difference
)"},
    {"check-kernel", false,
     R"(  check-kernel <name> [--shape dim=N,...] [--dtype f32|bf16] [--seed N]
  check-kernel --all
          a substitutable kernel's CPU implementation against the ops it
          replaces, forward and backward; exit 1 above its tolerance
)"},
};

constexpr const char *kHeader = R"(usage: kiln <command> [options]
       kiln help [<command> | keys [--markdown]]     kiln <command> --help
       kiln --version

commands:
)";

} // namespace

std::string usage() {
  std::string out = kHeader;
  for (const CommandHelp &c : kCommands)
    out += c.usage;
  return out;
}

std::optional<std::string> commandHelp(const std::string &command) {
  std::string out;
  bool keys = false;
  for (const CommandHelp &c : kCommands)
    if (command == c.name) {
      out += c.usage;
      keys |= c.configKeys;
    }
  if (out.empty())
    return std::nullopt;
  // "  train   --config ..." -> "usage: kiln train --config ..."
  size_t name = out.find_first_not_of(' '), gap = out.find(' ', name);
  out = "usage: kiln " + out.substr(name, gap - name) + " " +
        out.substr(out.find_first_not_of(' ', gap));
  return keys ? out + "\n" + configKeysText() : out;
}

int runHelp(const std::vector<std::string> &args) {
  if (args.empty()) {
    fmt::print("{}", usage());
    return 0;
  }
  if (args[0] == "keys" && args.size() <= 2) {
    if (args.size() == 1) {
      fmt::print("{}", configKeysText());
      return 0;
    }
    if (args[1] == "--markdown") {
      fmt::print("{}", configKeysMarkdown());
      return 0;
    }
  }
  std::optional<std::string> help = args.size() == 1 ? commandHelp(args[0]) : std::nullopt;
  if (!help)
    fail("help: no command '{}' (kiln help lists them; kiln help keys the config keys)",
         fmt::format("{}", fmt::join(args, " ")));
  fmt::print("{}", *help);
  return 0;
}

} // namespace kiln
