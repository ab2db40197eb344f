/*
 * hipdrv.h - the HIP entry of gpudrv.h's driver table: the HIP runtime
 * (libamdhip64), opened with dlopen, for loading AMD code objects (HSACO)
 * and launching their kernels.  Use it through gpudrv.h
 * (tl_gpu_open(TL_GPU_HIP, ...)); this header says what is particular to
 * HIP.  Written against ROCm 6's headers and ABI; ROCm 5's runtime is
 * accepted too (see "Properties" below).
 *
 * Opening.  A machine without ROCm or without an AMD GPU is an ordinary
 * answer, not a crash: tl_gpu_open returns TL_NO_DEVICE with "no HIP
 * runtime (libamdhip64.so.6, ... not found)", "no HIP runtime (X cannot be
 * loaded: WHY)", "no usable HIP runtime (X lacks SYMBOL)" or "no HIP
 * device".  The libraries tried, in order: libamdhip64.so.6,
 * libamdhip64.so.5 and libamdhip64.so through the dynamic loader's search,
 * then the same three in /opt/rocm/lib/.  The environment variable
 * TL_LIBHIP, when set and not empty, names the one library to try instead.
 * The library stays mapped after tl_gpu_close (RTLD_NODELETE: the runtime
 * keeps process-wide state and is not meant to be unloaded).
 *
 * Devices.  HIP has no contexts to hold: a handle remembers its device
 * ordinal and makes it the calling thread's current device (hipSetDevice)
 * before every call, so a handle may be used from several threads.
 *
 * Properties.  The architecture name ("gfx90a") exists only in the
 * properties structure (gcnArchName); ROCm 6 dropped the attribute that gave
 * it (hipDeviceAttributeGcnArchName became hipDeviceAttributeUnused5).  ROCm
 * 6 also changed hipDeviceProp_t's layout and renamed the call that fills
 * it: its header maps hipGetDeviceProperties to the new symbol
 * hipGetDevicePropertiesR0600 (the ROCm 6 layout), while libamdhip64.so.6
 * still exports the plain hipGetDeviceProperties for the ROCm 5 layout
 * (hipDeviceProp_tR0000).  So the loader asks for
 * hipGetDevicePropertiesR0600 with a copy of ROCm 6's structure and reads
 * name and gcnArchName from it; only when that symbol is missing (a ROCm 5
 * runtime) does it call hipGetDeviceProperties with ROCm 5's layout.  The
 * numbers (threads, LDS, wavefront size, ...) come from
 * hipDeviceGetAttribute, whose values did not change between ROCm 5 and 6.
 *
 * Loading (tl_gpu_load) checks the image first, since the runtime reads its
 * size from the ELF headers: TL_CORRUPT for an ELF whose headers or
 * sections reach past its n bytes, TL_UNSUPPORTED for anything that is not
 * an AMDGPU code object (a cubin, PTX, an offload bundle, a relocatable
 * object) or one built for another architecture (by its EF_AMDGPU_MACH,
 * when the table below knows it); TL_DEVICE when the runtime refuses it.
 *
 * Launching: hipModuleLaunchKernel with the arguments as kernelParams
 * (`extra` is NULL).  AMD needs no opt-in for dynamic LDS: the limit is the
 * device's LDS per workgroup (max_shared_per_block_optin equals
 * max_shared_per_block).
 *
 * Runtime failures are TL_DEVICE with a message naming the call and the
 * runtime's own error name and text ("hipMalloc of 1024 bytes:
 * hipErrorOutOfMemory (out of memory)").
 */
#ifndef TL_HIP_H
#define TL_HIP_H

#include "gpudrv.h"

/* The EF_AMDGPU_MACH value (the low byte of an AMDGPU ELF's e_flags) of a
 * gfx name, and back: a small table of the architectures this project
 * knows (gfx900 to gfx1201).  -1 / NULL when not in it. */
int tl_hip_mach_of(const char *arch);
const char *tl_hip_arch_of_mach(int mach);

#endif
