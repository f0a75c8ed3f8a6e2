// The options every program shares (docs/DESIGN.md "Programs": the names are a contract): the
// execution options (--device, --precision, --threads, ...), the model's shape and its preset
// (the model families', framework/families/), and --pipeline-layers. Each program adds them to
// its own description and checks them after parsing; a broken rule is a one-line gpt::Error
// naming the option.
#pragma once

#include <optional>
#include <set>
#include <string>

#include <boost/program_options.hpp>

#include "framework/config.h"
#include "launch/runtime/runtime.h"
#include "parallel/layout.h"

namespace gpt {

// --pipeline-layers (train, eval, generate): `even`, `auto`, or the blocks of each model chunk in
// model order (pp x virtual-stages counts). Parsed into `layout` here; Layout::validate checks
// them against the model.
inline constexpr const char* kPipelineLayersHelp =
    "blocks per pipeline stage: even; auto (train: the split the cost and memory models find "
    "fastest, on --cluster; eval and generate: the split the checkpoint was trained with, where "
    "it fits this layout, else even); or comma-separated counts in model order, e.g. 3,5 (with "
    "--virtual-stages v, pp x v counts: stage 0's first chunk, stage 1's, ..., then each stage's "
    "second chunk; 0 allowed beside the embedding and the head)";
void set_pipeline_layers(Layout& layout, const std::string& text);

// The layout options train and plan share, bound to `layout` (and --pipeline-layers to
// `pipeline_layers`): --tp, --pp, --dp, --schedule, --virtual-stages, --pipeline-layers,
// --micro-batch-size, --sequence-parallel, --recompute, --recompute-layers,
// --distributed-optimizer and --grad-reduce-dtype. kDefaults (train): each shows the layout's
// value as its default and the switches are flags. kEnumerated (plan): none has a default, since
// one left out is enumerated, and a switch given =false is fixed off.
enum class LayoutOptionStyle { kDefaults, kEnumerated };
void add_layout_options(boost::program_options::options_description& desc, Layout& layout,
                        std::string& pipeline_layers, LayoutOptionStyle style);

// --device, --precision (bound to `precision`, a layout's), --deterministic, --gpu-comm,
// --memory-limit-gb, --threads: shared by train, eval and generate; validated by
// validate_execution_options.
void add_execution_options(boost::program_options::options_description& desc,
                           ExecutionOptions& options, std::optional<PrecisionRegime>& precision);
void validate_execution_options(const ExecutionOptions& options);

// The model options train and plan share: --model (bound to `preset`), --n-layer, --n-head,
// --d-model and --seq-len (bound to `model`, whose values are the defaults), and --vocab-size
// where `vocab_size_help` is given; `seq_len_help` says what --seq-len is to the program.
void add_model_options(boost::program_options::options_description& desc, std::string& preset,
                       ModelConfig& model, const char* seq_len_help,
                       const char* vocab_size_help = nullptr);
// After parsing: --model's preset (none when empty; the model families' presets,
// framework/families/) applied to the shape options not in `given`.
void apply_model_preset(const std::string& preset, const std::set<std::string>& given,
                        ModelConfig& model);

}  // namespace gpt
