//===- SafeTensors.h - Hugging Face safetensors I/O -------------*- C++ -*-===//
//
// Kiln's own reader and writer for the safetensors format: an 8-byte
// little-endian header length N, N bytes of JSON mapping tensor names to
// {dtype, shape, data_offsets=[begin, end)} (plus an optional "__metadata__"
// string map), then the byte buffer the offsets index into.
//
// The reader memory-maps the file and validates everything before handing
// out views: header length within the file and below a sane bound, valid
// JSON object, known dtype, non-negative integer shape, shape x dtype size ==
// byte range, ranges inside the buffer and not overlapping. Any violation
// throws kiln::Error naming the file and the tensor.
//
// A checkpoint directory is either one `model.safetensors` or a sharded set
// described by `model.safetensors.index.json` ({"weight_map": {name: file}}).
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_SAFETENSORS_H
#define KILN_RUNTIME_SAFETENSORS_H

#include "kiln/Runtime/FusedExperts.h"
#include "kiln/Runtime/Tensor.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

/// One memory-mapped, validated safetensors file. Tensors returned by get()
/// are zero-copy views that keep the mapping alive.
class SafeTensorsFile {
public:
  /// Opens and validates `path`; throws kiln::Error on any problem. Anything
  /// but a regular file (a FIFO, a directory, ...) is refused without being
  /// opened, so a FIFO never blocks.
  static std::shared_ptr<SafeTensorsFile> open(const std::string &path);

  const std::string &path() const { return path_; }
  /// Tensor names in file order (sorted by data offset).
  const std::vector<std::string> &names() const { return names_; }
  bool contains(const std::string &name) const;
  /// A view of tensor `name`; throws if absent.
  Tensor get(const std::string &name) const;
  const std::map<std::string, std::string> &metadata() const { return metadata_; }

  ~SafeTensorsFile();

private:
  SafeTensorsFile() = default;
  struct Entry {
    DType dtype;
    Shape shape;
    size_t begin, end; // byte offsets into the data buffer
  };
  std::string path_;
  std::vector<std::string> names_;
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::string> metadata_;
  std::shared_ptr<const void> mapping_; // owns the mmap
  const unsigned char *dataBase_ = nullptr;
  size_t fileSize_ = 0;
};

/// Named tensors in a deterministic order.
using TensorMap = std::map<std::string, Tensor>;

/// Writes `tensors` to `path` atomically (a temporary file in the same
/// directory, fsync, then rename). Header keys are sorted; the data buffer
/// starts 8-byte aligned and is contiguous, widest dtype first then by name
/// (as the reference writer does), so each tensor is aligned to its element.
void writeSafeTensors(const std::string &path, const TensorMap &tensors,
                      const std::map<std::string, std::string> &metadata = {});

/// A Hugging Face checkpoint directory (or a single .safetensors file):
/// resolves `model.safetensors.index.json` shards, or `model.safetensors`.
/// Experts stored fused (Transformers v5's layout, FusedExperts.h) are named
/// and read as the per-expert keys they hold, never by their fused keys.
class Checkpoint {
public:
  /// `path` is a directory or a .safetensors file; throws kiln::Error. Files
  /// in it (index, shards) must be regular files, as SafeTensorsFile::open.
  static Checkpoint open(const std::string &path);

  /// All tensor names, sorted.
  std::vector<std::string> names() const;
  bool contains(const std::string &name) const;
  /// A zero-copy view; throws kiln::Error naming the checkpoint if absent.
  Tensor get(const std::string &name) const;
  const std::string &path() const { return path_; }

private:
  /// Moves the fused expert tensors out of byName_, naming their members.
  void readFusedExperts();

  std::string path_;
  std::map<std::string, std::shared_ptr<SafeTensorsFile>> byName_;
  std::map<std::string, std::shared_ptr<SafeTensorsFile>> fused_; ///< by fused key
  std::map<std::string, FusedExpertMember> fusedMembers_;         ///< by member key
};

} // namespace kiln

#endif // KILN_RUNTIME_SAFETENSORS_H
