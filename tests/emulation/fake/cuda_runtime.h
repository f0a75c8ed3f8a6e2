// Stand-in for CUDA's cuda_runtime.h in the emulated kernels of test_cuda_emulation: the types,
// qualifiers and built-in variables come from the emulator.
#pragma once

#include "../emu.h"
