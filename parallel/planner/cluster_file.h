// The INI cluster file (docs/PLANNER.md, "The cluster file"): reading it into a Cluster, with a
// one-line error naming the file, the line and the key for anything malformed, and writing a
// Cluster back as the text that reads to the same cluster (what plan --calibrate writes).
#pragma once

#include <string>

#include "parallel/planner/cluster.h"

namespace gpt {

// The cluster file's text of `cluster` (every figure, curves included), which
// parse_cluster_file reads back to the same cluster.
std::string cluster_file_text(const Cluster& cluster);

// Parses a cluster file's text (INI, docs/PLANNER.md); errors name `what` and the line.
Cluster parse_cluster_file(const std::string& text, const std::string& what);
}  // namespace gpt
