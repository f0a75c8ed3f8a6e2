// failpoint (see failpoint.h).
#include "framework/failpoint.h"

#include <csignal>
#include <cstdlib>
#include <string>

#include "framework/check.h"

namespace gpt {

void failpoint(std::string_view name, int64_t value) {
  const char* armed = std::getenv("GPT_FAILPOINT");
  if (armed == nullptr) return;
  const std::string_view spec(armed);
  const size_t equals = spec.find('=');
  if (equals == std::string_view::npos || spec.substr(0, equals) != name) return;
  std::string_view armed_value = spec.substr(equals + 1);
  constexpr std::string_view kStop = ":stop";
  const bool stop = armed_value.ends_with(kStop);
  if (stop) armed_value.remove_suffix(kStop.size());
  if (armed_value != std::to_string(value)) return;
  if (stop) {
    std::raise(SIGSTOP);
    return;
  }
  throw Error("failpoint " + std::string(spec) + " (GPT_FAILPOINT) was reached");
}

}  // namespace gpt
