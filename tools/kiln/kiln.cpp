//===- kiln.cpp - The kiln driver -----------------------------------------===//

#include "Commands.h"
#include "kiln/Backend/CPU/DeviceGrid.h"
#include "kiln/Support/CommandLine.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Version.h"

#include <fmt/core.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unistd.h>

#include <chrono>
#include <new>
#include <optional>
#include <thread>

namespace {

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
  if (command == "help")
    return kiln::runHelp(args);
  fmt::print(stderr, "error: unknown command '{}'\n{}", command, kiln::usage());
  return 2;
}
} // namespace

int main(int argc, char **argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    fmt::print(argc < 2 ? stderr : stdout, "{}", kiln::usage());
    return argc < 2 ? 2 : 0;
  }
  std::string command = argv[1];
  if (command == "--version") {
    fmt::print("kiln {}\n", kiln::kilnVersion());
    return 0;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  kiln::acceptTorchtitanConfigFile(args);
  // `kiln <command> --help` anywhere among its options, as torchtitan's.
  for (const std::string &arg : args)
    if (arg == "--help" || arg == "-h")
      if (std::optional<std::string> help = kiln::commandHelp(command)) {
        fmt::print("{}", *help);
        return checkedOutput(command, 0);
      }
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
