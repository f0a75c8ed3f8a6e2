// Building a Runtime for a model stored in a checkpoint (eval, generate): the model shape comes
// from the file's config attribute, the layout from the program's options; the weights are loaded
// into whatever layout that is.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>

#include "framework/json.h"
#include "launch/runtime/runtime.h"

namespace gpt {

struct LoadedModel {
  std::unique_ptr<Runtime> runtime;
  std::string tokenizer;
  std::string data;      // the training data set the run used ("" = the built-in corpus)
  std::string val_data;  // its validation set ("" = none, or the built-in split)
  int64_t step = 0;
  std::string path;  // the checkpoint file read
  Json hf_extras;    // what an import kept of its Hugging Face files (framework/io/hf_extras.h)
};

// Collective over world; errors are agreed across ranks (AgreedError).
// seq_len (0 = the checkpoint's) chooses another window: shorter for GPT-2 (its first learned
// positions), any for the Llama family (rotary positions).
LoadedModel load_model_for_inference(MPI_Comm world, const std::string& checkpoint_path,
                                     RuntimeOptions options, int64_t seq_len = 0);

}  // namespace gpt
