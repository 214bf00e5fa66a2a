// JsonWriter: builds one JSON text by appending tokens, for the server's responses.
//
// Why not nlohmann::json for output: floats must print in their shortest round-trip
// form *as floats* (std::to_chars(float)), so that comparing two JSON responses
// compares the bits of the logprobs; and SSE chunks are built on a hot path.
// Invariants: strings are emitted as valid UTF-8 (an invalid byte becomes U+FFFD);
// non-finite floats become -9999.0 (vLLM's convention for -inf logprobs).
// The caller nests begin/end calls correctly (checked with VOSTI_CHECK).
// Thread safety: a value type.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vosti {

class JsonWriter {
 public:
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  // Emits `"name":`; the next call must write its value.
  JsonWriter& key(std::string_view name);
  JsonWriter& value(std::string_view s);
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(const std::string& s) { return value(std::string_view(s)); }
  JsonWriter& value(int64_t v);
  JsonWriter& value(int32_t v) { return value(static_cast<int64_t>(v)); }
  JsonWriter& value(uint64_t v);
  JsonWriter& value(float v);  // shortest round-trip form of the float
  JsonWriter& value(bool v);
  JsonWriter& null();
  // Emits already-serialised JSON as one value. REQUIRES: `json` is valid JSON.
  JsonWriter& raw(std::string_view json);

  const std::string& str() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  void before_value();

  std::string out_;
  std::vector<bool> has_items_;  // one per open object/array: a comma is due
  bool after_key_ = false;
};

// Appends `s` as a JSON string literal (quoted, escaped, invalid UTF-8 -> U+FFFD).
void append_json_string(std::string& out, std::string_view s);
// Shortest text that parses back to exactly `v` (std::to_chars); non-finite -> "-9999.0".
std::string float_to_shortest(float v);

}  // namespace vosti
