// plan --serve's output (docs/PLANNER.md, "Serving"): each served layout's prediction as a table
// row (weights per GPU, the sequences its cache holds, TTFT, TPOT of a lone request, throughput at
// each concurrency) or as one JSON object, and the line that names the best layout of each.
#pragma once

#include <string>
#include <vector>

#include "framework/json.h"
#include "parallel/planner/serving_model.h"

namespace gpt {

struct ServedLayout {
  PlanLayout layout;
  ServingPrediction prediction;
};

// Every layout's prediction, in the order given.
std::vector<ServedLayout> price_serving(const ServingSetup& base,
                                        const std::vector<PlanLayout>& layouts,
                                        const ServingRequest& request,
                                        const std::vector<int64_t>& concurrency);

std::string serving_table(const std::vector<ServedLayout>& served);
// The object `plan --serve --json` prints for one layout.
Json serving_json(const ServedLayout& s);
// Which layout has the lowest TTFT, the lowest TPOT and the highest throughput at each
// concurrency (among those whose weights fit), one line each.
std::string serving_best(const std::vector<ServedLayout>& served);

}  // namespace gpt
