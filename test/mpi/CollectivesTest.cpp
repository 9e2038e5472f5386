//===- CollectivesTest.cpp - Collectives on 4 MPI ranks (2 x 2 grid) ------===//
//
// Run by ctest as `mpiexec -n 4 KilnMpiTests`: every rank runs every test and
// checks its own results against values computed here from the rank numbers;
// a failure on any rank fails the run.
//
//===----------------------------------------------------------------------===//

#include "kiln/Backend/CPU/DeviceGrid.h"
#include "kiln/Backend/CPU/Executor.h"
#include "kiln/Backend/Compiled/CompiledCollectives.h"
#include "kiln/Dialect/Hlo/IR/HloOps.h"
#include "kiln/Driver/RankAgreement.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Support/Error.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

using namespace kiln;

namespace {

DeviceGrid &grid() {
  static DeviceGrid g({"dp", "tp"}, {2, 2});
  return g;
}

/// A [rows, cols] f32 tensor with element (i, j) = f(i, j).
template <typename F> Tensor filled(int64_t rows, int64_t cols, F f) {
  Tensor t(DType::F32, {rows, cols});
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      t.mutableData<float>()[i * cols + j] = f(i, j);
  return t;
}

void expectEqual(const Tensor &got, const Tensor &want) {
  ASSERT_EQ(got.shape(), want.shape());
  for (int64_t i = 0; i < want.numel(); ++i)
    ASSERT_EQ(got.data<float>()[i], want.data<float>()[i]) << "element " << i;
}

TEST(DeviceGrid, RanksAreRowMajorWithTheLastAxisFastest) {
  ASSERT_EQ(MpiWorld::get().size(), 4) << "run with mpiexec -n 4";
  int r = grid().rank();
  EXPECT_EQ(grid().coordinates(), (std::vector<int64_t>{r / 2, r % 2}));
  EXPECT_EQ(grid().groupSize({0, 1}), 4);
  EXPECT_EQ(grid().groupIndex({1, 0}), (r % 2) * 2 + r / 2);
}

TEST(DeviceGrid, AllGatherConcatenatesInCoordinateOrder) {
  auto [dp, tp] = std::pair(grid().coordinates()[0], grid().coordinates()[1]);
  Tensor local = filled(2, 3, [&](int64_t i, int64_t j) { return 100 * dp + 10 * tp + 3 * i + j; });
  // Over tp along dim 1: blocks of the two tp ranks side by side.
  expectEqual(grid().allGather(local, {1}, 1), filled(2, 6, [&](int64_t i, int64_t j) {
                return 100 * dp + 10 * (j / 3) + 3 * i + j % 3;
              }));
  // Over both axes along dim 0: rank order dp-major.
  expectEqual(grid().allGather(local, {0, 1}, 0), filled(8, 3, [&](int64_t i, int64_t j) {
                int64_t member = i / 2;
                return 100 * (member / 2) + 10 * (member % 2) + 3 * (i % 2) + j;
              }));
}

TEST(DeviceGrid, ReduceScatterSumsAndKeepsThisRanksBlock) {
  auto [dp, tp] = std::pair(grid().coordinates()[0], grid().coordinates()[1]);
  Tensor full = filled(4, 4, [&](int64_t i, int64_t j) { return float(dp + 1) * (4 * i + j) + tp; });
  // Over dp along dim 1: sum over dp of (dp + 1) * x + tp = 3x + 2tp; dp's columns.
  Tensor got = grid().reduceScatter(full, {0}, 1, Reduction::Sum);
  expectEqual(got, filled(4, 2, [&](int64_t i, int64_t j) {
                return 3.0f * (4 * i + 2 * dp + j) + 2 * tp;
              }));
  Tensor avg = grid().reduceScatter(full, {0}, 0, Reduction::Average);
  expectEqual(avg, filled(2, 4, [&](int64_t i, int64_t j) {
                return (3.0f * (4 * (2 * dp + i) + j) + 2 * tp) / 2;
              }));
}

TEST(DeviceGrid, AllToAllTradesASplitDimensionForAConcatenatedOne) {
  auto [dp, tp] = std::pair(grid().coordinates()[0], grid().coordinates()[1]);
  // Over tp: each rank splits its [4, 2] along dim 0, sends rows 2q..2q+1 to
  // member q and concatenates what it receives along dim 1 in member order.
  Tensor local = filled(4, 2, [&](int64_t i, int64_t j) { return 100 * dp + 10 * tp + 2 * i + j; });
  expectEqual(grid().allToAll(local, {1}, 0, 1), filled(2, 4, [&](int64_t i, int64_t j) {
                int64_t member = j / 2;
                return 100 * dp + 10 * member + 2 * (2 * tp + i) + j % 2;
              }));
  // And back: the same tensor.
  expectEqual(grid().allToAll(grid().allToAll(local, {1}, 0, 1), {1}, 1, 0), local);
}

TEST(DeviceGrid, AllReduceAndSlice) {
  int r = grid().rank();
  Tensor t = filled(1, 2, [&](int64_t, int64_t j) { return float(r * 10 + j); });
  expectEqual(grid().allReduce(t, {0, 1}, Reduction::Sum),
              filled(1, 2, [&](int64_t, int64_t j) { return float(60 + 4 * j); }));
  expectEqual(grid().allReduce(t, {1}, Reduction::Max), filled(1, 2, [&](int64_t, int64_t j) {
                return float((r / 2 * 2 + 1) * 10 + j);
              }));
  Tensor full = filled(2, 4, [](int64_t i, int64_t j) { return float(4 * i + j); });
  expectEqual(grid().slice(full, {1}, 1), filled(2, 2, [&](int64_t i, int64_t j) {
                return float(4 * i + 2 * (r % 2) + j);
              }));
  EXPECT_GT(grid().bytesSent().at("dp+tp"), 0);
}

// bf16 (compiled mode gathers bf16 parameters): gathered as its bits,
// reduced in f32 and rounded once. Values exact in bf16, so the result is
// known exactly.
TEST(DeviceGrid, Bf16GathersAsBitsAndReducesInFloat32) {
  auto [dp, tp] = std::pair(grid().coordinates()[0], grid().coordinates()[1]);
  Tensor local = filled(2, 2, [&](int64_t i, int64_t j) { return 8 * dp + 4 * tp + 2 * i + j; })
                     .to(DType::BF16);
  Tensor gathered = grid().allGather(local, {1}, 0);
  ASSERT_EQ(gathered.dtype(), DType::BF16);
  expectEqual(gathered.toF32(), filled(4, 2, [&](int64_t i, int64_t j) {
                return 8 * dp + 4 * (i / 2) + 2 * (i % 2) + j;
              }));
  // 256 + 1 + 1 + 1 = 259 in f32, rounded once to bf16 (steps of 2 above
  // 256, a tie to even): 260. Summed in bf16 one by one, each 256 + 1 would
  // round back to 256.
  Tensor ones = filled(1, 2, [&](int64_t, int64_t) { return dp == 0 && tp == 0 ? 256.0f : 1.0f; })
                    .to(DType::BF16);
  Tensor sum = grid().allReduce(ones, {0, 1}, Reduction::Sum);
  ASSERT_EQ(sum.dtype(), DType::BF16);
  expectEqual(sum.toF32(), filled(1, 2, [](int64_t, int64_t) { return 260.0f; }));
  Tensor scattered = grid().reduceScatter(local, {0}, 0, Reduction::Sum);
  ASSERT_EQ(scattered.dtype(), DType::BF16);
  expectEqual(scattered.toF32(), filled(1, 2, [&](int64_t, int64_t j) {
                return 2 * (4 * tp + 2 * dp + j) + 8;
              }));
}

TEST(MpiWorld, AllGatherTextGathersEveryRanksTextOfItsOwnLength) {
  const MpiWorld &world = MpiWorld::get();
  ASSERT_EQ(world.size(), 4);
  // Rank r sends r copies of its letter: rank 0 sends nothing.
  std::vector<std::string> texts =
      world.allGatherText(std::string(size_t(world.rank()), char('a' + world.rank())));
  EXPECT_EQ(texts, (std::vector<std::string>{"", "b", "cc", "ddd"}));
}

TEST(MpiWorld, RanksThatDisagreeAllFailWithTheSameMessage) {
  const MpiWorld &world = MpiWorld::get();
  RunSettings same;
  same.add("training.steps", 10);
  EXPECT_NO_THROW(requireRanksAgree(same, "the run"));
  RunSettings mine = same;
  mine.add("optimizer.lr", world.rank() == 2 ? 0.5 : 0.25);
  try {
    requireRanksAgree(mine, "the run");
    FAIL() << "rank " << world.rank() << " went on";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(), "the ranks disagree on the run: 'optimizer.lr' is 0.25 on ranks 0, "
                           "1, 3 and 0.5 on rank 2; start every rank with the same run config, "
                           "command line, model and data");
  }
}

