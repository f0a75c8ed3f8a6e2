// A Hugging Face model directory read and written through its family's HfFormat (see
// hf_model.h).
#include "framework/io/hf_model.h"

#include <algorithm>

#include "framework/check.h"
#include "framework/io/checkpoint_reader.h"
#include "framework/io/hdf5_util.h"
#include "framework/parameter.h"

namespace gpt {
namespace {

// transformers' name of the output head in every *ForCausalLM and GPT2LMHeadModel.
constexpr const char* kHfHeadName = "lm_head.weight";

std::vector<int64_t> reversed(std::vector<int64_t> shape) {
  std::reverse(shape.begin(), shape.end());
  return shape;
}

// A matrix's transpose.
std::vector<float> transposed(const std::vector<float>& values, const std::vector<int64_t>& shape) {
  const int64_t rows = shape.at(0), cols = shape.at(1);
  std::vector<float> out(values.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[static_cast<size_t>(c * rows + r)] = values[static_cast<size_t>(r * cols + c)];
  return out;
}

std::string known_architectures() {
  std::string out;
  for (const ModelFamily* family : model_families())
    for (const HfArchitecture& a : family->hf->architectures)
      out += (out.empty() ? "" : ", ") + std::string(a.architecture);
  return out;
}

struct FamilyType {
  const ModelFamily* family = nullptr;
  std::string model_type;
};

// The family reading `model_type`, among those where model_type_decides if `deciding`.
FamilyType family_of_model_type(const std::string& type, bool deciding) {
  for (const ModelFamily* family : model_families())
    for (const HfArchitecture& a : family->hf->architectures)
      if (type == a.model_type && (!deciding || family->hf->model_type_decides))
        return {family, a.model_type};
  return {};
}

FamilyType hf_family(const Json& c, const std::string& what) {
  const bool has_type = json_has_value(c, "model_type");
  const std::string type = has_type ? json_field<std::string>(c, "model_type", what) : "";
  if (FamilyType found = family_of_model_type(type, true); has_type && found.family) return found;
  if (json_has_value(c, "architectures")) {
    const auto names = json_field<std::vector<std::string>>(c, "architectures", what);
    GPT_INPUT_CHECK(names.size() == 1, what << ": architectures must name one architecture (got "
                                            << names.size() << ")");
    for (const ModelFamily* family : model_families())
      for (const HfArchitecture& a : family->hf->architectures)
        if (names[0] == a.architecture) return {family, a.model_type};
    fail_input(what + ": architectures " + quoted_excerpt(names[0]) +
               " is not one this project reads (" + known_architectures() + ")");
  }
  if (!has_type)
    for (const ModelFamily* family : model_families())
      if (family->hf->model_type_decides) return {family, family->hf->architectures[0].model_type};
  if (FamilyType found = family_of_model_type(type, false); found.family) return found;
  fail_input(what + ": model_type " + quoted_excerpt(type) + " is not one this project reads (" +
             known_architectures() + ")");
}

}  // namespace

HfModel read_hf_config(const Json& config, const std::string& what, int64_t seq_len) {
  const FamilyType found = hf_family(config, what);
  return {found.family, found.model_type,
          found.family->hf->read_config(config, found.model_type, what, seq_len)};
}

HfModelWeights::HfModelWeights(const std::string& dir, const HfModel& hf,
                               const std::string& config_path)
    : files_(dir), format_(*hf.family->hf), model_(hf.model), config_path_(config_path) {
  const int64_t needed = model_.num_parameters(true);  // validated sizes: no overflow
  GPT_INPUT_CHECK(needed / 2 <= files_.total_values(),
                  config_path << "'s model needs " << needed << " parameters, more than twice the "
                              << files_.total_values() << " values " << files_.source()
                              << " holds");
  for (const std::string& name : files_.names()) {
    if (format_.is_buffer(name)) continue;
    const auto placed = stored_.emplace(format_.our_name(name), name);
    GPT_INPUT_CHECK(placed.second, files_.path_of(name)
                                       << ": tensor " << quoted_excerpt(name) << " is stored as "
                                       << placed.first->second << " too");
  }
}

void HfModelWeights::check(const ExpectedTensors& expected) const {
  for (const auto& entry : expected) {
    const std::string& ours = entry.first;
    const auto it = stored_.find(ours);
    GPT_INPUT_CHECK(it != stored_.end(), files_.source()
                                             << " has no tensor " << format_.hf_name(ours));
    const std::string& name = it->second;
    const std::vector<int64_t> shape =
        format_.transposed(ours) ? reversed(entry.second) : entry.second;
    GPT_INPUT_CHECK(files_.shape(name) == shape, files_.path_of(name)
                                                     << ": tensor " << name << " has shape "
                                                     << h5::shape_string(files_.shape(name))
                                                     << " but " << config_path_ << "'s model needs "
                                                     << h5::shape_string(shape));
  }
  const std::string embedding = family_of(model_).edge_parameters(model_).token_embedding;
  for (const auto& entry : stored_) {
    // Named references, not structured bindings: GPT_MSG's lambda captures them (clang 14, the
    // fuzz build's compiler, cannot capture a structured binding).
    const std::string &ours = entry.first, &name = entry.second;
    if (expected.count(ours)) continue;
    GPT_INPUT_CHECK(format_.hf_name(ours) == kHfHeadName && describe(model_).tied_head,
                    files_.path_of(name) << ": tensor " << quoted_excerpt(name)
                                         << " has no place in " << config_path_ << "'s model");
    // A tied model saved with its head: the head must be the embedding, or it is not tied.
    GPT_INPUT_CHECK(stored_.count(embedding) &&
                        files_.read(name).values == files_.read(stored_.at(embedding)).values,
                    files_.path_of(name)
                        << ": " << name << " differs from " << format_.hf_name(embedding)
                        << ", but " << config_path_ << "'s model ties them");
  }
}

HostTensor HfModelWeights::read(const std::string& ours) const {
  const auto it = stored_.find(ours);
  GPT_INPUT_CHECK(it != stored_.end(), files_.source()
                                           << " has no tensor " << format_.hf_name(ours));
  HostTensor t = files_.read(it->second);
  if (format_.transposed(ours) && t.shape.size() == 2) {
    t.values = transposed(t.values, t.shape);
    t.shape = reversed(t.shape);
  }
  return t;
}

std::vector<std::string> write_hf_model_weights(const std::string& dir,
                                                const CheckpointReader& reader,
                                                const ModelConfig& model,
                                                const std::map<std::string, std::string>& metadata,
                                                StoredDtype dtype, int64_t max_shard_bytes) {
  const HfFormat& format = *family_of(model).hf;
  std::vector<TensorToWrite> tensors;
  struct Source {
    std::string dataset;
    bool transpose;
  };
  std::map<std::string, Source> source_of;  // by Hugging Face's name
  for (const std::string& ours : reader.parameter_names()) {
    const std::string dataset = std::string(kModelDatasetPrefix) + ours;
    const std::vector<int64_t> shape = reader.shape(dataset);
    const bool transpose = format.transposed(ours) && shape.size() == 2;
    tensors.push_back({format.hf_name(ours), transpose ? reversed(shape) : shape});
    source_of[tensors.back().name] = {dataset, transpose};
  }
  return write_hf_weights(
      dir, tensors,
      [&](const TensorToWrite& t) {
        const Source& source = source_of.at(t.name);
        std::vector<float> values = reader.read_dataset(source.dataset);
        return source.transpose ? transposed(values, reader.shape(source.dataset)) : values;
      },
      metadata, dtype, max_shard_bytes);
}

}  // namespace gpt
