// The families this project runs, in Arch's order, and the presets of all of them (see
// model_family.h).
#include "framework/families/model_family.h"

#include <cmath>

#include "framework/check.h"

namespace gpt {

float residual_projection_init_std(int64_t n_layer) {
  return kLinearInitStd / std::sqrt(2.0f * static_cast<float>(n_layer));
}

const ModelFamily& gpt2_family();
const ModelFamily& llama_family();

std::span<const ModelFamily* const> model_families() {
  static const ModelFamily* const kFamilies[] = {&gpt2_family(), &llama_family()};
  return kFamilies;
}

const ModelFamily& family_of(Arch arch) {
  for (const ModelFamily* family : model_families())
    if (family->arch == arch) return *family;
  GPT_CHECK(false, "no model family for arch " << static_cast<int>(arch));
  return *model_families().front();
}

std::vector<LogicalParameter> logical_parameters(const ModelConfig& m) {
  const ModelFamily& family = family_of(m);
  const EdgeParameters edge = family.edge_parameters(m);
  std::vector<LogicalParameter> out;
  const auto norm = [&](const NormSpec& spec) {
    out.push_back({spec.name + ".weight", {spec.C}});
    if (!spec.rms) out.push_back({spec.name + ".bias", {spec.C}});
  };
  const auto linear = [&](const LinearSpec& spec, LinearPlace) {
    out.push_back({spec.name + ".weight", {spec.out_features, spec.in_features}});
    if (spec.bias) out.push_back({spec.name + ".bias", {spec.out_features}});
  };
  out.push_back({edge.token_embedding, {m.vocab_size, m.d_model}});
  if (!edge.positions.empty()) out.push_back({edge.positions, {m.seq_len, m.d_model}});
  for (int64_t l = 0; l < m.n_layer; ++l)
    for_each_block_parameter(family.block_parameters(m, l, 1), norm, linear);
  if (!edge.untied_head.empty()) out.push_back({edge.untied_head, {m.vocab_size, m.d_model}});
  norm(edge.final_norm);
  return out;
}

const ModelPreset& find_preset(const std::string& name) {
  std::string names;
  for (const ModelFamily* family : model_families())
    for (const ModelPreset& preset : family->presets) {
      if (name == preset.name) return preset;
      names += std::string(names.empty() ? "" : " | ") + preset.name;
    }
  fail_input("--model must be one of " + names + " (got '" + name + "')");
}

}  // namespace gpt
