// Flat JSON objects (string, integer and real values; no nesting): the metrics lines, the
// checkpoint's `config` attribute and reading that attribute back on resume. Reals are written
// with 17 significant digits so a value survives a round trip exactly.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace gpt {

class JsonObject {
 public:
  JsonObject& add(const std::string& key, const std::string& value);
  JsonObject& add(const std::string& key, const char* value) {
    return add(key, std::string(value));
  }
  JsonObject& add(const std::string& key, double value);
  JsonObject& add(const std::string& key, int64_t value);
  JsonObject& add(const std::string& key, int value) {
    return add(key, static_cast<int64_t>(value));
  }
  JsonObject& add(const std::string& key, uint64_t value);
  JsonObject& add(const std::string& key, bool value);
  std::string str() const;

 private:
  std::vector<std::pair<std::string, std::string>> fields_;  // key, encoded value
};

// Parses a flat object into key -> value text (strings unquoted and unescaped). Throws a
// gpt::Error naming `what` when the text is not such an object.
std::map<std::string, std::string> parse_flat_json(const std::string& text,
                                                   const std::string& what);

}  // namespace gpt
