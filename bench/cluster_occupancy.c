// bench/cluster_occupancy.c - how many thread-block clusters of a kernel the GPU holds at once
// (cuOccupancyMaxActiveClusters), for a cubin tlc built: where fewer clusters fit than the grid has, the
// launch runs in more than one wave (bench/README.md, "W4A16 in clusters").
//   gcc -O1 -I/usr/local/cuda/include bench/cluster_occupancy.c -o cluster_occupancy -L/usr/local/cuda/lib64/stubs -lcuda
//   tlc compile tests/gpu/programs/gemm_w4a16_cluster.json --target sm_90a -D M=16 -D N=8192 -D K=8192
//     and -D block_M=16 -D block_K=128 -D num_stages=4 -D split_k=4 -o k.cubin
//   ./cluster_occupancy k.cubin gemm_w4a16_cluster 256 41216 1 1 4   (threads with the producer warpgroup,
//       the dynamic shared bytes and the cluster shape: --emit meta gives them)
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#define CK(x) do { CUresult r_ = (x); if (r_) { const char *s; cuGetErrorString(r_, &s); printf("%s: %s\n", #x, s); return 1; } } while (0)
int main(int argc, char **argv) {
  if (argc < 8) { printf("usage: occ cubin kernel threads smem cx cy cz\n"); return 2; }
  CUdevice d; CUcontext c; CUmodule m; CUfunction f;
  CK(cuInit(0)); CK(cuDeviceGet(&d, 0)); CK(cuDevicePrimaryCtxRetain(&c, d)); CK(cuCtxSetCurrent(c));
  CK(cuModuleLoad(&m, argv[1])); CK(cuModuleGetFunction(&f, m, argv[2]));
  int T = atoi(argv[3]), smem = atoi(argv[4]);
  CK(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem));
  int nb = 0;
  CK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&nb, f, T, smem));
  CUlaunchConfig cfg = {0};
  CUlaunchAttribute at[1];
  at[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  at[0].value.clusterDim.x = atoi(argv[5]); at[0].value.clusterDim.y = atoi(argv[6]); at[0].value.clusterDim.z = atoi(argv[7]);
  cfg.gridDimX = 128 * atoi(argv[5]); cfg.gridDimY = atoi(argv[6]); cfg.gridDimZ = atoi(argv[7]);
  cfg.blockDimX = T; cfg.blockDimY = 1; cfg.blockDimZ = 1; cfg.sharedMemBytes = smem;
  cfg.attrs = at; cfg.numAttrs = 1;
  int ncl = -1;
  CUresult r = cuOccupancyMaxActiveClusters(&ncl, f, &cfg);
  printf("%s: blocks/SM %d, max active clusters of %sx%sx%s: %d (r=%d)\n", argv[2], nb, argv[5], argv[6], argv[7], ncl, (int)r);
  return 0;
}
