// last_of_each and store_config_file (see config_file.h).
#include "launch/programs/config_file.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "framework/check.h"

namespace gpt {

namespace po = boost::program_options;

po::parsed_options last_of_each(po::parsed_options parsed) {
  std::vector<po::option>& options = parsed.options;
  std::vector<po::option> kept;
  for (size_t i = 0; i < options.size(); ++i) {
    const bool repeated_later = std::any_of(
        options.begin() + static_cast<std::ptrdiff_t>(i) + 1, options.end(),
        [&](const po::option& later) { return later.string_key == options[i].string_key; });
    if (!repeated_later) kept.push_back(options[i]);
  }
  options = std::move(kept);
  return parsed;
}

void store_config_file(std::istream& in, const std::string& path,
                       const po::options_description& desc, po::variables_map& vm) {
  try {
    // The command line, stored first, wins.
    po::store(last_of_each(po::parse_config_file(in, desc)), vm);
  } catch (const po::error& e) {
    fail_input("--config " + path + ": " + e.what());
  }
}

}  // namespace gpt
