// kiln-compact-buffers on bufferized code (what buffer-deallocation-pipeline
// leaves: every dealloc at the end of the block): each dealloc moves to just
// after the last use of its buffer, its views, or its data pointer (up to
// the host call that reads the pointer table); a buffer only copied into an
// out-parameter at the end becomes that out-parameter.
// RUN: kiln-opt %s --pass-pipeline='builtin.module(func.func(kiln-compact-buffers))' | FileCheck %s

func.func private @kiln_custom_call(i64, memref<?xi64>) attributes {llvm.emit_c_interface}

// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[X:.*]]: memref<4xf32>, %[[OUT:.*]]: memref<4xf32>)
func.func @step(%x: memref<4xf32>, %out: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %site = arith.constant 0 : i64
  // CHECK: %[[A:.*]] = memref.alloc() : memref<4xf32>
  // CHECK-NEXT: memref.copy %[[X]], %[[A]]
  // CHECK-NEXT: %[[VIEW:.*]] = memref.expand_shape %[[A]]
  // CHECK-NEXT: %[[Y:.*]] = memref.load %[[VIEW]]
  // CHECK-NEXT: memref.dealloc %[[A]]
  %a = memref.alloc() : memref<4xf32>
  memref.copy %x, %a : memref<4xf32> to memref<4xf32>
  %view = memref.expand_shape %a [[0, 1]] output_shape [2, 2] : memref<4xf32> into memref<2x2xf32>
  %y = memref.load %view[%c0, %c0] : memref<2x2xf32>
  // A buffer the host reads through its pointer: freed after the call.
  // CHECK: %[[B:.*]] = memref.alloc() : memref<4xf32>
  // CHECK: memref.extract_aligned_pointer_as_index %[[B]]
  // CHECK: call @kiln_custom_call
  // CHECK-NEXT: memref.dealloc %[[B]]
  %b = memref.alloc() : memref<4xf32>
  memref.store %y, %b[%c0] : memref<4xf32>
  %p = memref.extract_aligned_pointer_as_index %b : memref<4xf32> -> index
  %pi = arith.index_cast %p : index to i64
  %table = memref.alloca() : memref<1xi64>
  memref.store %pi, %table[%c0] : memref<1xi64>
  %dyn = memref.cast %table : memref<1xi64> to memref<?xi64>
  %later = arith.addf %y, %y : f32
  call @kiln_custom_call(%site, %dyn) : (i64, memref<?xi64>) -> ()
  // The result: computed in the out-parameter, no copy, no alloc.
  // CHECK: memref.store %{{.*}}, %[[OUT]][%{{.*}}]
  // CHECK-NOT: memref.alloc
  // CHECK-NOT: memref.copy
  // CHECK: return
  %r = memref.alloc() : memref<4xf32>
  memref.store %later, %r[%c0] : memref<4xf32>
  memref.copy %r, %out : memref<4xf32> to memref<4xf32>
  memref.dealloc %a : memref<4xf32>
  memref.dealloc %b : memref<4xf32>
  memref.dealloc %r : memref<4xf32>
  return
}

// A copy into an out-parameter before the buffer's last write stays.
// CHECK-LABEL: func.func @early_copy
// CHECK: memref.copy
// CHECK: memref.dealloc
func.func @early_copy(%out: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %one = arith.constant 1.0 : f32
  %r = memref.alloc() : memref<4xf32>
  memref.copy %r, %out : memref<4xf32> to memref<4xf32>
  memref.store %one, %r[%c0] : memref<4xf32>
  memref.dealloc %r : memref<4xf32>
  return
}

// The state a step updates (kiln.input_output_alias: by result, the argument
// it updates; the out-parameters are the last arguments). An out-parameter
// may take its argument's buffer (kiln.out_param_buffers) when every read of
// the argument comes before the out-parameter's first use, or is that use:
// an elementwise op reading the argument where it writes. w: read and
// written by one elementwise op, shared. v: read transposed where written,
// not. u: read after its out-parameter's first write, not. t: never read,
// shared. s: the writing op reads the out-parameter's old contents, not.
// CHECK-LABEL: func.func @state
// CHECK-SAME: attributes {kiln.out_param_buffers = array<i64: 0, -1, -1, 3, -1>}
#id = affine_map<(i) -> (i)>
#id2 = affine_map<(i, j) -> (i, j)>
#tr2 = affine_map<(i, j) -> (j, i)>
func.func @state(%w: memref<4xf32>, %v: memref<2x2xf32>, %u: memref<4xf32>, %t: memref<4xf32>,
                 %s: memref<4xf32>, %w_out: memref<4xf32>, %v_out: memref<2x2xf32>,
                 %u_out: memref<4xf32>, %t_out: memref<4xf32>, %s_out: memref<4xf32>)
    attributes {kiln.input_output_alias = array<i64: 0, 1, 2, 3, 4>} {
  %one = arith.constant 1.0 : f32
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%w : memref<4xf32>) outs(%w_out : memref<4xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.addf %a, %one : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#tr2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%v : memref<2x2xf32>) outs(%v_out : memref<2x2xf32>) {
  ^bb0(%a: f32, %b: f32):
    linalg.yield %a : f32
  }
  linalg.fill ins(%one : f32) outs(%u_out : memref<4xf32>)
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%u, %u_out : memref<4xf32>, memref<4xf32>) outs(%t_out : memref<4xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%s : memref<4xf32>) outs(%s_out : memref<4xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  }
  return
}

// Without the attribute (no state), none is recorded.
// CHECK-LABEL: func.func @stateless
// CHECK-NOT: kiln.out_param_buffers
func.func @stateless(%out: memref<4xf32>) {
  return
}
