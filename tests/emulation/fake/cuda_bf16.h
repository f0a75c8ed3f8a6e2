// Stand-in for CUDA's cuda_bf16.h in the emulated kernels of test_cuda_emulation: the emulator
// defines __nv_bfloat16 and its conversions.
#pragma once

#include "../emu.h"
