//===- HostFunctions.cpp - What compiled code calls in the host -----------===//

#include "HostFunctions.h"

#include <cblas.h>

extern "C" void kilnSgemm(StridedMemRefType<int64_t, 1> *table) {
  const int64_t *w = table->data + table->offset;
  int64_t batch = w[0], m = w[1], n = w[2], k = w[3];
  bool transposeA = w[4] != 0, transposeB = w[5] != 0;
  const float *a = reinterpret_cast<const float *>(w[6]);
  const float *b = reinterpret_cast<const float *>(w[7]);
  float *c = reinterpret_cast<float *>(w[8]);
  for (int64_t i = 0; i < batch; ++i)
    cblas_sgemm(CblasRowMajor, transposeA ? CblasTrans : CblasNoTrans,
                transposeB ? CblasTrans : CblasNoTrans, int(m), int(n), int(k), 1.0f,
                a + i * m * k, int(transposeA ? m : k), b + i * k * n, int(transposeB ? k : n),
                0.0f, c + i * m * n, int(n));
}
