// kiln-lower-to-hlo's refusals: an op without a lowering (named with its
// fqn, never a crash), a module without the function to lower.
// RUN: kiln-opt %s -split-input-file -verify-diagnostics --kiln-lower-to-hlo

module {
  shard.grid @grid(shape = 2)
  func.func @train_step(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error@+1 {{kiln-lower-to-hlo: no HLO lowering for 'shard.broadcast' (fqn '?') yet}}
    %y = shard.broadcast %x on @grid grid_axes = [0] root = [0]
      : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}

// -----

// expected-error@+1 {{kiln-lower-to-hlo: no function @train_step to lower}}
module {
  func.func @loss(%x: tensor<f32>) -> tensor<f32> {
    return %x : tensor<f32>
  }
}

// -----

// A kernel with no Neuron custom call (CPU only) is refused, naming it.
module {
  func.func @train_step(%h: tensor<2x4x8xf32>, %w: tensor<16x8xf32>, %labels: tensor<2x4xi64>)
      -> (tensor<f32>, tensor<2x4x8xf32>, tensor<16x8xf32>) {
    // expected-error@+1 {{kiln-lower-to-hlo: kernel 'chunked_cross_entropy' (rule 'fused', fqn 'loss') has no Neuron custom call: it runs on the CPU only}}
    %loss, %dh, %dw = kiln.kernel "chunked_cross_entropy"(%h, %w, %labels) {fqn = "loss", options = {}, rule = "fused", target = "kiln.cross_entropy"} : (tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<2x4xi64>) -> (tensor<f32>, tensor<2x4x8xf32>, tensor<16x8xf32>)
    return %loss, %dh, %dw : tensor<f32>, tensor<2x4x8xf32>, tensor<16x8xf32>
  }
}
