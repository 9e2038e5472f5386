//===- TensorTest.cpp - Tensor, dtype and float-conversion tests ----------===//

#include "TestUtil.h"
#include "kiln/Runtime/Tensor.h"

#include <cmath>
#include <cstring>
#include <limits>

using namespace kiln;
using kiln::test::expectError;

namespace {

float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// A tensor of `dtype` whose elements are `values` (given as element type T).
template <typename T> Tensor makeTensor(DType dtype, Shape shape, std::vector<T> values) {
  Tensor t(dtype, std::move(shape));
  EXPECT_EQ(size_t(t.numel()), values.size());
  std::memcpy(t.mutableData<T>(), values.data(), values.size() * sizeof(T));
  return t;
}

template <typename T> std::vector<T> elements(const Tensor &t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}

} // namespace

TEST(DType, NamesSizesAndParsing) {
  struct Case { DType d; const char *name; size_t size; };
  for (Case c : {Case{DType::F32, "F32", 4}, Case{DType::F16, "F16", 2},
                 Case{DType::BF16, "BF16", 2}, Case{DType::I64, "I64", 8},
                 Case{DType::I32, "I32", 4}}) {
    EXPECT_EQ(dtypeName(c.d), c.name);
    EXPECT_EQ(dtypeSize(c.d), c.size);
    DType parsed = DType::F32;
    EXPECT_TRUE(parseDType(c.name, parsed));
    EXPECT_EQ(parsed, c.d);
  }
  DType d = DType::I32;
  for (const char *bad : {"F64", "f32", "BOOL", "U8", ""})
    EXPECT_FALSE(parseDType(bad, d)) << bad;
  EXPECT_EQ(d, DType::I32) << "a failed parse must not modify the output";
}

TEST(Shape, NumElementsAndFormatting) {
  EXPECT_EQ(numElements({}), 1);
  EXPECT_EQ(numElements({0, 5}), 0);
  EXPECT_EQ(numElements({2, 32, 512}), 32768);
  EXPECT_EQ(shapeToString({2, 32, 512}), "[2, 32, 512]");
  EXPECT_EQ(shapeToString({}), "[]");
  EXPECT_EQ(shapeToString({7}), "[7]");
}

TEST(Tensor, OwnedStorageIsZeroedAndAligned) {
  Tensor t(DType::F32, {3, 5});
  ASSERT_TRUE(t.defined());
  EXPECT_EQ(t.rank(), 2u);
  EXPECT_EQ(t.dim(1), 5);
  EXPECT_EQ(t.nbytes(), 60u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.rawData()) % 64, 0u);
  for (float v : elements<float>(t))
    EXPECT_EQ(v, 0.0f);

  EXPECT_FALSE(Tensor().defined());
  EXPECT_TRUE(Tensor(DType::BF16, {0, 4}).defined()); // empty is still defined
  EXPECT_EQ(Tensor(DType::I64, {}).numel(), 1);       // 0-d scalar
}

TEST(Tensor, NegativeDimensionThrows) {
  EXPECT_THROW(Tensor(DType::F32, {2, -1}), Error);
}

TEST(Tensor, ViewKeepsOwnerAlive) {
  std::weak_ptr<const void> watch;
  Tensor view;
  {
    auto buf = std::make_shared<std::vector<int32_t>>(std::vector<int32_t>{1, 2, 3, 4});
    watch = buf;
    view = Tensor(DType::I32, {2, 2}, buf, buf->data());
  }
  EXPECT_FALSE(watch.expired());
  EXPECT_EQ(elements<int32_t>(view), (std::vector<int32_t>{1, 2, 3, 4}));
  view = Tensor();
  EXPECT_TRUE(watch.expired());
}