namespace {

/// bindCollectives on one hlo collective `op` (its text, operand %x of
/// tensor<4x4xf32>, result of `result`) against the 2 x 2 grid.
std::vector<CompiledCollective> bindOne(mlir::MLIRContext &context, const std::string &op,
                                        const std::string &result) {
  context.loadDialect<hlo::HloDialect, mlir::func::FuncDialect>();
  std::string text = "func.func @train_step(%x: tensor<4x4xf32>) -> " + result + " {\n  %y = " +
                     op + " : (tensor<4x4xf32>) -> " + result + " loc(\"layers.0\")\n  return %y : " +
                     result + "\n}";
  auto module = mlir::parseSourceString<mlir::ModuleOp>(text, &context);
  if (!module)
    throw std::runtime_error("does not parse: " + text);
  return bindCollectives(*module, &grid());
}

std::string bindError(const std::string &op, const std::string &result) {
  mlir::MLIRContext context;
  try {
    bindOne(context, op, result);
  } catch (const Error &e) {
    return e.what();
  }
  return "bound";
}

} // namespace

// Compiled mode binds a collective to the grid axes of its replica groups,
// and refuses, naming the op and its fqn, what the grid's collectives cannot
// run.
TEST(CompiledCollectives, BindToTheAxesOfTheirGroupsOrAreRefused) {
  {
    mlir::MLIRContext context;
    std::vector<CompiledCollective> tp = bindOne(
        context, "hlo.all_gather %x {all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>}",
        "tensor<8x4xf32>");
    ASSERT_EQ(tp.size(), 1u);
    EXPECT_EQ(tp[0].axes, (std::vector<int16_t>{1}));
    EXPECT_EQ(tp[0].where, "'hlo.all_gather' (from layers.0)");
  }
  EXPECT_NE(bindError("hlo.all_gather %x {all_gather_dim = 0 : i64, replica_groups = dense<[[0, 3], [1, 2]]> : tensor<2x2xi64>}",
                      "tensor<8x4xf32>")
                .find("'hlo.all_gather' (from layers.0) runs among ranks {0,3},{1,2}, which are "
                      "not the groups of any set of the grid's axes (dp 2 x tp 2)"),
            std::string::npos);
  EXPECT_NE(bindError("hlo.all_reduce %x {combiner = #hlo<combiner mul>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>}",
                      "tensor<4x4xf32>")
                .find("multiplies over its group"),
            std::string::npos);
  EXPECT_NE(bindError("hlo.all_gather %x {all_gather_dim = 0 : i64, channel_id = 1 : i64, replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>}",
                      "tensor<8x4xf32>")
                .find("has a channel_id"),
            std::string::npos);
}

