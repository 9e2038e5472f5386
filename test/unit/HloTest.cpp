//===- HloTest.cpp - Replica groups, the HLO evaluator, the proto ---------===//

#include "HloTestUtil.h"
#include "kiln/Backend/Neuron/HloEvaluator.h"
#include "kiln/Backend/Neuron/HloExport.h"
#include "kiln/Backend/Neuron/HloStats.h"
#include "kiln/Backend/Neuron/NeuronConformance.h"
#include "kiln/Dialect/Hlo/IR/HloOps.h"
#include "kiln/Dialect/Hlo/IR/ReplicaGroups.h"
#include "kiln/Dialect/Kiln/IR/KilnDialect.h"
#include "kiln/Pipeline/KilnPipeline.h"
#include "kiln/Support/Error.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <set>

using namespace kiln;
using Groups = std::vector<std::vector<int64_t>>;

// The grid [dp_replicate, dp_shard, tp] = [2, 2, 2]: rank = 4 r + 2 s + t.
TEST(ReplicaGroupsTest, GroupsShareTheOtherCoordinates) {
  std::vector<int64_t> grid{2, 2, 2};
  EXPECT_EQ(hlo::gridReplicaGroups(grid, {2}), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(hlo::gridReplicaGroups(grid, {1}), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(hlo::gridReplicaGroups(grid, {0}), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  // Two axes: members ordered by their coordinates along them, in that order.
  EXPECT_EQ(hlo::gridReplicaGroups(grid, {0, 1}), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(hlo::gridReplicaGroups(grid, {1, 0}), (Groups{{0, 4, 2, 6}, {1, 5, 3, 7}}));
  EXPECT_EQ(hlo::gridGroupIndex(grid, {1, 2}, 7), 3);
  EXPECT_EQ(hlo::gridGroupIndex(grid, {2, 1}, 5), 2);
  EXPECT_EQ(hlo::gridCoordinates(grid, 6), (std::vector<int64_t>{1, 1, 0}));
}

// The inverse (compiled mode binds each collective to the grid axes of its
// groups): written out by hand, not by gridReplicaGroups, so both are tested.
TEST(ReplicaGroupsTest, AxesOfGroups) {
  using Axes = std::optional<std::vector<int16_t>>;
  std::vector<int64_t> grid{1, 2, 2}; // dp_replicate 1 x dp_shard 2 x tp 2
  EXPECT_EQ(hlo::gridAxesOf(grid, {0, 1, 2, 3}, 1), (Axes{{1, 2}}));
  // The same ids in two groups are tp's: the group count tells them apart.
  EXPECT_EQ(hlo::gridAxesOf(grid, {0, 1, 2, 3}, 2), (Axes{{2}}));
  EXPECT_EQ(hlo::gridAxesOf(grid, {0, 2, 1, 3}, 2), (Axes{{1}}));
  // Member order is the axes' order.
  EXPECT_EQ(hlo::gridAxesOf(grid, {0, 2, 1, 3}, 1), (Axes{{2, 1}}));
  // Not the groups of any axes: a step built for another layout.
  EXPECT_EQ(hlo::gridAxesOf(grid, {0, 3, 1, 2}, 2), std::nullopt);
  EXPECT_EQ(hlo::gridAxesOf(grid, {0, 1, 2, 3, 4, 5, 6, 7}, 1), std::nullopt);
  EXPECT_EQ(hlo::gridAxesOf({2, 2, 2}, {0, 4, 2, 6, 1, 5, 3, 7}, 2), (Axes{{1, 0}}));
  EXPECT_EQ(hlo::gridAxesOf({1, 1}, {0}, 1), (Axes{std::vector<int16_t>{}}));
}

namespace {
/// The hlo module `text` exported to a proto.
xla::HloModuleProto exported(mlir::MLIRContext &context, const char *text) {
  context.loadDialect<hlo::HloDialect, mlir::func::FuncDialect>();
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(text, &context);
  EXPECT_TRUE(module);
  mlir::FailureOr<xla::HloModuleProto> proto = neuron::exportHloModule(*module, "m");
  EXPECT_TRUE(mlir::succeeded(proto));
  return *proto;
}

neuron::HloArray array(std::vector<int64_t> dims, std::vector<double> values) {
  neuron::HloArray a;
  a.dims = std::move(dims);
  a.values = std::move(values);
  return a;
}
} // namespace

// Two ranks: each gathers both halves, reduce-scatters the sum back and
// takes its block of a table at replica-id. The evaluator follows XLA's
// every form (here the flattened ids); the Neuron conformance rules are
// checked apart (NeuronConformanceTest).
TEST(HloOpsTest, EveryOpNamesItsXlaOpcodeOnce) {
  // Every op of the dialect implements the opcode interface, no two share
  // an opcode, and the ones whose mnemonic differs from XLA's name carry
  // XLA's (xla/hlo/ir/hlo_opcode.h).
  mlir::MLIRContext context;
  context.loadDialect<hlo::HloDialect>();
  std::set<std::string> opcodes;
  size_t ops = 0;
  for (mlir::RegisteredOperationName name : context.getRegisteredOperations()) {
    if (name.getDialectNamespace() != "hlo")
      continue;
    ++ops;
    EXPECT_TRUE(name.hasInterface<hlo::OpcodeInterface>()) << name.getStringRef().str();
    if (auto *iface = name.getInterface<hlo::OpcodeInterface>())
      EXPECT_TRUE(opcodes.insert(iface->getOpcode().str()).second)
          << name.getStringRef().str() << ": " << iface->getOpcode().str();
  }
  EXPECT_EQ(opcodes.size(), ops);
  EXPECT_GE(ops, 39u);
  EXPECT_EQ(hlo::ExpOp::getOpcode(), "exponential");
  EXPECT_EQ(hlo::BroadcastInDimOp::getOpcode(), "broadcast");
  EXPECT_EQ(hlo::DotGeneralOp::getOpcode(), "dot");
  EXPECT_EQ(hlo::DynamicSliceOp::getOpcode(), "dynamic-slice");
  EXPECT_EQ(hlo::ReplicaIdOp::getOpcode(), "replica-id");
  EXPECT_EQ(hlo::AllToAllOp::getOpcode(), "all-to-all");
  EXPECT_EQ(hlo::CustomCallOp::getOpcode(), "custom-call");
  EXPECT_EQ(hlo::OptBarrierOp::getOpcode(), "opt-barrier");
}

TEST(HloEvaluatorTest, CollectivesCombineTheRanksOfEachGroup) {
  mlir::MLIRContext context;
  xla::HloModuleProto proto = exported(context, R"(
    func.func @main(%x: tensor<2xf32>) -> (tensor<4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<1xf32>) {
      %g = hlo.all_gather %x {all_gather_dim = 0 : i64, channel_id = 1 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, use_global_device_ids} : (tensor<2xf32>) -> tensor<4xf32>
      %s = hlo.reduce_scatter %g {channel_id = 2 : i64, combiner = #hlo<combiner add>, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, scatter_dimension = 0 : i64, use_global_device_ids} : (tensor<4xf32>) -> tensor<2xf32>
      %m = hlo.all_reduce %x {channel_id = 3 : i64, combiner = #hlo<combiner max>, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, use_global_device_ids} : (tensor<2xf32>) -> tensor<2xf32>
      %r = hlo.replica_id : tensor<ui32>
      %i = hlo.convert %r : (tensor<ui32>) -> tensor<i32>
      %d = hlo.dynamic_slice %x, %i {slice_sizes = array<i64: 1>} : (tensor<2xf32>, tensor<i32>) -> tensor<1xf32>
      return %g, %s, %m, %d : tensor<4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<1xf32>
    })");
  auto out = neuron::evaluateHlo(proto, {{array({2}, {1, 2})}, {array({2}, {10, 20})}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1][0].values, (std::vector<double>{1, 2, 10, 20}));
  EXPECT_EQ(out[0][1].values, (std::vector<double>{2, 4}));   // block 0 of twice the gather
  EXPECT_EQ(out[1][1].values, (std::vector<double>{20, 40})); // block 1
  EXPECT_EQ(out[0][2].values, (std::vector<double>{10, 20}));
  EXPECT_EQ(out[1][3].values, (std::vector<double>{20}));
  neuron::HloStats stats = neuron::HloStats::of(proto);
  EXPECT_EQ(stats.replicaGroupLists.size(), 1u);
  EXPECT_EQ(stats.collectives.at("all-gather {{0,1}}").bytesSent, 8); // half of 16 bytes
}

// The evaluator dispatches by opcode through one table: an opcode outside it
// (here a negate renamed in the proto) is refused by instruction and name.
TEST(HloEvaluatorTest, AnOpcodeOutsideTheTableIsRefusedByName) {
  mlir::MLIRContext context;
  xla::HloModuleProto proto = exported(context, R"(
    func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
      %n = hlo.negate %a : (tensor<2xf32>) -> tensor<2xf32>
      return %n : tensor<2xf32>
    })");
  EXPECT_EQ(neuron::evaluateHlo(proto, {{array({2}, {1, -2})}})[0][0].values,
            (std::vector<double>{-1, 2}));
  for (auto &comp : *proto.mutable_computations())
    for (auto &inst : *comp.mutable_instructions())
      if (inst.opcode() == "negate")
        inst.set_opcode("atan2");
  try {
    neuron::evaluateHlo(proto, {{array({2}, {1, -2})}});
    ADD_FAILURE() << "expected kiln::Error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("HLO evaluator: cannot evaluate"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("(opcode 'atan2')"), std::string::npos) << e.what();
  }
}

TEST(HloEvaluatorTest, OptBarrierIsTheIdentityOnItsTuple) {
  mlir::MLIRContext context;
  xla::HloModuleProto proto = exported(context, R"(
    func.func @main(%a: tensor<2xf32>, %i: tensor<3xi32>) -> (tensor<2xf32>, tensor<3xi32>, tensor<2xf32>) {
      %n = hlo.negate %a : (tensor<2xf32>) -> tensor<2xf32>
      %b:3 = hlo.opt_barrier %a, %i, %n : (tensor<2xf32>, tensor<3xi32>, tensor<2xf32>) -> (tensor<2xf32>, tensor<3xi32>, tensor<2xf32>)
      %r = hlo.negate %b#0 : (tensor<2xf32>) -> tensor<2xf32>
      return %r, %b#1, %b#2 : tensor<2xf32>, tensor<3xi32>, tensor<2xf32>
    })");
  std::map<std::string, int> opcodes;
  for (const auto &inst : proto.computations(0).instructions())
    ++opcodes[inst.opcode()];
  EXPECT_EQ(opcodes["opt-barrier"], 1);
  EXPECT_EQ(opcodes["get-tuple-element"], 3);
  auto out = neuron::evaluateHlo(proto, {{array({2}, {1, -2}), array({3}, {7, 8, 9})}});
  EXPECT_EQ(out[0][0].values, (std::vector<double>{-1, 2}));
  EXPECT_EQ(out[0][1].values, (std::vector<double>{7, 8, 9}));
  EXPECT_EQ(out[0][2].values, (std::vector<double>{-1, 2}));
}

TEST(HloEvaluatorTest, DotReduceAndRoundTrip) {
  mlir::MLIRContext context;
  xla::HloModuleProto proto = exported(context, R"(
    func.func @main(%a: tensor<2x3xf32>, %b: tensor<4x3xf32>) -> (tensor<2x4xf32>, tensor<2xf32>) {
      %d = hlo.dot_general %a, %b {lhs_batching_dimensions = array<i64>, lhs_contracting_dimensions = array<i64: 1>, rhs_batching_dimensions = array<i64>, rhs_contracting_dimensions = array<i64: 1>} : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<2x4xf32>
      %z = hlo.constant {value = dense<0.0> : tensor<f32>} : tensor<f32>
      %s = hlo.reduce %a, %z {combiner = #hlo<combiner add>, dimensions = array<i64: 1>} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>
      return %d, %s : tensor<2x4xf32>, tensor<2xf32>
    })");
  auto out = neuron::evaluateHlo(
      proto, {{array({2, 3}, {1, 2, 3, 4, 5, 6}), array({4, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1})}});
  EXPECT_EQ(out[0][0].values, (std::vector<double>{1, 2, 3, 6, 4, 5, 6, 15}));
  EXPECT_EQ(out[0][1].values, (std::vector<double>{6, 15}));
  // The serialized proto parses back to the same text.
  xla::HloModuleProto back;
  ASSERT_TRUE(back.ParseFromString(proto.SerializeAsString()));
  EXPECT_EQ(neuron::printHloText(back), neuron::printHloText(proto));
  // An argument of the wrong shape is an error, never a crash.
  EXPECT_THROW(neuron::evaluateHlo(proto, {{array({3}, {1, 2, 3}), array({4, 3}, std::vector<double>(12))}}),
               kiln::Error);
}

// shard.all_to_all lowered (kiln-lower-to-hlo) and evaluated on the 4 ranks
// of a 2 x 2 grid, against the op's definition: member j's result is the
// j-th block along split_axis of each member k, joined in member order
// along concat_axis. Across axis 1 with split 2 / concat 0 (XLA's
// instruction wrapped in reshapes and transposes) and across axis 0 with
// split = concat = 2 (the instruction alone).
TEST(HloEvaluatorTest, AllToAllLoweringFollowsTheShardOp) {
  mlir::MLIRContext context;
  context.loadDialect<hlo::HloDialect, mlir::func::FuncDialect, mlir::shard::ShardDialect>();
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(R"(
    shard.grid @grid(shape = 2x2)
    func.func @train_step(%x: tensor<2x3x4xf32>) -> (tensor<4x3x2xf32>, tensor<2x3x4xf32>) {
      %a = shard.all_to_all %x on @grid grid_axes = [1] split_axis = 2 concat_axis = 0
          : tensor<2x3x4xf32> -> tensor<4x3x2xf32>
      %b = shard.all_to_all %x on @grid grid_axes = [0] split_axis = 2 concat_axis = 2
          : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
      return %a, %b : tensor<4x3x2xf32>, tensor<2x3x4xf32>
    })",
                                                                                     &context);
  ASSERT_TRUE(module);
  std::optional<xla::HloModuleProto> proto = test::perRankHlo(*module, "train_step");
  ASSERT_TRUE(proto);
  std::vector<std::vector<neuron::HloArray>> args;
  for (int r = 0; r < 4; ++r) {
    std::vector<double> v(24);
    for (int i = 0; i < 24; ++i)
      v[i] = 100 * r + i;
    args.push_back({array({2, 3, 4}, v), neuron::HloArray{xla::S32, {}, {double(r)}}});
  }
  auto out = neuron::evaluateHlo(*proto, args);
  ASSERT_EQ(out.size(), 4u);
  // Row-major [2, 3, 4] input: element (a, b, c) of rank r is 100 r + 12 a + 4 b + c.
  auto input = [](int r, int a, int b, int c) { return 100.0 * r + 12 * a + 4 * b + c; };
  Groups overAxis1{{0, 1}, {2, 3}}, overAxis0{{0, 2}, {1, 3}};
  for (const auto &g : overAxis1)
    for (int j = 0; j < 2; ++j) {
      std::vector<double> expected; // [4, 3, 2]: rows 2k..2k+1 from member k, columns 2j..2j+1
      for (int i = 0; i < 4; ++i)
        for (int b = 0; b < 3; ++b)
          for (int c = 0; c < 2; ++c)
            expected.push_back(input(int(g[i / 2]), i % 2, b, 2 * j + c));
      EXPECT_EQ(out[g[j]][0].values, expected) << "rank " << g[j];
    }
  for (const auto &g : overAxis0)
    for (int j = 0; j < 2; ++j) {
      std::vector<double> expected; // [2, 3, 4]: columns 2k..2k+1 from member k's 2j..2j+1
      for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 3; ++b)
          for (int c = 0; c < 4; ++c)
            expected.push_back(input(int(g[c / 2]), a, b, 2 * j + c % 2));
      EXPECT_EQ(out[g[j]][1].values, expected) << "rank " << g[j];
    }
  neuron::HloStats stats = neuron::HloStats::of(*proto);
  EXPECT_EQ(stats.collectives.at("all-to-all {{0,1},{2,3}}").bytesSent, 48); // half of 96 bytes
}

// The Neuron conformance rules on a module that keeps them all, and on the
// same module's proto broken one way (what the hlo dialect cannot express:
// a may-alias entry, an alias of undefined kind, a tuple all-to-all).
TEST(NeuronConformanceTest, EachRuleRefusesItsBreak) {
  mlir::MLIRContext context;
  context.loadDialect<KilnDialect>();
  xla::HloModuleProto good = exported(context, R"(
    func.func @main(%w: tensor<4x8xf32> {kiln.param = "w"}, %rank: tensor<i32> {kiln.rank = "rank"})
        -> (tensor<4x8xf32> {kiln.param = "w"}, tensor<4x8xf32> {kiln.output = "exchanged"}) {
      %a = hlo.all_to_all %w {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, split_dimension = 0 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
      return %w, %a : tensor<4x8xf32>, tensor<4x8xf32>
    })");
  auto rulesBroken = [](const xla::HloModuleProto &m) {
    std::vector<std::string> rules;
    for (const neuron::ConformanceViolation &v : neuron::checkConformance(m, 2, 16))
      rules.push_back(v.rule);
    return rules;
  };
  EXPECT_EQ(rulesBroken(good), std::vector<std::string>{});
  ASSERT_EQ(good.input_output_alias().entries_size(), 1);
  EXPECT_EQ(good.input_output_alias().entries(0).kind(), xla::MUST_ALIAS);

  for (xla::Kind kind : {xla::MAY_ALIAS, xla::UNDEFINED_ALIAS}) {
    xla::HloModuleProto may = good;
    may.mutable_input_output_alias()->mutable_entries(0)->set_kind(kind);
    EXPECT_EQ(rulesBroken(may), std::vector<std::string>{"must-alias"}) << kind;
  }
  // The tuple form of all-to-all (two operands), which neuronx-cc imported
  // only from a 2026 SDK on.
  xla::HloModuleProto tupled = good;
  for (auto &comp : *tupled.mutable_computations())
    for (auto &inst : *comp.mutable_instructions())
      if (inst.opcode() == "all-to-all")
        inst.add_operand_ids(inst.operand_ids(0));
  EXPECT_EQ(rulesBroken(tupled), std::vector<std::string>{"collective-ids"});
  // Three ranks: the groups {0,1} leave rank 2 out.
  std::vector<neuron::ConformanceViolation> three = neuron::checkConformance(good, 3, 16);
  ASSERT_EQ(three.size(), 1u);
  EXPECT_NE(three[0].message.find("cover 2 of the 3 ranks"), std::string::npos) << three[0].message;
}
