//===- IrTest.cpp - The dialect stands alone; targets attach to it --------===//
//
// The kiln dialect carries no kernels: the CPU backend attaches one to every
// op. The memory plan and the executor share one liveness analysis and
// reject bodiless functions with a clear error.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"
#include "kiln/Backend/CPU/CpuKernelInterface.h"
#include "kiln/Backend/CPU/Executor.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/Planner/MemoryPlan.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::test;

namespace {

std::vector<mlir::RegisteredOperationName> kilnOps(mlir::MLIRContext &context) {
  std::vector<mlir::RegisteredOperationName> ops;
  for (mlir::RegisteredOperationName name : context.getRegisteredOperations())
    if (name.getDialectNamespace() == "kiln")
      ops.push_back(name);
  return ops;
}

TEST(IrTest, TheDialectAloneHasNoCpuKernels) {
  mlir::MLIRContext context;
  context.loadDialect<KilnDialect>();
  ASSERT_GT(kilnOps(context).size(), 20u);
  for (mlir::RegisteredOperationName name : kilnOps(context))
    EXPECT_FALSE(name.hasInterface<CpuKernelOpInterface>()) << name.getStringRef().str();
}

TEST(IrTest, TheCpuBackendAttachesAKernelToEveryOp) {
  mlir::MLIRContext context;
  registerCpuKernels(context);
  context.loadDialect<KilnDialect>();
  for (mlir::RegisteredOperationName name : kilnOps(context))
    EXPECT_TRUE(name.hasInterface<CpuKernelOpInterface>()) << name.getStringRef().str();
}

mlir::OwningOpRef<mlir::ModuleOp> parse(mlir::MLIRContext &context, const char *ir) {
  context.loadDialect<KilnDialect, mlir::func::FuncDialect>();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(ir, &context);
  EXPECT_TRUE(module);
  return module;
}

TEST(IrTest, DeclarationsAreRejectedNotRun) {
  mlir::MLIRContext context;
  auto module = parse(context, "func.func private @step(tensor<4xf32>) -> tensor<4xf32>");
  auto fn = module->lookupSymbol<mlir::func::FuncOp>("step");
  expectError([&] { runFunction(fn, {Tensor(DType::F32, {4})}); }, {"@step", "declaration"});
  expectError([&] { planMemory(fn); }, {"@step", "declaration"});
}

TEST(IrTest, GradientBytesAreTheGradientsNotTheParameters) {
  // Two parameters, only one updated (the other frozen): one gradient.
  mlir::MLIRContext context;
  auto module = parse(context, R"mlir(
    func.func @train_step(%w: tensor<64xf32> {kiln.param = "w"},
                          %frozen: tensor<1024xf32> {kiln.param = "frozen"},
                          %step: tensor<i64> {kiln.state = "step"},
                          %m: tensor<64xf32> {kiln.state = "exp_avg.w"},
                          %v: tensor<64xf32> {kiln.state = "exp_avg_sq.w"},
                          %g: tensor<64xf32> {kiln.input = "g"})
        -> (tensor<64xf32> {kiln.param = "w"}, tensor<1024xf32> {kiln.param = "frozen"}) {
      %lr = kiln.constant {fqn = "lr", value = dense<1.0e-3> : tensor<f32>} : tensor<f32>
      %one = kiln.constant {fqn = "one", value = dense<1.0> : tensor<f32>} : tensor<f32>
      %p, %m2, %v2 = kiln.adamw %w, %g, %m, %v, %step, %lr, %one {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-8 : f64, weight_decay = 0.1 : f64, fqn = "w"} : (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<i64>, tensor<f32>, tensor<f32>) -> (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>)
      return %p, %frozen : tensor<64xf32>, tensor<1024xf32>
    })mlir");
  auto fn = module->lookupSymbol<mlir::func::FuncOp>("train_step");
  MemoryPlan plan = planMemory(fn);
  EXPECT_EQ(plan.parameterBytes, (64 + 1024) * 4);
  EXPECT_EQ(plan.gradientBytes, 64 * 4);

  // The executor follows the same events: AdamW updates w in place, so the
  // measured peak is the plan's.
  std::vector<Tensor> args{Tensor(DType::F32, {64}), Tensor(DType::F32, {1024}),
                           Tensor(DType::I64, {}), Tensor(DType::F32, {64}),
                           Tensor(DType::F32, {64}), Tensor(DType::F32, {64})};
  const void *w = args[0].rawData();
  ExecutionStats stats;
  std::vector<Tensor> results = runFunction(fn, std::move(args), &stats);
  EXPECT_EQ(results[0].rawData(), w);
  EXPECT_EQ(stats.peakLiveBytes, plan.peakBytes);
}

} // namespace
