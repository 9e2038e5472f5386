//===- Tensor.h - Host tensors for the CPU runtime --------------*- C++ -*-===//
//
// A Tensor is a dense, row-major, host-memory array with a static shape and
// one of the element types Kiln moves around (F32 for compute, F16/BF16 for
// storage, I64/I32 for token ids). Storage is reference counted so reshapes
// and checkpoint views share bytes; the owner may be a heap buffer or a
// memory-mapped file.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_TENSOR_H
#define KILN_RUNTIME_TENSOR_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

enum class DType { F32, F16, BF16, I64, I32 };

/// Bytes per element.
size_t dtypeSize(DType dtype);
/// The safetensors spelling ("F32", "BF16", ...).
std::string_view dtypeName(DType dtype);
/// Parses a safetensors dtype spelling; returns false if unknown.
bool parseDType(std::string_view name, DType &dtype);

using Shape = std::vector<int64_t>;
int64_t numElements(const Shape &shape);
std::string shapeToString(const Shape &shape);

class Tensor {
public:
  Tensor() = default;
  /// A new zero-filled tensor owning its storage.
  Tensor(DType dtype, Shape shape);
  /// A new tensor whose contents are undefined, for kernels that write every
  /// element (skips clearing memory that is about to be overwritten).
  static Tensor uninitialized(DType dtype, Shape shape);
  /// A view over externally owned bytes kept alive by `owner`.
  Tensor(DType dtype, Shape shape, std::shared_ptr<const void> owner,
         const void *data);

  DType dtype() const { return dtype_; }
  const Shape &shape() const { return shape_; }
  int64_t dim(size_t i) const { return shape_[i]; }
  size_t rank() const { return shape_.size(); }
  int64_t numel() const { return numElements(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtypeSize(dtype_); }
  bool defined() const { return data_ != nullptr || numel() == 0; }

  template <typename T> const T *data() const {
    return static_cast<const T *>(data_);
  }
  /// Mutable access; only valid for tensors that own writable storage.
  template <typename T> T *mutableData() {
    return static_cast<T *>(const_cast<void *>(data_));
  }
  const void *rawData() const { return data_; }
  /// True when this tensor owns writable memory that nothing else refers to
  /// (no other Tensor, view or reshape), so a kernel may overwrite it.
  bool isUniquelyOwned() const { return writable_ && owner_.use_count() == 1; }

  /// Same bytes, new shape (element counts must agree).
  Tensor reshaped(Shape shape) const;
  /// A copy converted to F32 (F16/BF16/I32/I64 are widened/converted).
  Tensor toF32() const;
  /// A copy converted to `dtype` (F32 -> BF16/F16 rounds to nearest even).
  Tensor to(DType dtype) const;

private:
  DType dtype_ = DType::F32;
  Shape shape_;
  std::shared_ptr<const void> owner_;
  const void *data_ = nullptr;
  bool writable_ = false; ///< storage allocated here, not a view of a file
};

/// IEEE half and bfloat16 conversions (round to nearest even).
float bf16ToF32(uint16_t bits);
uint16_t f32ToBf16(float value);
float f16ToF32(uint16_t bits);
uint16_t f32ToF16(float value);

} // namespace kiln

#endif // KILN_RUNTIME_TENSOR_H
