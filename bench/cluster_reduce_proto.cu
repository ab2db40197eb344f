// bench/cluster_reduce_proto.cu - what adding split-K runs costs, by a second kernel against a thread-block
// cluster's distributed shared memory: a prototype in plain CUDA, to size the design bench/README.md proposes
// for W4A16 at small M (the runs of a tile as the blocks of one cluster, added by the block of rank 0).
//
// Both variants stream the same 32 MiB (N = 8192 rows of 4096 bytes: the 4-bit weights of N = K = 8192) in
// 128 x RUNS blocks of 128 threads (64 rows each, a K run of 4096 / RUNS bytes a row), each thread keeping
// 8 float32 sums (a 64 x 16 tile of C^T over the block, as the M = 16 kernel's accumulators), then:
//   two:     every block stores its tile to P [RUNS, N, 16]; a second kernel (512 blocks of 16 rows, launched
//            after it on the stream) adds the RUNS tiles of each element in run order and stores C [16, N];
//   cluster: the RUNS blocks of a tile are one cluster (1, 1, RUNS); each stores its tile to its own shared
//            memory, a cluster barrier, the block of rank 0 reads the others' tiles (distributed shared
//            memory) and adds them in run order, stores C, and a second cluster barrier keeps the others'
//            shared memory until it is done.
// Results are compared (they must be equal: the same additions in the same order) before anything is timed.
// Timing as bench/gpu_bench.py times W4A16: CUDA events around one launch (of both kernels), 256 MiB of
// device memory written before each.
//
//   nvcc -O3 -arch=sm_90a -std=c++17 -cudart static -o cluster_reduce_proto bench/cluster_reduce_proto.cu
//   ./cluster_reduce_proto [iterations]
#include <cooperative_groups.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace cg = cooperative_groups;

#define CK(x)                                                                                             \
  do {                                                                                                    \
    cudaError_t e_ = (x);                                                                                 \
    if (e_ != cudaSuccess) {                                                                              \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));                \
      exit(1);                                                                                            \
    }                                                                                                     \
  } while (0)

enum { N = 8192, ROWB = 4096, RUNS = 4, ROWS = 64, T = 128, M = 16, PER = ROWS * M / T };

// The streamed part: each thread reads its share of the block's 64 rows x (ROWB / RUNS) bytes with 16-byte
// loads, 8 in flight, and folds the words into its 8 sums (cheap arithmetic; the values do not matter).
__device__ __forceinline__ void stream(const uint4 *__restrict__ w, int bx, int bz, float acc[PER]) {
  const int per_row = ROWB / RUNS / 16; // uint4 a row of the run
  const uint4 *base = w + (size_t)bx * ROWS * (ROWB / 16) + (size_t)bz * per_row;
  const int total = ROWS * per_row;
  for (int i = threadIdx.x; i < total; i += T * 8) {
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 8; u++) {
      int e = i + u * T;
      v[u] = e < total ? base[(size_t)(e / per_row) * (ROWB / 16) + e % per_row] : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < 8; u++)
      acc[u % PER] += (float)(v[u].x & 15) + (float)(v[u].y & 15) - (float)(v[u].z & 15) - (float)(v[u].w & 15);
  }
}

// element j of thread t's 8: row n = (t * PER + j) / M, column m = (t * PER + j) % M of the block's 64 x 16 tile
__global__ void __launch_bounds__(T) two_main(const uint4 *__restrict__ w, float *__restrict__ P) {
  float acc[PER] = {};
  stream(w, blockIdx.x, blockIdx.z, acc);
#pragma unroll
  for (int j = 0; j < PER; j++) {
    int e = threadIdx.x * PER + j;
    P[((size_t)blockIdx.z * N + blockIdx.x * ROWS + e / M) * M + e % M] = acc[j];
  }
}

__global__ void __launch_bounds__(T) two_reduce(const float *__restrict__ P, float *__restrict__ C) {
  // 16 rows of C^T a block: 256 elements, 2 a thread
#pragma unroll
  for (int j = 0; j < 2; j++) {
    int e = threadIdx.x * 2 + j, n = blockIdx.x * 16 + e / M, m = e % M;
    float s = P[(size_t)n * M + m];
#pragma unroll
    for (int r = 1; r < RUNS; r++)
      s += P[((size_t)r * N + n) * M + m];
    C[(size_t)m * N + n] = s;
  }
}