TEST(DeviceGrid, PerRankProgramsRunShardCollectives) {
  mlir::MLIRContext context;
  context.loadDialect<KilnDialect, mlir::func::FuncDialect, mlir::shard::ShardDialect>();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(R"mlir(
    shard.grid @grid(shape = 2x2)
    func.func @step(%w: tensor<2x4xf32>, %x: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<2x4xf32>) {
      %full = shard.all_gather %w on @grid grid_axes = [1] gather_axis = 0 : tensor<2x4xf32> -> tensor<4x4xf32>
      %y = kiln.add %full, %x {fqn = "h"} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
      %part = shard.reduce_scatter %y on @grid grid_axes = [1] reduction = sum scatter_axis = 0 : tensor<4x4xf32> -> tensor<2x4xf32>
      return %full, %part : tensor<4x4xf32>, tensor<2x4xf32>
    })mlir",
                                                        &context);
  ASSERT_TRUE(module);
  auto fn = module->lookupSymbol<mlir::func::FuncOp>("step");
  int64_t tp = grid().coordinates()[1];
  Tensor w = filled(2, 4, [&](int64_t i, int64_t j) { return float(8 * tp + 4 * i + j); });
  Tensor x = filled(4, 4, [](int64_t, int64_t) { return 1.0f; });
  ExecutionContext ctx;
  ctx.grid = &grid();
  std::vector<Tensor> out = runFunction(fn, {w, x}, nullptr, ctx);
  Tensor full = filled(4, 4, [](int64_t i, int64_t j) { return float(4 * i + j); });
  expectEqual(out[0], full);
  // Both tp ranks add 1 to the same gathered weight: the sum doubles it.
  expectEqual(out[1], filled(2, 4, [&](int64_t i, int64_t j) {
                return 2.0f * (4 * (2 * tp + i) + j + 1);
              }));

  // A program for another grid is refused, naming both shapes.
  ExecutionContext none;
  try {
    runFunction(fn, {w, x}, nullptr, none);
    ADD_FAILURE() << "a collective ran without a grid";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("needs a device grid"), std::string::npos) << e.what();
  }
}

} // namespace
