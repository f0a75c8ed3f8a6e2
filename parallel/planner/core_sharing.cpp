// The core-sharing adapter (see core_sharing.h): the share of a node's cores, the measured scales
// and turns of a calibrated CPU cluster (cluster.h, CpuModel), and Open MPI's libnbc collectives.
#include "parallel/planner/core_sharing.h"

#include <algorithm>
#include <cmath>

#include "framework/check.h"

namespace gpt {

double libnbc_seconds(const LinkModel& link, Collective op, double bytes, int ranks) {
  if (ranks <= 1 || bytes <= 0) return 0;
  const double rounds = std::ceil(std::log2(ranks));
  const double whole = link.latency + bytes / link.one_way_bandwidth(bytes);
  switch (op) {
    case Collective::kAllReduce:
      return 2 * rounds * whole;
    case Collective::kReduceScatter: {
      const double block = bytes / ranks;
      return rounds * whole + (ranks - 1) * (link.latency + block / link.one_way_bandwidth(block));
    }
    case Collective::kAllGather:
      return collective_seconds(link, op, bytes, ranks);
  }
  return 0;
}

int libnbc_rounds(Collective op, int ranks) {
  if (ranks <= 1) return 0;
  const int log_rounds = static_cast<int>(std::ceil(std::log2(ranks)));
  switch (op) {
    case Collective::kAllReduce:
      return 2 * log_rounds;
    case Collective::kReduceScatter:
      return log_rounds + ranks - 1;
    case Collective::kAllGather:
      return ranks - 1;
  }
  return 0;
}

CoreSharing::CoreSharing(const CpuModel& cpu, double share, double micro_batch, double stage_layers)
    : cpu_(&cpu),
      share_(share),
      micro_batch_(micro_batch),
      shared_stage_(share * cpu.sharing_at(share, micro_batch) *
                    cpu.stage_at(stage_layers, micro_batch)),
      turn_(cpu.turn_at(share, micro_batch)) {}

double CoreSharing::stretch_pass(double seconds, ActionKind pass) const {
  if (cpu_ == nullptr) return seconds;
  const CpuModel::ScaleCurve* scale = nullptr;
  switch (pass) {
    case ActionKind::kForward:
      scale = &cpu_->forward_scale;
      break;
    case ActionKind::kBackwardInput:
      scale = &cpu_->backward_input_scale;
      break;
    case ActionKind::kBackwardWeight:
      scale = &cpu_->backward_weight_scale;
      break;
    case ActionKind::kBackward:
      GPT_CHECK(false, "stretch_pass prices the backward's two halves apart");
  }
  return seconds * (shared_stage_ * CpuModel::scale_at(*scale, micro_batch_));
}

ChunkCosts CoreSharing::stretch_chunk(ChunkCosts costs, const LinkModel& tp_link) const {
  for (auto [pass, kind] : {std::pair{&costs.forward, ActionKind::kForward},
                            std::pair{&costs.backward_input, ActionKind::kBackwardInput},
                            std::pair{&costs.backward_weight, ActionKind::kBackwardWeight}}) {
    pass->compute = stretch_pass(pass->compute, kind);
    pass->tp_exposed = stretch_transfer(pass->tp_exposed, tp_link);
  }
  return costs;
}

double CoreSharing::nonblocking(const LinkModel& link, Collective op, double bytes,
                                int ranks) const {
  if (cpu_ == nullptr) return collective_seconds(link, op, bytes, ranks);
  return exchange(libnbc_seconds(link, op, bytes, ranks), link, libnbc_rounds(op, ranks));
}

CoreSharing core_sharing(const ModelConfig& m, const Cluster& cluster, const PlanLayout& l,
                         int stage) {
  if (!cluster.cpu.active()) return {};
  const int ranks = ranks_per_node(cluster, l.world(), l.placement);
  const double share =
      std::max(1.0, static_cast<double>(ranks) * cluster.cpu.threads / cluster.cpu.cores);
  double stage_layers = static_cast<double>(m.n_layer) / l.pp;
  if (stage >= 0) {
    int64_t held = 0;
    for (int chunk = 0; chunk < l.virtual_stages; ++chunk) held += l.chunk_layers(m, stage, chunk);
    // A stage of the embedding or head alone is priced as one of a single layer: the scale's
    // measured range starts there.
    stage_layers = static_cast<double>(std::max<int64_t>(held, 1));
  }
  return {cluster.cpu, share, static_cast<double>(l.micro_batch), stage_layers};
}

}  // namespace gpt