TEST(Tensor, ReshapeSharesBytes) {
  Tensor t = makeTensor<float>(DType::F32, {2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor r = t.reshaped({3, 1, 2});
  EXPECT_EQ(r.shape(), (Shape{3, 1, 2}));
  EXPECT_EQ(r.rawData(), t.rawData());
  EXPECT_EQ(t.reshaped({6}).data<float>()[5], 5.0f);
  EXPECT_EQ(Tensor(DType::I32, {1, 1}).reshaped({}).rank(), 0u); // to a scalar
}

TEST(Tensor, ReshapeWithDifferentCountThrows) {
  Tensor t(DType::F32, {2, 3});
  expectError([&] { t.reshaped({4, 2}); }, {"[2, 3]", "[4, 2]"});
  EXPECT_THROW(t.reshaped({}), Error); // 1 element vs 6
}

//===----------------------------------------------------------------------===//
// Bit-exact float conversions
//===----------------------------------------------------------------------===//

TEST(BF16, KnownBitPatterns) {
  EXPECT_EQ(f32ToBf16(1.0f), 0x3F80);
  EXPECT_EQ(f32ToBf16(-2.0f), 0xC000);
  EXPECT_EQ(f32ToBf16(0.0f), 0x0000);
  EXPECT_EQ(f32ToBf16(-0.0f), 0x8000);
  EXPECT_EQ(f32ToBf16(INFINITY), 0x7F80);
  EXPECT_EQ(f32ToBf16(-INFINITY), 0xFF80);
  // Ties to even: 0x3F808000 is exactly halfway between 0x3F80 and 0x3F81.
  EXPECT_EQ(f32ToBf16(bitsToFloat(0x3F808000)), 0x3F80);
  EXPECT_EQ(f32ToBf16(bitsToFloat(0x3F818000)), 0x3F82);
  EXPECT_EQ(f32ToBf16(bitsToFloat(0x3F808001)), 0x3F81);
  EXPECT_EQ(f32ToBf16(bitsToFloat(0x3F807FFF)), 0x3F80);
  // FLT_MAX rounds up to inf under round-to-nearest.
  EXPECT_EQ(f32ToBf16(std::numeric_limits<float>::max()), 0x7F80);
  // A NaN whose payload lives only in the low 16 bits must stay NaN.
  uint16_t nan = f32ToBf16(bitsToFloat(0x7F800001));
  EXPECT_TRUE(std::isnan(bf16ToF32(nan))) << std::hex << nan;
  EXPECT_EQ(bf16ToF32(0x3F80), 1.0f);
  EXPECT_EQ(bf16ToF32(0x0001), bitsToFloat(0x00010000)); // subnormal passes through
}

TEST(F16, KnownBitPatterns) {
  EXPECT_EQ(f32ToF16(1.0f), 0x3C00);
  EXPECT_EQ(f32ToF16(-2.0f), 0xC000);
  EXPECT_EQ(f32ToF16(-0.0f), 0x8000);
  EXPECT_EQ(f32ToF16(65504.0f), 0x7BFF);  // max finite
  EXPECT_EQ(f32ToF16(65519.99f), 0x7BFF); // just below the tie
  EXPECT_EQ(f32ToF16(65520.0f), 0x7C00);  // tie with odd 0x7BFF -> inf
  EXPECT_EQ(f32ToF16(1e10f), 0x7C00);
  EXPECT_EQ(f32ToF16(-INFINITY), 0xFC00);
  // Ties to even on the normal path: 1 + 2^-11 is halfway between 1 and 1+2^-10.
  EXPECT_EQ(f32ToF16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  EXPECT_EQ(f32ToF16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  // Subnormals (unit 2^-24).
  EXPECT_EQ(f32ToF16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(f32ToF16(std::ldexp(1.0f, -25)), 0x0000);         // tie -> even (0)
  EXPECT_EQ(f32ToF16(std::ldexp(3.0f, -25)), 0x0002);         // 1.5 units, tie -> 2
  EXPECT_EQ(f32ToF16(std::ldexp(1.5f, -25)), 0x0001);         // 0.75 units
  EXPECT_EQ(f32ToF16(std::ldexp(1.0f, -14)), 0x0400);         // smallest normal
  EXPECT_EQ(f32ToF16(std::ldexp(1023.5f, -24)), 0x0400);      // rounds up into normal
  EXPECT_EQ(f32ToF16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_TRUE(std::isnan(f16ToF32(f32ToF16(bitsToFloat(0x7F800001)))));

  EXPECT_EQ(f16ToF32(0x3C00), 1.0f);
  EXPECT_EQ(f16ToF32(0x0001), 5.960464477539063e-08f);
  EXPECT_EQ(f16ToF32(0x03FF), 6.097555160522461e-05f);
  EXPECT_EQ(f16ToF32(0x0400), 6.103515625e-05f);
  EXPECT_EQ(f16ToF32(0x7BFF), 65504.0f);
  EXPECT_EQ(f16ToF32(0x7C00), INFINITY);
  EXPECT_EQ(f16ToF32(0x8001), -5.960464477539063e-08f);
  EXPECT_TRUE(std::isnan(f16ToF32(0x7E00)));
}

// Every non-NaN 16-bit pattern must survive widening and narrowing unchanged.
TEST(HalfFormats, ExhaustiveRoundTrip) {
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    uint16_t bits = uint16_t(b);
    float h = f16ToF32(bits);
    if (!std::isnan(h)) {
      ASSERT_EQ(f32ToF16(h), bits) << std::hex << b;
    }
    float bf = bf16ToF32(bits);
    if (!std::isnan(bf)) {
      ASSERT_EQ(f32ToBf16(bf), bits) << std::hex << b;
    }
  }
}

//===----------------------------------------------------------------------===//
// Tensor conversions
//===----------------------------------------------------------------------===//

TEST(Tensor, ToF32FromEveryDType) {
  std::vector<float> expect{1.0f, -2.0f, 0.5f, 3.0f};
  Shape shape{2, 2};
  for (const Tensor &t :
       {makeTensor<float>(DType::F32, shape, {1.0f, -2.0f, 0.5f, 3.0f}),
        makeTensor<uint16_t>(DType::F16, shape, {0x3C00, 0xC000, 0x3800, 0x4200}),
        makeTensor<uint16_t>(DType::BF16, shape, {0x3F80, 0xC000, 0x3F00, 0x4040}),
        makeTensor<int64_t>(DType::I64, shape, {1, -2, 0, 3}),
        makeTensor<int32_t>(DType::I32, shape, {1, -2, 0, 3})}) {
    Tensor f = t.toF32();
    EXPECT_EQ(f.dtype(), DType::F32);
    EXPECT_EQ(f.shape(), shape);
    std::vector<float> want = expect;
    if (t.dtype() == DType::I64 || t.dtype() == DType::I32)
      want[2] = 0.0f;
    EXPECT_EQ(elements<float>(f), want) << dtypeName(t.dtype());
  }
}

TEST(Tensor, ToNarrowFloatsRoundsToNearestEven) {
  Tensor t = makeTensor<float>(DType::F32, {3},
                               {1.0f, bitsToFloat(0x3F808000), std::ldexp(1.0f, -24)});
  EXPECT_EQ(elements<uint16_t>(t.to(DType::BF16)),
            (std::vector<uint16_t>{0x3F80, 0x3F80, f32ToBf16(std::ldexp(1.0f, -24))}));
  // 1 + 2^-8 is a BF16 tie but exactly representable in F16.
  EXPECT_EQ(elements<uint16_t>(t.to(DType::F16)),
            (std::vector<uint16_t>{0x3C00, 0x3C04, 0x0001}));
  // BF16 -> F16 goes through F32 exactly.
  EXPECT_EQ(elements<uint16_t>(t.to(DType::BF16).to(DType::F16))[0], 0x3C00);
}

TEST(Tensor, SameDTypeConversionCopies) {
  Tensor t = makeTensor<float>(DType::F32, {2}, {1.5f, 2.5f});
  Tensor c = t.to(DType::F32);
  EXPECT_NE(c.rawData(), t.rawData());
  c.mutableData<float>()[0] = 9.0f;
  EXPECT_EQ(t.data<float>()[0], 1.5f);
  Tensor i = makeTensor<int64_t>(DType::I64, {2}, {7, 8}).to(DType::I64);
  EXPECT_EQ(elements<int64_t>(i), (std::vector<int64_t>{7, 8}));
}

TEST(Tensor, IntegerConversions) {
  Tensor i64 = makeTensor<int64_t>(DType::I64, {3}, {0, -5, 2147483647});
  Tensor i32 = i64.to(DType::I32);
  EXPECT_EQ(elements<int32_t>(i32), (std::vector<int32_t>{0, -5, 2147483647}));
  EXPECT_EQ(elements<int64_t>(i32.to(DType::I64)), elements<int64_t>(i64));

  Tensor big = makeTensor<int64_t>(DType::I64, {1}, {int64_t(1) << 40});
  expectError([&] { big.to(DType::I32); }, {"1099511627776", "I32"});
  EXPECT_THROW(Tensor(DType::F32, {1}).to(DType::I32), Error);
}

TEST(Tensor, ConvertsEmptyAndScalarTensors) {
  EXPECT_EQ(Tensor(DType::BF16, {0, 3}).toF32().shape(), (Shape{0, 3}));
  Tensor s = makeTensor<float>(DType::F32, {}, {2.0f}).to(DType::F16);
  EXPECT_EQ(s.rank(), 0u);
  EXPECT_EQ(s.data<uint16_t>()[0], 0x4000);
}

namespace {

TEST(Tensor, UniqueOwnershipAllowsInPlaceWritesButViewsNever) {
  kiln::Tensor t(kiln::DType::F32, {4});
  EXPECT_TRUE(t.isUniquelyOwned());
  {
    kiln::Tensor alias = t.reshaped({2, 2});
    EXPECT_FALSE(t.isUniquelyOwned()) << "a reshape shares the buffer";
    EXPECT_FALSE(alias.isUniquelyOwned());
  }
  EXPECT_TRUE(t.isUniquelyOwned());
  // A view over memory Kiln did not allocate (e.g. a mapped file) is never
  // writable, even as the only reference.
  auto bytes = std::make_shared<std::vector<float>>(4, 1.0f);
  kiln::Tensor view(kiln::DType::F32, {4}, bytes, bytes->data());
  bytes.reset();
  EXPECT_FALSE(view.isUniquelyOwned());
}

} // namespace
