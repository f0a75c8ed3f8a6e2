// last_of_each and store_config_file (see config_file.h).
#include "launch/programs/config_file.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "framework/check.h"
#include "framework/json.h"

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

namespace {

// Boost fills its message's placeholders (%value%, %original_token%, ...) until none is left,
// so a name or value holding one ("n-layer%value%") makes what() loop forever (Boost 1.74).
// Reaching the protected substitutions through a member pointer lets the file's text go into
// the message with each '%' shown as \x25.
struct SubstitutionsOf : po::error_with_option_name {
  static std::map<std::string, std::string> po::error_with_option_name::*member() {
    return &SubstitutionsOf::m_substitutions;
  }
};

void escape_placeholders(po::error_with_option_name& e) {
  for (auto& entry : e.*SubstitutionsOf::member()) {
    std::string& text = entry.second;
    for (size_t at = text.find('%'); at != std::string::npos; at = text.find('%', at + 4))
      text.replace(at, 1, "\\x25");
  }
}

}  // namespace

std::string option_error_message(po::error& e) {
  if (auto* named = dynamic_cast<po::error_with_option_name*>(&e)) escape_placeholders(*named);
  return shown_excerpt(e.what(), 300);
}

void store_config_file(std::istream& in, const std::string& path,
                       const po::options_description& desc, po::variables_map& vm) {
  try {
    // The command line, stored first, wins.
    po::store(last_of_each(po::parse_config_file(in, desc)), vm);
  } catch (po::error& e) {
    fail_input("--config " + path + ": " + option_error_message(e));
  }
}

}  // namespace gpt
