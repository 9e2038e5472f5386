//===- ClosedSetOption.h - A closed set as a command-line option -*- C++ -*-===//
//
// llvm::cl's parser of every closed set (ClosedSets.h), so that a pass option
// or pipeline option of an enum type (Passes.td, KilnPipelineOptions) reads
// and prints the set's words, and a word outside the set is the option's
// parse error naming the words, before any pass runs. Include it before an
// option of such a type is declared.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_SUPPORT_CLOSEDSETOPTION_H
#define KILN_SUPPORT_CLOSEDSETOPTION_H

#include "kiln/Support/ClosedSets.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

namespace kiln {

template <typename E> class ClosedSetParser : public llvm::cl::basic_parser<E> {
public:
  using llvm::cl::basic_parser<E>::basic_parser;

  /// False on success, as llvm::cl's parsers.
  bool parse(llvm::cl::Option &option, llvm::StringRef, llvm::StringRef word, E &value) {
    if (std::optional<E> parsed = parseWord<E>(word)) {
      value = *parsed;
      return false;
    }
    return option.error("'" + word + "' is not one of " + listWords<E>());
  }

  /// The words, as --help shows them: <linear|sqrt|cosine>.
  llvm::StringRef getValueName() const override {
    static const std::string name = listWords<E>("|");
    return name;
  }

  /// How a pass pipeline prints the option (mlir::PassOptions).
  static void print(llvm::raw_ostream &os, E value) { os << wordOf(value); }

  void printOptionDiff(const llvm::cl::Option &option, E value,
                       const llvm::cl::OptionValue<E> &defaultValue, size_t globalWidth) const {
    this->printOptionName(option, globalWidth);
    llvm::outs() << "= " << wordOf(value);
    if (defaultValue.hasValue())
      llvm::outs() << " (default: " << wordOf(defaultValue.getValue()) << ")";
    llvm::outs() << "\n";
  }
};

} // namespace kiln

namespace llvm::cl {
template <> class parser<kiln::DecayType> : public kiln::ClosedSetParser<kiln::DecayType> {
public:
  using ClosedSetParser::ClosedSetParser;
};
template <>
class parser<kiln::CheckpointMode> : public kiln::ClosedSetParser<kiln::CheckpointMode> {
public:
  using ClosedSetParser::ClosedSetParser;
};
template <>
class parser<kiln::ReshardAfterForward> : public kiln::ClosedSetParser<kiln::ReshardAfterForward> {
public:
  using ClosedSetParser::ClosedSetParser;
};
template <>
class parser<kiln::PrecisionDtype> : public kiln::ClosedSetParser<kiln::PrecisionDtype> {
public:
  using ClosedSetParser::ClosedSetParser;
};
template <>
class parser<kiln::ExpertDispatcher> : public kiln::ClosedSetParser<kiln::ExpertDispatcher> {
public:
  using ClosedSetParser::ClosedSetParser;
};
template <> class parser<kiln::TargetName> : public kiln::ClosedSetParser<kiln::TargetName> {
public:
  using ClosedSetParser::ClosedSetParser;
};
} // namespace llvm::cl

#endif // KILN_SUPPORT_CLOSEDSETOPTION_H
