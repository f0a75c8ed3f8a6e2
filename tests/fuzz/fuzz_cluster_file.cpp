// Fuzzes parse_cluster_file (parallel/planner/cluster_file.h): plan's INI cluster file (sections,
// keys, numbers, curves), and that the text it writes of what it read reads back.
#include "parallel/planner/cluster_file.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  gpt::fuzz::expect_success_or_input_error([&] {
    const gpt::Cluster cluster = gpt::parse_cluster_file(text, "cluster.ini");
    // What the cluster file's writer makes of it reads back (cluster_file.h's promise).
    const std::string again = gpt::cluster_file_text(cluster);
    try {
      (void)gpt::parse_cluster_file(again, "written.ini");
    } catch (const gpt::Error& e) {
      gpt::fuzz::finding(std::string("the written cluster file does not read back: ") + e.what());
    }
  });
  return 0;
}
