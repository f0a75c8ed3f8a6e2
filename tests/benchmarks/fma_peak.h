// The processor's fp32 fused-multiply-add peak, measured rather than taken from a data sheet
// (clock speeds, turbo and the FMA units' width differ between machines): the ceiling that a
// benchmark's achieved GFLOP/s is a share of.
#pragma once

namespace gpt {

// GFLOP/s of `threads` threads each running 16 independent chains of FMAs on registers (AVX-512
// where the processor has it, else AVX2 with FMA, else 0), 2 flops per lane per FMA; the best of
// three runs of about 0.1 s.
double fma_peak_gflops(int threads);

}  // namespace gpt
