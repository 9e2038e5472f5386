//===- CompiledStepTest.cpp - Compiled mode against the HLO evaluator -----===//
//
// An hlo step compiled for the CPU (compileHloStep: hlo -> linalg -> LLVM ->
// JIT) against the reference evaluator (double precision) on random inputs,
// and the runner's errors: a kernel's exception crosses the compiled code as
// an error naming the call, arguments of the wrong shape are refused.
//
//===----------------------------------------------------------------------===//

#include "kiln/Backend/Neuron/HloEvaluator.h"
#include "kiln/Backend/Neuron/HloExport.h"
#include "kiln/CustomKernels/Registry.h"
#include "kiln/Dialect/Hlo/IR/HloOps.h"
#include "kiln/Driver/CompiledStep.h"
#include "kiln/Support/Error.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <unistd.h>

using namespace kiln;

namespace {

/// Softmax attention scores of `q` against `k`, a row gathered by id and
/// scattered back, a dynamic slice at a clamped start, a pad, a concatenate,
/// a masked select on iota, a reduction: most op families in one step.
constexpr const char *kStep = R"(
func.func @train_step(%q: tensor<4x8xf32>, %k: tensor<6x8xf32>, %ids: tensor<3xi32>,
                      %start: tensor<i32>) -> (tensor<4x6xf32>, tensor<6x8xf32>, tensor<2x8xf32>,
                                               tensor<f32>) {
  %s = hlo.dot_general %q, %k {lhs_batching_dimensions = array<i64>, rhs_batching_dimensions = array<i64>, lhs_contracting_dimensions = array<i64: 1>, rhs_contracting_dimensions = array<i64: 1>} : (tensor<4x8xf32>, tensor<6x8xf32>) -> tensor<4x6xf32>
  %ninf = hlo.constant {value = dense<0xFF800000> : tensor<f32>} : tensor<f32>
  %zero = hlo.constant {value = dense<0.0> : tensor<f32>} : tensor<f32>
  %max = hlo.reduce %s, %ninf {dimensions = array<i64: 1>, combiner = #hlo<combiner max>} : (tensor<4x6xf32>, tensor<f32>) -> tensor<4xf32>
  %maxb = hlo.broadcast_in_dim %max {broadcast_dimensions = array<i64: 0>} : (tensor<4xf32>) -> tensor<4x6xf32>
  %sub = hlo.subtract %s, %maxb : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %e = hlo.exp %sub : (tensor<4x6xf32>) -> tensor<4x6xf32>
  %sum = hlo.reduce %e, %zero {dimensions = array<i64: 1>, combiner = #hlo<combiner add>} : (tensor<4x6xf32>, tensor<f32>) -> tensor<4xf32>
  %sumb = hlo.broadcast_in_dim %sum {broadcast_dimensions = array<i64: 0>} : (tensor<4xf32>) -> tensor<4x6xf32>
  %p = hlo.divide %e, %sumb : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %row = hlo.iota {iota_dimension = 0 : i64} : tensor<4x6xi32>
  %col = hlo.iota {iota_dimension = 1 : i64} : tensor<4x6xi32>
  %causal = hlo.compare %col, %row {comparison_direction = #hlo<comparison_direction LE>} : (tensor<4x6xi32>, tensor<4x6xi32>) -> tensor<4x6xi1>
  %zeros = hlo.broadcast_in_dim %zero {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<4x6xf32>
  %masked = hlo.select %causal, %p, %zeros : (tensor<4x6xi1>, tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %g = hlo.gather %k, %ids {offset_dims = array<i64: 1>, collapsed_slice_dims = array<i64: 0>, start_index_map = array<i64: 0>, index_vector_dim = 1 : i64, slice_sizes = array<i64: 1, 8>} : (tensor<6x8xf32>, tensor<3xi32>) -> tensor<3x8xf32>
  %sq = hlo.multiply %g, %g : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
  %kz = hlo.broadcast_in_dim %zero {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<6x8xf32>
  %sc = hlo.scatter %kz, %ids, %sq {update_window_dims = array<i64: 1>, inserted_window_dims = array<i64: 0>, scatter_dims_to_operand_dims = array<i64: 0>, index_vector_dim = 1 : i64, combiner = #hlo<combiner add>} : (tensor<6x8xf32>, tensor<3xi32>, tensor<3x8xf32>) -> tensor<6x8xf32>
  %c0 = hlo.constant {value = dense<0> : tensor<i32>} : tensor<i32>
  %ds = hlo.dynamic_slice %q, %start, %c0 {slice_sizes = array<i64: 1, 8>} : (tensor<4x8xf32>, tensor<i32>, tensor<i32>) -> tensor<1x8xf32>
  %pad = hlo.pad %ds, %zero {edge_padding_low = array<i64: 0, 1>, edge_padding_high = array<i64: 0, -1>, interior_padding = array<i64: 0, 0>} : (tensor<1x8xf32>, tensor<f32>) -> tensor<1x8xf32>
  %cat = hlo.concatenate %ds, %pad {dimension = 0 : i64} : (tensor<1x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  %t = hlo.transpose %masked {permutation = array<i64: 1, 0>} : (tensor<4x6xf32>) -> tensor<6x4xf32>
  %r = hlo.rsqrt %sum : (tensor<4xf32>) -> tensor<4xf32>
  %total = hlo.reduce %t, %zero {dimensions = array<i64: 0, 1>, combiner = #hlo<combiner add>} : (tensor<6x4xf32>, tensor<f32>) -> tensor<f32>
  %rs = hlo.reduce %r, %total {dimensions = array<i64: 0>, combiner = #hlo<combiner add>} : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
  return %masked, %sc, %cat, %rs : tensor<4x6xf32>, tensor<6x8xf32>, tensor<2x8xf32>, tensor<f32>
}
)";

mlir::OwningOpRef<mlir::ModuleOp> parse(mlir::MLIRContext &context, const char *text) {
  context.loadDialect<hlo::HloDialect, mlir::func::FuncDialect>();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(text, &context);
  EXPECT_TRUE(module);
  return module;
}

Tensor randomTensor(Shape shape, std::mt19937 &rng) {
  Tensor t(DType::F32, std::move(shape));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.mutableData<float>()[i] = normal(rng);
  return t;
}

Tensor intTensor(Shape shape, std::vector<int32_t> values) {
  Tensor t(DType::I32, std::move(shape));
  std::copy(values.begin(), values.end(), t.mutableData<int32_t>());
  return t;
}

neuron::HloArray arrayOf(const Tensor &t) {
  neuron::HloArray a;
  a.dims = t.shape();
  a.type = t.dtype() == DType::I32 ? xla::S32 : xla::F32;
  for (int64_t i = 0; i < t.numel(); ++i)
    a.values.push_back(t.dtype() == DType::I32 ? double(t.data<int32_t>()[i])
                                               : double(t.data<float>()[i]));
  return a;
}


/// Compiles the @train_step of `text`, runs it on `args` and compares every
/// result with the evaluator's: relative 1e-5 (above 1; absolute below)
/// against its double arithmetic, far above float32 rounding over sums of
/// at most a few hundred terms. Returns the compiled results.
std::vector<Tensor> expectAgreesWithEvaluator(const char *text, const std::vector<Tensor> &args) {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module = parse(context, text);
  mlir::FailureOr<xla::HloModuleProto> proto = neuron::exportHloModule(*module, "train_step");
  EXPECT_TRUE(mlir::succeeded(proto));
  CompiledStep step = compileHloStep(*module, "the test step");
  std::vector<Tensor> compiled = step(args);
  std::vector<neuron::HloArray> in;
  for (const Tensor &t : args)
    in.push_back(arrayOf(t));
  std::vector<neuron::HloArray> reference = neuron::evaluateHlo(*proto, {in})[0];
  EXPECT_EQ(compiled.size(), reference.size());
  for (size_t r = 0; r < std::min(compiled.size(), reference.size()); ++r) {
    EXPECT_EQ(compiled[r].shape(), reference[r].dims) << "result " << r;
    if (compiled[r].shape() != reference[r].dims)
      continue;
    for (int64_t i = 0; i < compiled[r].numel(); ++i) {
      double want = reference[r].values[i], got = compiled[r].data<float>()[i];
      EXPECT_NEAR(got, want, 1e-5 * std::max(1.0, std::fabs(want)))
          << "result " << r << " element " << i;
    }
  }
  return compiled;
}

} // namespace

// Start index 7 is clamped to 3; id 5 of 6 is gathered twice (the ids in
// the embedding form, the one the evaluator takes).
TEST(CompiledStepTest, AgreesWithTheEvaluatorOnEveryOpFamily) {
  std::mt19937 rng(7);
  std::vector<Tensor> args{randomTensor({4, 8}, rng), randomTensor({6, 8}, rng),
                           intTensor({3}, {5, 0, 5}), intTensor({}, {7})};
  std::vector<Tensor> compiled = expectAgreesWithEvaluator(kStep, args);
  ASSERT_EQ(compiled.size(), 4u);
  // The clamped dynamic slice is q's last row, then that row shifted right.
  EXPECT_EQ(compiled[2].data<float>()[0], args[0].data<float>()[24]);
  EXPECT_EQ(compiled[2].data<float>()[9], args[0].data<float>()[24]);
}

// The step's temporaries: the first run traced through the system, later
// runs in one planned arena (nothing from the system), the same results.
TEST(CompiledStepTest, LaterRunsTakeTheirBuffersFromThePlannedArena) {
  std::mt19937 rng(7);
  std::vector<Tensor> args{randomTensor({4, 8}, rng), randomTensor({6, 8}, rng),
                           intTensor({3}, {5, 0, 5}), intTensor({}, {7})};
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module = parse(context, kStep);
  CompiledStep step = compileHloStep(*module, "the test step");
  std::vector<Tensor> first = step(args);
  const StepArena &arena = step.function->arena();
  int64_t traced = arena.lastRun().systemAllocations;
  EXPECT_GT(traced, 0);
  EXPECT_GT(arena.arenaBytes(), 0);
  EXPECT_LE(arena.arenaBytes(), arena.lastRun().systemBytes + 64 * traced);
  std::vector<Tensor> second = step(args);
  EXPECT_EQ(arena.lastRun().systemAllocations, 0);
  EXPECT_EQ(arena.lastRun().arenaAllocations, traced);
  ASSERT_EQ(first.size(), second.size());
  for (size_t r = 0; r < first.size(); ++r)
    EXPECT_EQ(std::memcmp(first[r].rawData(), second[r].rawData(), first[r].nbytes()), 0)
        << "result " << r;
}

// Ahead of time (kiln compile --target cpu): the object code of a compiled
// step, linked into a step of its own with no module lowered or compiled,
// gives the same results bit for bit; an object file that is not one is an
// error naming the file.
TEST(CompiledStepTest, TheObjectCodeLinkedRunsAsCompiled) {
  std::mt19937 rng(7);
  std::vector<Tensor> args{randomTensor({4, 8}, rng), randomTensor({6, 8}, rng),
                           intTensor({3}, {5, 0, 5}), intTensor({}, {7})};
  std::string dir = ::testing::TempDir() + "/kiln-object-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::string object = dir + "/train_step.o";
  std::vector<Tensor> compiled;
  std::vector<int64_t> outParamBuffers;
  std::vector<std::string> loops;
  {
    mlir::MLIRContext context;
    mlir::OwningOpRef<mlir::ModuleOp> module = parse(context, kStep);
    std::unique_ptr<CompiledFunction> code = compileHloStepCode(*module, "the test step");
    code->writeObject(object);
    outParamBuffers = code->outParamBuffers();
    loops = code->threadedLoopNestNames();
    CompiledStep step = compileHloStep(*parse(context, kStep), "the test step");
    compiled = step(args);
  }
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module = parse(context, kStep);
  CompiledStep linked =
      linkCompiledStep(*module, object, outParamBuffers, loops, "the test step");
  std::vector<Tensor> results = linked(args);
  ASSERT_EQ(results.size(), compiled.size());
  for (size_t r = 0; r < results.size(); ++r) {
    ASSERT_EQ(results[r].shape(), compiled[r].shape()) << "result " << r;
    EXPECT_EQ(std::memcmp(results[r].rawData(), compiled[r].rawData(), results[r].nbytes()), 0)
        << "result " << r;
  }

  std::string garbage = dir + "/garbage.o";
  { std::ofstream(garbage) << "not an object file"; }
  try {
    linkCompiledStep(*module, garbage, outParamBuffers, loops, "the test step");
    ADD_FAILURE() << "a file that is not an object linked";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("the object file '" + garbage + "'"), std::string::npos)
        << e.what();
  }
  try {
    linkCompiledStep(*module, dir + "/missing.o", outParamBuffers, loops, "the test step");
    ADD_FAILURE() << "a missing object file linked";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("cannot read the object file"), std::string::npos)
        << e.what();
  }
  std::filesystem::remove_all(dir);
}

// Each form the host's sgemm takes (kiln_sgemm): B transposed, as stored, A
// transposed with two contracting dimensions (a weight gradient), a leading
// batch; and attention's form, which stays a loop nest.
TEST(CompiledStepTest, SgemmFormsAgreeWithTheEvaluator) {
  const char *text = R"(
func.func @train_step(%x: tensor<2x3x4xf32>, %w: tensor<5x4xf32>, %v: tensor<4x5xf32>,
                      %dy: tensor<2x3x5xf32>, %k: tensor<2x4x6xf32>, %kt: tensor<3x2x4xf32>)
    -> (tensor<2x3x5xf32>, tensor<2x3x5xf32>, tensor<4x5xf32>, tensor<2x3x6xf32>, tensor<2x3x3xf32>) {
  %y = hlo.dot_general %x, %w {lhs_batching_dimensions = array<i64>, rhs_batching_dimensions = array<i64>, lhs_contracting_dimensions = array<i64: 2>, rhs_contracting_dimensions = array<i64: 1>} : (tensor<2x3x4xf32>, tensor<5x4xf32>) -> tensor<2x3x5xf32>
  %z = hlo.dot_general %x, %v {lhs_batching_dimensions = array<i64>, rhs_batching_dimensions = array<i64>, lhs_contracting_dimensions = array<i64: 2>, rhs_contracting_dimensions = array<i64: 0>} : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  %dw = hlo.dot_general %x, %dy {lhs_batching_dimensions = array<i64>, rhs_batching_dimensions = array<i64>, lhs_contracting_dimensions = array<i64: 0, 1>, rhs_contracting_dimensions = array<i64: 0, 1>} : (tensor<2x3x4xf32>, tensor<2x3x5xf32>) -> tensor<4x5xf32>
  %b = hlo.dot_general %x, %k {lhs_batching_dimensions = array<i64: 0>, rhs_batching_dimensions = array<i64: 0>, lhs_contracting_dimensions = array<i64: 2>, rhs_contracting_dimensions = array<i64: 1>} : (tensor<2x3x4xf32>, tensor<2x4x6xf32>) -> tensor<2x3x6xf32>
  %a = hlo.dot_general %x, %kt {lhs_batching_dimensions = array<i64: 0>, rhs_batching_dimensions = array<i64: 1>, lhs_contracting_dimensions = array<i64: 2>, rhs_contracting_dimensions = array<i64: 2>} : (tensor<2x3x4xf32>, tensor<3x2x4xf32>) -> tensor<2x3x3xf32>
  return %y, %z, %dw, %b, %a : tensor<2x3x5xf32>, tensor<2x3x5xf32>, tensor<4x5xf32>, tensor<2x3x6xf32>, tensor<2x3x3xf32>
}
)";
  std::mt19937 rng(11);
  expectAgreesWithEvaluator(text, {randomTensor({2, 3, 4}, rng), randomTensor({5, 4}, rng),
                                   randomTensor({4, 5}, rng), randomTensor({2, 3, 5}, rng),
                                   randomTensor({2, 4, 6}, rng), randomTensor({3, 2, 4}, rng)});
}

// chunked_cross_entropy refuses a label outside the vocabulary by throwing;
// the throw cannot unwind through compiled frames, so the host function
// records it and the step rethrows it naming the call (its kiln fqn). The
// step runs again afterwards.
TEST(CompiledStepTest, AKernelErrorNamesTheCallAndTheStepRunsAgain) {
  registerCustomKernels();
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module = parse(context, R"(
func.func @train_step(%h: tensor<2x4x8xf32>, %w: tensor<16x8xf32>, %labels: tensor<2x4xi64>)
    -> (tensor<f32>, tensor<2x4x8xf32>, tensor<16x8xf32>) {
  %0:3 = hlo.custom_call %h, %w, %labels {call_target_name = "KilnCpuKernel", backend_config = "{\22kiln_kernel\22: \22chunked_cross_entropy\22, \22kiln_direction\22: \22forward\22, \22kiln_options\22: \22{total_positions = 8 : i64}\22}"} : (tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<2x4xi64>) -> (tensor<f32>, tensor<2x4x8xf32>, tensor<16x8xf32>) loc("loss")
  return %0#0, %0#1, %0#2 : tensor<f32>, tensor<2x4x8xf32>, tensor<16x8xf32>
}
)");
  CompiledStep step = compileHloStep(*module, "the test step");
  ASSERT_EQ(step.kernelCalls.size(), 1u);
  EXPECT_EQ(step.kernelCalls[0].call.instruction, "loss");

  std::mt19937 rng(3);
  Tensor labels(DType::I64, {2, 4});
  for (int64_t i = 0; i < 8; ++i)
    labels.mutableData<int64_t>()[i] = i;
  labels.mutableData<int64_t>()[5] = 99;
  std::vector<Tensor> args{randomTensor({2, 4, 8}, rng), randomTensor({16, 8}, rng), labels};
  try {
    step(args);
    FAIL() << "a label outside the vocabulary was accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("compiled mode: loss: label 99 at position 5"),
              std::string::npos)
        << e.what();
  }
  labels.mutableData<int64_t>()[5] = 5;
  args[2] = labels;
  std::vector<Tensor> results = step(args);
  EXPECT_TRUE(std::isfinite(*results[0].data<float>()));
  EXPECT_GT(*results[0].data<float>(), 0.0f);
}

// A step with collectives runs on the grid of its ranks: compiled alone (no
// grid, as check-hlo would) it is refused, naming the op and its ranks.
TEST(CompiledStepTest, ACollectiveWithoutItsRanksIsRefused) {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module = parse(context, R"(
func.func @train_step(%x: tensor<2x8xf32>) -> tensor<4x8xf32> {
  %y = hlo.all_gather %x {all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2x8xf32>) -> tensor<4x8xf32> loc("regather")
  return %y : tensor<4x8xf32>
}
)");
  try {
    compileHloStep(*module, "the test step");
    FAIL() << "a collective compiled without its grid";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("compiled mode: 'hlo.all_gather' (from regather) is a "
                                         "collective among ranks {0,1}"),
              std::string::npos)
        << e.what();
  }
}

TEST(CompiledStepTest, ArgumentsOfAnotherShapeAreRefused) {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module = parse(context, kStep);
  CompiledStep step = compileHloStep(*module, "the test step");
  std::mt19937 rng(1);
  std::vector<Tensor> args{randomTensor({8, 4}, rng), randomTensor({6, 8}, rng),
                           intTensor({3}, {0, 1, 2}), intTensor({}, {0})};
  try {
    step(args);
    FAIL() << "a transposed argument was accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("argument 0 of @train_step must be F32"),
              std::string::npos)
        << e.what();
  }
  args.pop_back();
  EXPECT_THROW(step(args), Error);
}

// The state a step updates goes into the old state's buffer when the
// caller donates it: w's update reads w where it writes it, so a uniquely
// held w is the result, updated in place; m is read after its update, so it
// gets a buffer of its own and stays the caller's. A w held elsewhere too
// is not taken. Both ways give the same values.
TEST(CompiledStepTest, DonatedStateIsUpdatedInItsOwnBuffer) {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module = parse(context, R"(
func.func @train_step(%w: tensor<4x8xf32> {kiln.param = "w"}, %m: tensor<4x8xf32> {kiln.state = "exp_avg.w"},
                      %x: tensor<4x8xf32> {kiln.input = "x"})
    -> (tensor<4x8xf32> {kiln.param = "w"}, tensor<4x8xf32> {kiln.state = "exp_avg.w"}, tensor<4x8xf32> {kiln.output = "old_m"}) {
  %m2 = hlo.add %m, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %w2 = hlo.subtract %w, %m2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %mt = hlo.transpose %m {permutation = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %mc = hlo.transpose %mt {permutation = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
  return %w2, %m2, %mc : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
)");
  CompiledStep step = compileHloStep(*module, "the test step");
  std::mt19937 rng(5);
  std::vector<Tensor> args{randomTensor({4, 8}, rng), randomTensor({4, 8}, rng),
                           randomTensor({4, 8}, rng)};
  std::vector<Tensor> expected{Tensor(DType::F32, {4, 8}), Tensor(DType::F32, {4, 8}),
                               Tensor(DType::F32, {4, 8})};
  for (int64_t i = 0; i < 32; ++i) {
    float w = args[0].data<float>()[i], m = args[1].data<float>()[i], x = args[2].data<float>()[i];
    expected[0].mutableData<float>()[i] = w - (m + x);
    expected[1].mutableData<float>()[i] = m + x;
    expected[2].mutableData<float>()[i] = m;
  }
  auto expectValues = [&](const std::vector<Tensor> &results) {
    ASSERT_EQ(results.size(), 3u);
    for (size_t r = 0; r < 3; ++r)
      for (int64_t i = 0; i < 32; ++i)
        EXPECT_EQ(results[r].data<float>()[i], expected[r].data<float>()[i])
            << "result " << r << " element " << i;
  };
  // Is m read after its update? Only m's transposes (fused into a copy at the
  // end) say so: whichever way fusion goes, w alone is certain to be shared.
  ASSERT_EQ(step.function->outParamBuffers().size(), 3u);
  EXPECT_EQ(step.function->outParamBuffers()[0], 0);
  EXPECT_EQ(step.function->outParamBuffers()[2], -1);

  Tensor alsoHeld = args[0];
  std::vector<Tensor> shared = args;
  expectValues(step.donating(shared));
  EXPECT_TRUE(shared[0].defined()) << "a w held elsewhere was taken";
  alsoHeld = Tensor();
  shared.clear();

  const void *wBuffer = args[0].rawData();
  std::vector<Tensor> results = step.donating(args);
  expectValues(results);
  EXPECT_EQ(results[0].rawData(), wBuffer);
  EXPECT_FALSE(args[0].defined());
  EXPECT_TRUE(args[2].defined());
  // Reading (operator()) never takes a buffer.
  std::vector<Tensor> again{results[0], results[1], args[2]};
  std::vector<Tensor> read = step(again);
  EXPECT_NE(read[0].rawData(), results[0].rawData());
}

// Loop nests of 2^15 iterations and more run on the host's OpenMP threads
// (kiln_parallel_for, each thread a share of the outermost dimension):
// an elementwise chain, a row reduction (parallel rows, each summed on one
// thread) and a transpose over 256 x 256, against the evaluator.
TEST(CompiledStepTest, ThreadedLoopNestsAgreeWithTheEvaluator) {
  const char *text = R"(
func.func @train_step(%a: tensor<256x256xf32>, %b: tensor<256x256xf32>)
    -> (tensor<256x256xf32>, tensor<256xf32>) {
  %e = hlo.exp %a : (tensor<256x256xf32>) -> tensor<256x256xf32>
  %bt = hlo.transpose %b {permutation = array<i64: 1, 0>} : (tensor<256x256xf32>) -> tensor<256x256xf32>
  %m = hlo.multiply %e, %bt : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
  %zero = hlo.constant {value = dense<0.0> : tensor<f32>} : tensor<f32>
  %rows = hlo.reduce %m, %zero {dimensions = array<i64: 1>, combiner = #hlo<combiner add>} : (tensor<256x256xf32>, tensor<f32>) -> tensor<256xf32>
  return %m, %rows : tensor<256x256xf32>, tensor<256xf32>
}
)";
  std::mt19937 rng(13);
  expectAgreesWithEvaluator(text, {randomTensor({256, 256}, rng), randomTensor({256, 256}, rng)});
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module = parse(context, text);
  CompiledStep step = compileHloStep(*module, "the test step");
  EXPECT_GE(step.function->threadedLoopNests(), 2u);
}
