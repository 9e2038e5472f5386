//===- Tensor.cpp - Host tensors for the CPU runtime ----------------------===//

#include "kiln/Runtime/Tensor.h"
#include "kiln/Support/Error.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sys/mman.h>
#include <unistd.h>
#include <limits>

namespace kiln {

size_t dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F32: return 4;
  case DType::F16: return 2;
  case DType::BF16: return 2;
  case DType::I64: return 8;
  case DType::I32: return 4;
  }
  return 0;
}

std::string_view dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32: return "F32";
  case DType::F16: return "F16";
  case DType::BF16: return "BF16";
  case DType::I64: return "I64";
  case DType::I32: return "I32";
  }
  return "?";
}

bool parseDType(std::string_view name, DType &dtype) {
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32}) {
    if (dtypeName(d) == name) {
      dtype = d;
      return true;
    }
  }
  return false;
}

int64_t numElements(const Shape &shape) {
  int64_t n = 1; // a rank-0 tensor is a scalar: one element
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string shapeToString(const Shape &shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

//===----------------------------------------------------------------------===//
// Float conversions. Done on bit patterns so results are exact and do not
// depend on the host FPU's rounding mode or on F16C/AVX512-BF16 support.
//===----------------------------------------------------------------------===//

static uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

static float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

float bf16ToF32(uint16_t bits) { return bitsFloat(uint32_t(bits) << 16); }

uint16_t f32ToBf16(float value) {
  uint32_t u = floatBits(value);
  // NaN: truncating could clear every payload bit and yield inf, so keep the
  // sign and top payload bits and force the quiet bit.
  if ((u & 0x7FFFFFFFu) > 0x7F800000u)
    return uint16_t((u >> 16) | 0x0040u);
  // Round to nearest even: add just under half an ulp, plus one if the kept
  // LSB is odd so exact ties go up only from odd. Carries into the exponent
  // are correct (including overflow to inf).
  u += 0x7FFFu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

float f16ToF32(uint16_t bits) {
  uint32_t sign = uint32_t(bits & 0x8000u) << 16;
  uint32_t exp = (bits >> 10) & 0x1Fu;
  uint32_t mant = bits & 0x3FFu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24 is exactly representable in F32.
    float mag = std::ldexp(float(mant), -24);
    return sign ? -mag : mag;
  }
  if (exp == 0x1F) // inf / NaN (payload preserved)
    return bitsFloat(sign | 0x7F800000u | (mant << 13));
  return bitsFloat(sign | ((exp + (127 - 15)) << 23) | (mant << 13));
}

/// Shifts `m` right by `shift` bits, rounding to nearest even.
static uint32_t shiftRoundEven(uint32_t m, unsigned shift) {
  uint32_t kept = m >> shift;
  uint32_t rem = m & ((1u << shift) - 1);
  uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (kept & 1u)))
    ++kept; // may carry into the exponent field; that is the right encoding
  return kept;
}

uint16_t f32ToF16(float value) {
  uint32_t u = floatBits(value);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  uint32_t abs = u & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) // NaN: keep top payload bits, force quiet
    return uint16_t(sign | 0x7E00u | ((abs >> 13) & 0x3FFu));
  // 65520 (0x477FF000) is the tie between 65504 (max finite, odd mantissa)
  // and 65536, so it and everything above rounds to inf.
  if (abs >= 0x477FF000u)
    return uint16_t(sign | 0x7C00u);
  uint32_t exp = abs >> 23;
  if (exp < 127 - 14) {
    // Result is an F16 subnormal (or zero): count in units of 2^-24.
    // value = m * 2^(exp-150) = (m >> (126-exp)) units.
    unsigned shift = 126 - exp;
    if (shift > 24) // below 2^-25 (half the smallest subnormal) -> zero
      return sign;
    uint32_t m = (abs & 0x7FFFFFu) | 0x800000u;
    return uint16_t(sign | shiftRoundEven(m, shift));
  }
  // Normal: rebias the exponent, round away 13 mantissa bits.
  uint32_t rebased = ((exp - (127 - 15)) << 23) | (abs & 0x7FFFFFu);
  return uint16_t(sign | shiftRoundEven(rebased, 13));
}

//===----------------------------------------------------------------------===//
// Tensor
//===----------------------------------------------------------------------===//

static void checkShape(const Shape &shape) {
  for (int64_t d : shape)
    if (d < 0)
      fail("tensor shape {} has a negative dimension", shapeToString(shape));
}

namespace {

constexpr size_t kHugePage = size_t(2) << 20;

/// Large buffers freed by tensors, kept for reuse. A training step frees and
/// allocates the same sizes over and over (old and new weights, moments,
/// gradients); handing a mapping back to the kernel would make it clear
/// every page again on the next fault, which dominated multi-GB steps.
class LargeBufferCache {
public:
  static LargeBufferCache &get() {
    static LargeBufferCache cache;
    return cache;
  }
  /// A mapping of exactly `length` bytes: recycled (contents undefined) or
  /// fresh (zero). `recycled` says which.
  void *take(size_t length, bool &recycled) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.find(length);
      if (it != free_.end()) {
        void *p = it->second;
        free_.erase(it);
        cachedBytes_ -= length;
        recycled = true;
        return p;
      }
    }
    recycled = false;
    void *p = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return nullptr;
    ::madvise(p, length, MADV_HUGEPAGE); // thousands of faults instead of millions
    return p;
  }
  void give(void *p, size_t length) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cachedBytes_ + length > maxCachedBytes_) {
      ::munmap(p, length);
      return;
    }
    free_.emplace(length, p);
    cachedBytes_ += length;
  }

