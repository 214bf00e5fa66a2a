// GgufValue conversions and display; the parser is in gguf.cc.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

#include "io/gguf.h"

namespace vosti {
namespace {

constexpr size_t kMaxDisplayStringBytes = 80;

bool is_unsigned(GgufType t) {
  return t == GgufType::kUint8 || t == GgufType::kUint16 || t == GgufType::kUint32 || t == GgufType::kUint64;
}
bool is_signed(GgufType t) {
  return t == GgufType::kInt8 || t == GgufType::kInt16 || t == GgufType::kInt32 || t == GgufType::kInt64;
}

Status wrong_type(GgufType actual, const char* expected) {
  return invalid_argument("value is " + std::string(gguf_type_name(actual)) + ", expected " + expected);
}

// Shortest round-trip text, laid out like Python's repr (100000.0, 1e-05, 1e+16).
std::string format_double(double v) {
  char buf[400];
  const double a = std::fabs(v);
  const bool fixed = std::isfinite(v) && (a == 0 || (a >= 1e-4 && a < 1e16));
  auto res = fixed ? std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::fixed)
                   : std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, res.ptr);
  if (fixed && s.find('.') == std::string::npos) s += ".0";
  return s;
}

// A quoted, escaped string, cut at kMaxDisplayStringBytes (never inside a UTF-8 sequence).
std::string quote(const std::string& s) {
  std::string out = "\"";
  size_t n = s.size();
  if (n > kMaxDisplayStringBytes) {
    n = kMaxDisplayStringBytes;
    while (n > 0 && (static_cast<uint8_t>(s[n]) & 0xC0) == 0x80) --n;
  }
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  if (n < s.size()) out += "...";
  return out;
}

}  // namespace

std::string_view gguf_type_name(GgufType type) {
  switch (type) {
    case GgufType::kUint8:
      return "uint8";
    case GgufType::kInt8:
      return "int8";
    case GgufType::kUint16:
      return "uint16";
    case GgufType::kInt16:
      return "int16";
    case GgufType::kUint32:
      return "uint32";
    case GgufType::kInt32:
      return "int32";
    case GgufType::kFloat32:
      return "float32";
    case GgufType::kBool:
      return "bool";
    case GgufType::kString:
      return "string";
    case GgufType::kArray:
      return "array";
    case GgufType::kUint64:
      return "uint64";
    case GgufType::kInt64:
      return "int64";
    case GgufType::kFloat64:
      return "float64";
  }
  return "unknown";
}

Result<int64_t> GgufValue::as_int() const {
  if (is_unsigned(type)) {
    const uint64_t v = std::get<uint64_t>(value);
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return out_of_range("value " + std::to_string(v) + " does not fit in int64");
    }
    return static_cast<int64_t>(v);
  }
  if (is_signed(type)) return std::get<int64_t>(value);
  return wrong_type(type, "an integer");
}

Result<double> GgufValue::as_double() const {
  if (type == GgufType::kFloat32 || type == GgufType::kFloat64) return std::get<double>(value);
  if (is_unsigned(type)) return static_cast<double>(std::get<uint64_t>(value));
  if (is_signed(type)) return static_cast<double>(std::get<int64_t>(value));
  return wrong_type(type, "a number");
}

Result<bool> GgufValue::as_bool() const {
  if (type == GgufType::kBool) return std::get<bool>(value);
  return wrong_type(type, "bool");
}

Result<std::string> GgufValue::as_string() const {
  if (type == GgufType::kString) return std::get<std::string>(value);
  return wrong_type(type, "string");
}

std::string GgufValue::to_display_string(size_t max_items) const {
  if (is_unsigned(type)) return std::to_string(std::get<uint64_t>(value));
  if (is_signed(type)) return std::to_string(std::get<int64_t>(value));
  switch (type) {
    case GgufType::kFloat32:
    case GgufType::kFloat64:
      return format_double(std::get<double>(value));
    case GgufType::kBool:
      return std::get<bool>(value) ? "true" : "false";
    case GgufType::kString:
      return quote(std::get<std::string>(value));
    default:
      break;
  }
  const auto& arr = std::get<GgufArray>(value);
  std::string out;
  const bool summarised = arr.items.size() > max_items;
  if (summarised) {
    out += '[';
    out += gguf_type_name(arr.element_type);
    out += " x ";
    out += std::to_string(arr.items.size());
    out += "] ";
  }
  out += "[";
  const size_t shown = summarised ? max_items : arr.items.size();
  for (size_t i = 0; i < shown; ++i) {
    if (i > 0) out += ", ";
    out += arr.items[i].to_display_string(max_items / 2 > 0 ? max_items / 2 : 1);
  }
  if (summarised)
    out += shown > 0 ? ", ...]" : "...]";
  else
    out += "]";
  return out;
}

}  // namespace vosti
