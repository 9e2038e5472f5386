//===- kiln.cpp - The kiln driver -----------------------------------------===//

#include "Commands.h"
#include "kiln/Backend/CPU/DeviceGrid.h"
#include "kiln/Support/Error.h"

#include <fmt/core.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unistd.h>

#include <chrono>
#include <new>
#include <thread>

namespace {
constexpr const char *kUsage = R"(usage: kiln <command> [options]

commands:
  capture --model <dir|flavor> [--batch B] [--seq S] [-o out.mlir] [--summary]
          [--train-step [--config run.json] [--section.key=value ...]
           [--rank R | --dump-ranks DIR]]
          capture a Qwen3 model as kiln dialect IR (@forward and @loss; with
          --train-step also @loss_grad and @train_step; --rank R: rank R's
          program, --dump-ranks: every rank's)
  capture --list-flavors
          list the built-in Qwen3 flavors with their parameter counts
  compile --config <run.json> [--model <dir|flavor>] [--target trn2|trn1] -o DIR
          [--section.key=value ...]
          the per-rank training step as XLA HLO for neuronx-cc (model.hlo.pb,
          model.hlo.txt, model.hlo.mlir, manifest.json, compile.sh); see
          docs/neuron.md
  check-hlo DIR --config <run.json> [--model <dir>] [--tolerance T]
          [--save-io IO_DIR] [--backend evaluator|compiled] [--section.key=value ...]
  check-hlo --neuron DIR
          evaluate DIR/model.hlo.pb on every rank on the CPU (--backend
          compiled: DIR/model.hlo.mlir compiled to native code, one rank; see
          docs/compiled.md) and compare one step (loss, grad norm, weights)
          with the CPU runtime's; --neuron: check the module against the
          Neuron conformance rules alone
  eval    --model <dir> --tokens <tokens.json> [--json]
          mean next-token loss of a token batch under a checkpoint
  train   --config <run.json> [--section.key=value ...]
          capture the whole training step (forward, loss, backward, AdamW) and
          train on CPU; torchtitan-style config sections, see docs/cli.md
  plan    --target <name|profile.json> [--config run.json] [--model <dir|flavor>]
          [--section.key=value ...] [--nodes N] [--json] [--trace trace.json]
          [--search [--search-by=tokens_per_second|usd_per_million_tokens]
           [--search-top N] [--search-max-local-batch B] [--search-ac LIST]]
          memory per rank, step time, MFU and cost of the run's per-rank
          program on a target (trn2.48xlarge, p5.48xlarge, cpu, ...)
  calibrate-cpu --config <run.json> [--steps N] [--section.key=value ...]
          time every op of N training steps on this machine and fit the cpu
          profile's efficiency factors to them (docs/planner.md)
  tokenize --tokenizer <tokenizer.json> [--decode] [--input <file>]
          Qwen3 byte-level BPE: text to ids, or ids back to text (stdin default)
  ckpt diff <checkpoint-a> <checkpoint-b>
          missing/unexpected keys and per-tensor max-abs difference
  check-kernel <name> [--shape dim=N,...] [--dtype f32|bf16] [--seed N]
  check-kernel --all
          a substitutable kernel's CPU implementation against the ops it
          replaces, forward and backward; exit 1 above its tolerance
)";
/// `status`, or 1 when the command's standard output could not be written
/// (a full disk, a closed pipe): output that was lost must not pass for
/// success. kiln train is exempt: its results are its files (checkpoints,
/// metrics), and a closed pipe sends its progress log to /dev/null
/// (TrainingJob.cpp) while it trains on.
int checkedOutput(const std::string &command, int status) {
  errno = 0;
  if (command == "train" || (std::fflush(stdout) == 0 && !std::ferror(stdout)))
    return status;
  // fputs, not fmt::print: a stderr that fails too must not throw here.
  std::fputs(fmt::format("error: {}: cannot write standard output: {}\n", command,
                         errno ? std::strerror(errno) : "write error")
                 .c_str(),
             stderr);
  return 1;
}

int dispatch(const std::string &command, const std::vector<std::string> &args) {
  if (command == "capture")
    return kiln::runCapture(args);
  if (command == "compile")
    return kiln::runCompile(args);
  if (command == "check-hlo")
    return kiln::runCheckHlo(args);
  if (command == "eval")
    return kiln::runEval(args);
  if (command == "train")
    return kiln::runTrain(args);
  if (command == "plan")
    return kiln::runPlan(args);
  if (command == "calibrate-cpu")
    return kiln::runCalibrateCpu(args);
  if (command == "ckpt")
    return kiln::runCheckpoint(args);
  if (command == "tokenize")
    return kiln::runTokenize(args);
  if (command == "check-kernel")
    return kiln::runCheckKernel(args);
  fmt::print(stderr, "error: unknown command '{}'\n{}", command, kUsage);
  return 2;
}
} // namespace

int main(int argc, char **argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    fmt::print(argc < 2 ? stderr : stdout, "{}", kUsage);
    return argc < 2 ? 2 : 0;
  }
  std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  try {
    return checkedOutput(command, dispatch(command, args));
  } catch (const std::exception &e) {
    // kiln::Error is the expected way out; anything else (a filesystem or
    // allocation error escaping a library) still ends as one clear line and
    // exit status 1, never std::terminate.
    std::string what = e.what();
    if (dynamic_cast<const std::bad_alloc *>(&e))
      what = "out of memory (" + what + ")";
    kiln::MpiWorld &world = kiln::MpiWorld::get();
    if (world.size() > 1) {
      // One write, so ranks failing together do not interleave their lines;
      // then every rank ends, never left waiting in a collective.
      std::string message = fmt::format("error: rank {}: {}\n", world.rank(), what);
      if (::write(2, message.data(), message.size()) < 0)
        std::perror("kiln");
      // The launcher forwards our stderr through a pipe and stops reading it
      // when the abort tears the job down: give it a moment to pass the
      // message on (under load it was sometimes lost).
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      world.abort(1);
    }
    std::fputs(("error: " + what + "\n").c_str(), stderr);
    return 1;
  }
}
