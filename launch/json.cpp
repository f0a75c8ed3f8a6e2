// Flat JSON writing and parsing (see json.h).
#include "launch/json.h"

#include <cctype>
#include <cmath>
#include <cstdio>

#include "framework/check.h"

namespace gpt {
namespace {

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

JsonObject& JsonObject::add(const std::string& key, const std::string& value) {
  fields_.emplace_back(key, quote(value));
  return *this;
}

JsonObject& JsonObject::add(const std::string& key, double value) {
  if (!std::isfinite(value)) {  // JSON has no inf/nan: write them as null
    fields_.emplace_back(key, "null");
    return *this;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", value);
  fields_.emplace_back(key, buf);
  return *this;
}

JsonObject& JsonObject::add(const std::string& key, int64_t value) {
  fields_.emplace_back(key, std::to_string(value));
  return *this;
}

JsonObject& JsonObject::add(const std::string& key, uint64_t value) {
  fields_.emplace_back(key, std::to_string(value));
  return *this;
}

JsonObject& JsonObject::add(const std::string& key, bool value) {
  fields_.emplace_back(key, value ? "true" : "false");
  return *this;
}

std::string JsonObject::str() const {
  std::string out = "{";
  for (size_t i = 0; i < fields_.size(); ++i) {
    if (i > 0) out += ", ";
    out += quote(fields_[i].first) + ": " + fields_[i].second;
  }
  return out + "}";
}

std::map<std::string, std::string> parse_flat_json(const std::string& text,
                                                   const std::string& what) {
  std::map<std::string, std::string> out;
  size_t i = 0;
  auto skip_space = [&] {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  };
  auto bad = [&](const char* why) -> void {
    fail_input(what + ": not a flat JSON object (" + why + " at offset " + std::to_string(i) + ")");
  };
  auto read_string = [&]() {
    std::string s;
    if (i >= text.size() || text[i] != '"') bad("expected a string");
    ++i;
    while (i < text.size() && text[i] != '"') {
      if (text[i] == '\\' && i + 1 < text.size()) {
        ++i;
        if (text[i] == 'u' && i + 4 < text.size()) {
          s += static_cast<char>(std::stoi(text.substr(i + 1, 4), nullptr, 16));
          i += 4;
        } else {
          s += text[i] == 'n' ? '\n' : text[i] == 't' ? '\t' : text[i];
        }
      } else {
        s += text[i];
      }
      ++i;
    }
    if (i >= text.size()) bad("unterminated string");
    ++i;
    return s;
  };
  skip_space();
  if (i >= text.size() || text[i] != '{') bad("expected '{'");
  ++i;
  skip_space();
  if (i < text.size() && text[i] == '}') return out;
  while (true) {
    skip_space();
    std::string key = read_string();
    skip_space();
    if (i >= text.size() || text[i] != ':') bad("expected ':'");
    ++i;
    skip_space();
    std::string value;
    if (i < text.size() && text[i] == '"') {
      value = read_string();
    } else {
      size_t start = i;
      while (i < text.size() && text[i] != ',' && text[i] != '}' &&
             !std::isspace(static_cast<unsigned char>(text[i])))
        ++i;
      value = text.substr(start, i - start);
      if (value.empty()) bad("expected a value");
    }
    out[key] = value;
    skip_space();
    if (i < text.size() && text[i] == ',') {
      ++i;
      continue;
    }
    if (i < text.size() && text[i] == '}') return out;
    bad("expected ',' or '}'");
  }
}

}  // namespace gpt
