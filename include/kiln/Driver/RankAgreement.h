//===- RankAgreement.h - Every MPI rank runs the same job -------*- C++ -*-===//
//
// Under mpiexec each rank resolves its run alone: its own command line, run
// config, model directory and data files. Ranks whose runs differ meet in
// collectives of different counts and shapes: a hang, MPICH's "Message
// truncated", or a wrong model and exit 0. So before the first collective
// that depends on the run, the ranks compare what they resolved: a digest of
// it first, and only when the digests differ the settings themselves, so the
// error names the first setting that differs and which ranks hold which value.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_RANKAGREEMENT_H
#define KILN_DRIVER_RANKAGREEMENT_H

#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

/// A resolved run as named settings in a fixed order, each value compact JSON.
class RunSettings {
public:
  /// Adds `value` under `name`; an object adds one setting per leaf,
  /// "name.key" (arrays stay whole).
  void add(const std::string &name, const nlohmann::json &value);

  const std::vector<std::pair<std::string, std::string>> &entries() const { return entries_; }

  /// The settings as one text (a JSON array of [name, value] pairs) and back;
  /// `rank` names the sender when a text does not parse.
  std::string serialize() const;
  static RunSettings parse(const std::string &text, int rank);

private:
  std::vector<std::pair<std::string, std::string>> entries_;
};

/// The first setting, in rank 0's order (then the other ranks'), on which
/// `byRank` differ, with each value and the ranks holding it ("'optimizer.lr'
/// is 0.0008 on ranks 0-2, 4-7 and 0.001 on rank 3"), and how many settings
/// differ in all; nullopt when every rank holds the same settings.
std::optional<std::string> describeDisagreement(const std::vector<RunSettings> &byRank);

/// Returns when every MPI rank holds the same `mine`; otherwise throws
/// kiln::Error on every rank, saying what differs. `what` names what is
/// compared ("the run", "the training data"). A world of one returns at once.
void requireRanksAgree(const RunSettings &mine, const std::string &what);

} // namespace kiln

#endif // KILN_DRIVER_RANKAGREEMENT_H