private:
  /// Up to a quarter of physical memory: enough to recycle a whole training
  /// step's turnover of large buffers on models that fit comfortably.
  const size_t maxCachedBytes_ =
      size_t(::sysconf(_SC_PHYS_PAGES)) * size_t(::sysconf(_SC_PAGE_SIZE)) / 4;
  std::mutex mutex_;
  std::multimap<size_t, void *> free_;
  size_t cachedBytes_ = 0;
};

/// Host memory for a tensor; zero-filled when `zero`, else undefined (for
/// kernels that write every element). Buffers of 4 MiB and more are
/// huge-page mappings recycled through LargeBufferCache; smaller ones come
/// from malloc, 64-byte aligned for the kernels.
std::shared_ptr<const void> allocate(size_t bytes, bool zero, const Shape &shape,
                                     DType dtype) {
  if (bytes >= 2 * kHugePage) {
    size_t length = (bytes + kHugePage - 1) & ~(kHugePage - 1);
    bool recycled = false;
    void *p = LargeBufferCache::get().take(length, recycled);
    if (!p)
      fail("out of memory mapping {} bytes for tensor {} x {}", length, shapeToString(shape),
           dtypeName(dtype));
    if (zero && recycled)
      std::memset(p, 0, bytes);
    return std::shared_ptr<const void>(
        p, [length](const void *q) { LargeBufferCache::get().give(const_cast<void *>(q), length); });
  }
  // aligned_alloc needs a size that is a multiple of the alignment; always
  // allocate at least one line so the pointer is non-null for empty tensors.
  size_t rounded = (std::max<size_t>(bytes, 1) + 63) & ~size_t(63);
  void *p = std::aligned_alloc(64, rounded);
  if (!p)
    fail("out of memory allocating {} bytes for tensor {} x {}", rounded, shapeToString(shape),
         dtypeName(dtype));
  if (zero)
    std::memset(p, 0, rounded);
  return std::shared_ptr<const void>(p, [](const void *q) { std::free(const_cast<void *>(q)); });
}
} // namespace

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  checkShape(shape_);
  owner_ = allocate(nbytes(), /*zero=*/true, shape_, dtype_);
  data_ = owner_.get();
  writable_ = true;
}

Tensor Tensor::uninitialized(DType dtype, Shape shape) {
  checkShape(shape);
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.owner_ = allocate(t.nbytes(), /*zero=*/false, t.shape_, dtype);
  t.data_ = t.owner_.get();
  t.writable_ = true;
  return t;
}

Tensor::Tensor(DType dtype, Shape shape, std::shared_ptr<const void> owner,
               const void *data)
    : dtype_(dtype), shape_(std::move(shape)), owner_(std::move(owner)), data_(data) {
  checkShape(shape_);
}

Tensor Tensor::reshaped(Shape shape) const {
  checkShape(shape);
  if (numElements(shape) != numel())
    fail("cannot reshape tensor {} ({} elements) to {} ({} elements)",
         shapeToString(shape_), numel(), shapeToString(shape), numElements(shape));
  Tensor view = *this; // same storage (and writability), new shape
  view.shape_ = std::move(shape);
  return view;
}

/// Applies `f(src[i])` into a new tensor of `dtype` with element type `Dst`.
template <typename Dst, typename Src, typename F>
static Tensor convert(const Tensor &src, DType dtype, F f) {
  Tensor out(dtype, src.shape());
  const Src *in = src.data<Src>();
  Dst *o = out.mutableData<Dst>();
  for (int64_t i = 0, n = src.numel(); i < n; ++i)
    o[i] = f(in[i]);
  return out;
}

Tensor Tensor::toF32() const {
  switch (dtype_) {
  case DType::F32: return convert<float, float>(*this, DType::F32, [](float x) { return x; });
  case DType::F16: return convert<float, uint16_t>(*this, DType::F32, f16ToF32);
  case DType::BF16: return convert<float, uint16_t>(*this, DType::F32, bf16ToF32);
  case DType::I64: return convert<float, int64_t>(*this, DType::F32, [](int64_t x) { return float(x); });
  case DType::I32: return convert<float, int32_t>(*this, DType::F32, [](int32_t x) { return float(x); });
  }
  fail("toF32: unknown dtype");
}

static bool isFloat(DType d) { return d == DType::F32 || d == DType::F16 || d == DType::BF16; }

Tensor Tensor::to(DType dtype) const {
  if (dtype == DType::F32)
    return toF32();
  if (dtype == dtype_) { // plain copy, independent of this tensor's storage
    Tensor out(dtype, shape_);
    if (nbytes())
      std::memcpy(out.mutableData<void>(), data_, nbytes());
    return out;
  }
  // Float targets: go through F32 (exact for F16/BF16 sources), then round.
  if (dtype == DType::BF16 && isFloat(dtype_))
    return convert<uint16_t, float>(dtype_ == DType::F32 ? *this : toF32(), dtype, f32ToBf16);
  if (dtype == DType::F16 && isFloat(dtype_))
    return convert<uint16_t, float>(dtype_ == DType::F32 ? *this : toF32(), dtype, f32ToF16);
  if (dtype == DType::I64 && dtype_ == DType::I32)
    return convert<int64_t, int32_t>(*this, dtype, [](int32_t x) { return int64_t(x); });
  if (dtype == DType::I32 && dtype_ == DType::I64) {
    // Token ids never exceed I32, so an out-of-range value means bad input;
    // refuse rather than silently wrap.
    return convert<int32_t, int64_t>(*this, dtype, [](int64_t x) {
      if (x < std::numeric_limits<int32_t>::min() || x > std::numeric_limits<int32_t>::max())
        fail("cannot convert I64 value {} to I32: out of range", x);
      return int32_t(x);
    });
  }
  fail("unsupported tensor conversion {} -> {}", dtypeName(dtype_), dtypeName(dtype));
}

} // namespace kiln
