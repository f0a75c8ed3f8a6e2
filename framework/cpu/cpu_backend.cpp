// CpuBackend's construction, host memory and the factory make_cpu_backend. Kernels live in the
// other files of this folder, one per op family. Memory is plain host memory, 64-byte aligned so
// that AVX-512 loads of a whole cache line never straddle two.
#include "framework/cpu/cpu_backend.h"

#include <omp.h>

#include <cstdlib>
#include <cstring>

#include "framework/check.h"

namespace gpt::cpu {

CpuBackend::CpuBackend(int threads, Precision precision)
    : threads_(threads), precision_(precision) {
  GPT_CHECK(threads >= 0, "CPU backend thread count must be >= 0, got " << threads);
  // oneDNN is built on the OpenMP runtime here, so this one setting governs its sgemm too.
  if (threads > 0) omp_set_num_threads(threads);
  threads_ = omp_get_max_threads();
}

std::string CpuBackend::name() const {
  return GPT_MSG("cpu (" << threads_ << (threads_ == 1 ? " thread" : " threads")
                         << (precision_ == Precision::kBf16 ? ", bf16)" : ")"));
}

void* CpuBackend::raw_allocate(size_t bytes) {
  // aligned_alloc wants a multiple of the alignment.
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* ptr = std::aligned_alloc(kAlignment, rounded);
  // Not an internal fault: the machine has less memory than the run asks for.
  GPT_INPUT_CHECK(ptr != nullptr, "out of host memory allocating "
                                      << bytes << " bytes (the memory model's prediction for "
                                      << "a layout: train --memory-report)");
  std::memset(ptr, 0, rounded);
  return ptr;
}

void CpuBackend::raw_deallocate(void* ptr) {
  std::free(ptr);
}

void CpuBackend::copy_to_host(void* host_dst, const void* src, size_t bytes) {
  if (bytes > 0) std::memcpy(host_dst, src, bytes);
}

void CpuBackend::copy_from_host(void* dst, const void* host_src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, host_src, bytes);
}

void CpuBackend::copy(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) std::memmove(dst, src, bytes);
}

void CpuBackend::fill_zero(float* x, int64_t n) {
  GPT_CHECK(n >= 0, "fill_zero of a negative count " << n);
  if (n > 0) std::memset(x, 0, sizeof(float) * static_cast<size_t>(n));
}

}  // namespace gpt::cpu

namespace gpt {

std::unique_ptr<Backend> make_cpu_backend(int threads, Precision precision) {
  return std::make_unique<cpu::CpuBackend>(threads, precision);
}

}  // namespace gpt
