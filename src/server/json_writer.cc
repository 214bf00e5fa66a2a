#include "server/json_writer.h"

#include <charconv>
#include <cmath>

#include "core/check.h"
#include "tokenizer/utf8.h"

namespace vosti {
void append_json_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t len = utf8_sequence_length(s, i);
      if (len == 0) {
        out.append("\xEF\xBF\xBD");  // U+FFFD for an invalid byte
        ++i;
      } else {
        out.append(s.substr(i, len));
        i += len;
      }
      continue;
    }
    switch (c) {
      case '"':
        out.append("\\\"");
        break;
      case '\\':
        out.append("\\\\");
        break;
      case '\n':
        out.append("\\n");
        break;
      case '\r':
        out.append("\\r");
        break;
      case '\t':
        out.append("\\t");
        break;
      case '\b':
        out.append("\\b");
        break;
      case '\f':
        out.append("\\f");
        break;
      default:
        if (c < 0x20) {
          out.append("\\u00");
          out.push_back(kHex[c >> 4]);
          out.push_back(kHex[c & 15]);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
  out.push_back('"');
}

std::string float_to_shortest(float v) {
  if (!std::isfinite(v)) return "-9999.0";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), v);
  VOSTI_CHECK(res.ec == std::errc(), "to_chars(float) failed");
  return std::string(buf, res.ptr);
}

void JsonWriter::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!has_items_.empty()) {
    if (has_items_.back()) out_.push_back(',');
    has_items_.back() = true;
  }
}

JsonWriter& JsonWriter::begin_object() {
  before_value();
  out_.push_back('{');
  has_items_.push_back(false);
  return *this;
}

JsonWriter& JsonWriter::end_object() {
  VOSTI_CHECK(!has_items_.empty() && !after_key_, "JsonWriter: unbalanced end_object");
  has_items_.pop_back();
  out_.push_back('}');
  return *this;
}

JsonWriter& JsonWriter::begin_array() {
  before_value();
  out_.push_back('[');
  has_items_.push_back(false);
  return *this;
}

JsonWriter& JsonWriter::end_array() {
  VOSTI_CHECK(!has_items_.empty() && !after_key_, "JsonWriter: unbalanced end_array");
  has_items_.pop_back();
  out_.push_back(']');
  return *this;
}

JsonWriter& JsonWriter::key(std::string_view name) {
  VOSTI_CHECK(!has_items_.empty() && !after_key_, "JsonWriter: key outside an object");
  if (has_items_.back()) out_.push_back(',');
  has_items_.back() = true;
  append_json_string(out_, name);
  out_.push_back(':');
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view s) {
  before_value();
  append_json_string(out_, s);
  return *this;
}

JsonWriter& JsonWriter::value(int64_t v) {
  before_value();
  out_.append(std::to_string(v));
  return *this;
}

JsonWriter& JsonWriter::value(uint64_t v) {
  before_value();
  out_.append(std::to_string(v));
  return *this;
}

JsonWriter& JsonWriter::value(float v) {
  before_value();
  out_.append(float_to_shortest(v));
  return *this;
}

JsonWriter& JsonWriter::value(bool v) {
  before_value();
  out_.append(v ? "true" : "false");
  return *this;
}

JsonWriter& JsonWriter::null() {
  before_value();
  out_.append("null");
  return *this;
}

JsonWriter& JsonWriter::raw(std::string_view json) {
  before_value();
  out_.append(json);
  return *this;
}

}  // namespace vosti
