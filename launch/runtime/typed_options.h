// The typed parsers of every enum-valued option, shared by train, eval, generate and plan: each
// enum's names are listed once here (choices), Boost.Program_options parses an option of that
// type through validate() below (found by argument-dependent lookup), and an unknown name is a
// one-line error naming the option and its choices. "auto" is the empty optional.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/program_options.hpp>

#include "framework/io/dataset.h"
#include "launch/runtime/device_setup.h"
#include "optimizers/optimizer.h"
#include "parallel/data_parallel.h"
#include "parallel/layout.h"
#include "parallel/pipeline_schedule.h"

namespace gpt {

// ---- enum-valued options: each type's names, read by the parser and by --help

template <typename E>
using Choices = std::vector<std::pair<E, std::string>>;

// Every value of `kinds` with the name `name_of_kind` gives it.
template <typename E, size_t N>
Choices<E> named(const E (&kinds)[N], const char* (*name_of_kind)(E)) {
  Choices<E> out;
  for (E k : kinds) out.emplace_back(k, name_of_kind(k));
  return out;
}

inline Choices<OptimizerKind> choices(OptimizerKind*) {
  return named(kOptimizerKinds, optimizer_name);
}
inline Choices<ScheduleKind> choices(ScheduleKind*) {
  return named(kTrainingSchedules, schedule_name);
}
inline Choices<DataOrder> choices(DataOrder*) {
  return named(kDataOrders, data_order_name);
}
inline Choices<Recompute> choices(Recompute*) {
  return named(kRecomputeModes, recompute_name);
}
inline Choices<DeviceKind> choices(DeviceKind*) {
  return {{DeviceKind::kCpu, "cpu"}, {DeviceKind::kCuda, "cuda"}};
}
inline Choices<PrecisionRegime> choices(PrecisionRegime*) {
  return named(kPrecisionRegimes, regime_name);
}
inline Choices<GradReduceDtype> choices(GradReduceDtype*) {
  return named(kGradReduceDtypes, grad_reduce_dtype_name);
}
inline Choices<DeviceTransport> choices(DeviceTransport*) {
  return {{DeviceTransport::kNccl, transport_name(DeviceTransport::kNccl)},
          {DeviceTransport::kHostStagedMpi, transport_name(DeviceTransport::kHostStagedMpi)}};
}

// "a | b | c", with "auto" first for options where it means "let the program decide".
template <typename E>
inline std::string choice_list(bool with_auto) {
  std::string list = with_auto ? "auto" : "";
  for (const auto& [kind, name] : choices(static_cast<E*>(nullptr)))
    list += (list.empty() ? "" : " | ") + name;
  return list;
}

template <typename E>
std::optional<E> find_choice(const std::string& text) {
  for (const auto& [kind, name] : choices(static_cast<E*>(nullptr)))
    if (text == name) return kind;
  return std::nullopt;
}

template <typename E>
std::string name_of(E value) {
  for (const auto& [kind, name] : choices(static_cast<E*>(nullptr)))
    if (kind == value) return name;
  return "?";
}

// Boost's error for a value outside the choices; Boost fills in the option's name.
class ChoiceError : public boost::program_options::error_with_option_name {
 public:
  ChoiceError(const std::string& value, const std::string& list)
      : boost::program_options::error_with_option_name("%canonical_option% must be one of " + list +
                                                       " (got '%value%')") {
    set_substitute("value", value);
  }
};

// Boost.Program_options finds these by argument-dependent lookup: every enum option is parsed
// here, once, from its names; "auto" is the empty optional.
template <typename E>
void validate(boost::any& out, const std::vector<std::string>& values, E*, int) {
  const std::string& text = boost::program_options::validators::get_single_string(values);
  const std::optional<E> kind = find_choice<E>(text);
  if (!kind) throw ChoiceError(text, choice_list<E>(false));
  out = *kind;
}

template <typename E>
void validate(boost::any& out, const std::vector<std::string>& values, std::optional<E>*, int) {
  const std::string& text = boost::program_options::validators::get_single_string(values);
  const std::optional<E> kind = find_choice<E>(text);
  if (!kind && text != "auto") throw ChoiceError(text, choice_list<E>(true));
  out = kind;
}

// An enum option bound to `target`, its default shown by name.
template <typename E>
boost::program_options::typed_value<E>* choice(E* target) {
  return boost::program_options::value(target)->default_value(*target, name_of(*target));
}
template <typename E>
boost::program_options::typed_value<std::optional<E>>* choice(std::optional<E>* target) {
  return boost::program_options::value(target)->default_value(*target,
                                                              *target ? name_of(**target) : "auto");
}

}  // namespace gpt
