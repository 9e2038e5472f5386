//===- NkiBinder.cpp - bind_kernels.py, the binder on the SDK host --------===//

#include "kiln/Driver/NkiBinder.h"
#include "kiln/Support/Error.h"

#include "proto/hlo.pb.h"

#include "llvm/Support/Base64.h"

#include <filesystem>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>

namespace kiln {

const std::string &bindKernelsSource(); // BindKernelsSource.cpp.in

std::string nkiBinderScript() {
  google::protobuf::FileDescriptorProto file;
  xla::HloModuleProto::descriptor()->file()->CopyTo(&file);
  std::string script = bindKernelsSource();
  const std::string placeholder = "__KILN_HLO_DESCRIPTOR__";
  size_t at = script.find(placeholder);
  if (at == std::string::npos)
    fail("bind_kernels.py has no {} to fill in", placeholder);
  return script.replace(at, placeholder.size(), llvm::encodeBase64(file.SerializeAsString()));
}

std::string kilnModuleFile(const std::string &dir) {
  std::string unbound = dir + "/model.unbound.hlo.pb";
  return std::filesystem::exists(unbound) ? unbound : dir + "/model.hlo.pb";
}

} // namespace kiln