__global__ void __cluster_dims__(1, 1, RUNS) __launch_bounds__(T) cluster_main(const uint4 *__restrict__ w,
                                                                                float *__restrict__ C) {
  __shared__ float tile[PER * T];
  float acc[PER] = {};
  stream(w, blockIdx.x, blockIdx.z, acc);
  cg::cluster_group cl = cg::this_cluster();
#pragma unroll
  for (int j = 0; j < PER; j++)
    tile[j * T + threadIdx.x] = acc[j];
  cl.sync(); // barrier.cluster arrive.release / wait.acquire: every block's tile written
  if (cl.block_rank() == 0) {
    for (int r = 1; r < RUNS; r++) {
      const float *other = cl.map_shared_rank(tile, r);
#pragma unroll
      for (int j = 0; j < PER; j++)
        acc[j] += other[j * T + threadIdx.x];
    }
#pragma unroll
    for (int j = 0; j < PER; j++) {
      int e = threadIdx.x * PER + j, n = blockIdx.x * ROWS + e / M, m = e % M;
      C[(size_t)m * N + n] = acc[j];
    }
  }
  cl.sync(); // the others' shared memory stays theirs until rank 0 has read it
}

int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 200;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  size_t wbytes = (size_t)N * ROWB, fbytes = 256u << 20;
  uint4 *w;
  float *P, *C1, *C2;
  unsigned char *flush;
  CK(cudaMalloc(&w, wbytes));
  CK(cudaMalloc(&P, (size_t)RUNS * N * M * 4));
  CK(cudaMalloc(&C1, (size_t)M * N * 4));
  CK(cudaMalloc(&C2, (size_t)M * N * 4));
  CK(cudaMalloc(&flush, fbytes));
  std::vector<unsigned> host(wbytes / 4);
  unsigned x = 12345;
  for (auto &h : host) h = x = x * 1664525u + 1013904223u;
  CK(cudaMemcpy(w, host.data(), wbytes, cudaMemcpyHostToDevice));
  dim3 grid(N / ROWS, 1, RUNS);
  auto two = [&] {
    two_main<<<grid, T>>>(w, P);
    two_reduce<<<N / 16, T>>>(P, C1);
  };
  auto clus = [&] { cluster_main<<<grid, T>>>(w, C2); };
  two();
  clus();
  CK(cudaDeviceSynchronize());
  std::vector<float> a((size_t)M * N), b((size_t)M * N);
  CK(cudaMemcpy(a.data(), C1, a.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(b.data(), C2, b.size() * 4, cudaMemcpyDeviceToHost));
  if (memcmp(a.data(), b.data(), a.size() * 4)) {
    fprintf(stderr, "FAIL: the two variants' sums differ\n");
    return 1;
  }
  cudaEvent_t s, e;
  CK(cudaEventCreate(&s));
  CK(cudaEventCreate(&e));
  auto time = [&](auto f) {
    double sum = 0, least = 1e30;
    for (int i = 0; i < iters; i++) {
      CK(cudaMemsetAsync(flush, i & 255, fbytes));
      CK(cudaEventRecord(s));
      f();
      CK(cudaEventRecord(e));
      CK(cudaEventSynchronize(e));
      float ms;
      CK(cudaEventElapsedTime(&ms, s, e));
      sum += ms;
      least = ms < least ? ms : least;
    }
    return std::make_pair(sum / iters * 1000, least * 1000);
  };
  for (int round = 0; round < 2; round++) {
    auto t2 = time(two), tc = time(clus);
    printf("%s: streaming 32 MiB in %d x %d blocks, then adding %d runs: two kernels %.1f us (least %.1f), "
           "one kernel in clusters of %d %.1f us (least %.1f)\n",
           prop.name, N / ROWS, RUNS, RUNS, t2.first, t2.second, RUNS, tc.first, tc.second);
  }
  CK(cudaGetLastError());
  printf("ok: the sums agree\n");
  return 0;
}
