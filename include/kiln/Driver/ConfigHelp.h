//===- ConfigHelp.h - The run configuration's keys, described -*- C++ -*-===//
//
// What `kiln help train` (and plan, compile, check-hlo, calibrate-cpu) list
// after the command's usage, and the keys table of docs/cli.md, both
// formatted from TrainConfig::schema(): the table the parser reads keys
// with, so the help and the docs cannot drift from it
// (test/CLI/help.test compares the docs with `kiln help keys --markdown`).
//
//===----------------------------------------------------------------------===//
#ifndef KILN_DRIVER_CONFIGHELP_H
#define KILN_DRIVER_CONFIGHELP_H

#include <string>

namespace kiln {

/// Every key by section, one line each: name, default, type and allowed
/// values, description.
std::string configKeysText();

/// The same as a Markdown table (docs/cli.md).
std::string configKeysMarkdown();

} // namespace kiln

#endif // KILN_DRIVER_CONFIGHELP_H
