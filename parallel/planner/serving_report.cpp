// plan --serve's output (see serving_report.h).
#include "parallel/planner/serving_report.h"

#include <cstdio>
#include <functional>
#include <sstream>

namespace gpt {
namespace {

std::string layout_name(const PlanLayout& l) {
  return "tp" + std::to_string(l.tp) + " x pp" + std::to_string(l.pp);
}

bool fits(const ServedLayout& s) {
  return s.prediction.max_sequences > 0;
}

// The fitting layout that `better` ranks first, or nullptr.
const ServedLayout* best_by(
    const std::vector<ServedLayout>& served,
    const std::function<bool(const ServedLayout&, const ServedLayout&)>& better) {
  const ServedLayout* best = nullptr;
  for (const ServedLayout& s : served)
    if (fits(s) && (best == nullptr || better(s, *best))) best = &s;
  return best;
}

}  // namespace

std::vector<ServedLayout> price_serving(const ServingSetup& base,
                                        const std::vector<PlanLayout>& layouts,
                                        const ServingRequest& request,
                                        const std::vector<int64_t>& concurrency) {
  std::vector<ServedLayout> served;
  for (const PlanLayout& l : layouts) {
    ServingSetup setup = base;
    setup.layout = l;
    served.push_back({l, predict_serving(setup, request, concurrency)});
  }
  return served;
}

std::string serving_table(const std::vector<ServedLayout>& served) {
  std::ostringstream out;
  char cell[256];
  std::snprintf(cell, sizeof cell, "%-12s %4s %8s %7s %9s %9s", "layout", "gpus", "wgt GB",
                "max seq", "TTFT ms", "TPOT ms");
  out << cell;
  if (!served.empty())
    for (const ThroughputAt& t : served.front().prediction.throughput) {
      std::snprintf(cell, sizeof cell, " %11s", ("tok/s@" + std::to_string(t.concurrency)).c_str());
      out << cell;
    }
  out << "\n";
  for (const ServedLayout& s : served) {
    const ServingPrediction& p = s.prediction;
    std::snprintf(cell, sizeof cell, "%-12s %4d %8.2f %7lld", layout_name(s.layout).c_str(),
                  s.layout.tp * s.layout.pp, p.weight_bytes / kGB,
                  static_cast<long long>(p.max_sequences));
    out << cell;
    if (!fits(s)) {
      out << "  does not fit: the weights leave no room for one sequence's cache\n";
      continue;
    }
    std::snprintf(cell, sizeof cell, " %9.3f %9.3f", p.ttft_s * 1e3, p.tpot_s * 1e3);
    out << cell;
    for (const ThroughputAt& t : p.throughput) {
      // A concurrency the cache cannot hold runs at the most it can, marked *.
      std::snprintf(cell, sizeof cell, " %10.0f%s", t.tokens_per_s,
                    t.running < t.concurrency ? "*" : " ");
      out << cell;
    }
    out << "\n";
  }
  return out.str();
}

Json serving_json(const ServedLayout& s) {
  const ServingPrediction& p = s.prediction;
  Json throughput = Json::array();
  for (const ThroughputAt& t : p.throughput)
    throughput.push_back(
        {{"concurrency", t.concurrency}, {"running", t.running}, {"tokens_per_s", t.tokens_per_s}});
  return {{"tp", s.layout.tp},
          {"pp", s.layout.pp},
          {"gpus", s.layout.tp * s.layout.pp},
          {"weight_bytes_per_gpu", p.weight_bytes},
          {"max_sequences", p.max_sequences},
          {"fits", fits(s)},
          {"ttft_s", p.ttft_s},
          {"tpot_s", p.tpot_s},
          {"throughput", throughput}};
}

std::string serving_best(const std::vector<ServedLayout>& served) {
  std::ostringstream out;
  const ServedLayout* ttft = best_by(served, [](const ServedLayout& a, const ServedLayout& b) {
    return a.prediction.ttft_s < b.prediction.ttft_s;
  });
  if (ttft == nullptr) return "no layout fits the model's weights\n";
  const ServedLayout* tpot = best_by(served, [](const ServedLayout& a, const ServedLayout& b) {
    return a.prediction.tpot_s < b.prediction.tpot_s;
  });
  out << "lowest TTFT: " << layout_name(ttft->layout)
      << "; lowest TPOT: " << layout_name(tpot->layout) << "\n";
  const size_t levels = served.front().prediction.throughput.size();
  for (size_t i = 0; i < levels; ++i) {
    const ServedLayout* most = best_by(served, [i](const ServedLayout& a, const ServedLayout& b) {
      return a.prediction.throughput[i].tokens_per_s > b.prediction.throughput[i].tokens_per_s;
    });
    out << "highest throughput at concurrency " << most->prediction.throughput[i].concurrency
        << ": " << layout_name(most->layout) << "\n";
  }
  return out.str();
}

}  // namespace gpt
