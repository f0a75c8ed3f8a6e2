// The CUDA entry points of backend.h in a build without the CUDA toolkit: they say so, so that
// `--device cuda` fails with one clear line and probes find no device.
#include "framework/backend.h"
#include "framework/check.h"

namespace gpt {

std::unique_ptr<Backend> make_cuda_backend(const CudaBackendOptions& /*options*/) {
  fail_input(
      "--device cuda: this build has no CUDA backend (the CUDA toolkit was not found when it "
      "was configured)");
}

int cuda_device_count() {
  return 0;
}

size_t cuda_free_memory(int /*device*/) {
  return 0;
}

std::string cuda_device_uuid(int /*device*/) {
  return "";
}

}  // namespace gpt
