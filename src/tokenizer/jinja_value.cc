// GCC 12 reports a false -Wrestrict inside std::string's operator+ (GCC bug 105329).
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include "tokenizer/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace vosti::jinja {

Value Value::undefined(std::string hint) {
  Value v;
  v.s_ = std::move(hint);
  return v;
}

Value Value::none() {
  Value v;
  v.type_ = Type::kNone;
  return v;
}

Value::Value(bool b) : type_(Type::kBool), b_(b) {}
Value::Value(int64_t i) : type_(Type::kInt), i_(i) {}
Value::Value(double d) : type_(Type::kFloat), d_(d) {}
Value::Value(std::string s) : type_(Type::kString), s_(std::move(s)) {}

Value Value::list(List items) {
  Value v;
  v.type_ = Type::kList;
  v.list_ = std::make_shared<List>(std::move(items));
  return v;
}

Value Value::dict(Dict items, bool is_namespace) {
  Value v;
  v.type_ = Type::kDict;
  v.is_namespace_ = is_namespace;
  v.dict_ = std::make_shared<Dict>(std::move(items));
  return v;
}

Value Value::function(std::string name, Function f) {
  Value v;
  v.type_ = Type::kFunction;
  v.s_ = std::move(name);
  v.fn_ = std::make_shared<Function>(std::move(f));
  return v;
}

template <typename Json>
Value value_from_json(const Json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return Value::none();
    case nlohmann::json::value_t::boolean:
      return Value(j.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return Value(static_cast<int64_t>(j.template get<uint64_t>()));
    case nlohmann::json::value_t::number_float:
      return Value(j.template get<double>());
    case nlohmann::json::value_t::string:
      return Value(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      List items;
      for (const auto& e : j) items.push_back(value_from_json(e));
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Dict items;
      for (const auto& [k, e] : j.items()) items.emplace_back(k, value_from_json(e));
      return Value::dict(std::move(items));
    }
    default:
      return Value();
  }
}

Value Value::from_json(const nlohmann::json& j) { return value_from_json(j); }
Value Value::from_json(const nlohmann::ordered_json& j) { return value_from_json(j); }

bool Value::truthy() const {
  switch (type_) {
    case Type::kUndefined:
    case Type::kNone:
      return false;
    case Type::kBool:
      return b_;
    case Type::kInt:
      return i_ != 0;
    case Type::kFloat:
      return d_ != 0.0;
    case Type::kString:
      return !s_.empty();
    case Type::kList:
      return !list_->empty();
    case Type::kDict:
      return !dict_->empty();
    case Type::kFunction:
      return true;
  }
  return false;
}

std::string python_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);  // "-1.2345e+05"
  const size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  const int exp = std::stoi(sci.substr(e + 1));
  const bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits.push_back(c);
  std::string out;
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      if (static_cast<int>(digits.size()) <= exp + 1) {
        out = digits + std::string(static_cast<size_t>(exp + 1) - digits.size(), '0') + ".0";
      } else {
        out = digits.substr(0, static_cast<size_t>(exp + 1)) + "." + digits.substr(static_cast<size_t>(exp + 1));
      }
    } else {
      out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) {
      out += '.';
      out += digits.substr(1);
    }
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += eb;
  }
  return neg ? "-" + out : out;
}

namespace {

std::string python_str_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\\')
      out += "\\\\";
    else if (c == quote)
      out += std::string("\\") + quote;
    else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", u);
      out += buf;
    } else {
      out.push_back(c);
    }
  }
  out.push_back(quote);
  return out;
}

void json_string(std::string& out, const std::string& s) {
  out.push_back('"');
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (u < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", u);
          out += buf;
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

}  // namespace

std::string Value::to_str() const {
  switch (type_) {
    case Type::kUndefined:
      return "";
    case Type::kString:
      return s_;
    default:
      return repr();
  }
}

std::string Value::repr() const {
  switch (type_) {
    case Type::kUndefined:
      return "";
    case Type::kNone:
      return "None";
    case Type::kBool:
      return b_ ? "True" : "False";
    case Type::kInt:
      return std::to_string(i_);
    case Type::kFloat:
      return python_float_repr(d_);
    case Type::kString:
      return python_str_repr(s_);
    case Type::kList: {
      std::string out = "[";
      for (size_t i = 0; i < list_->size(); ++i) out += (i ? ", " : "") + (*list_)[i].repr();
      return out + "]";
    }
    case Type::kDict: {
      std::string out = is_namespace_ ? "<Namespace {" : "{";
      for (size_t i = 0; i < dict_->size(); ++i) {
        out += (i ? ", " : "") + python_str_repr((*dict_)[i].first) + ": " + (*dict_)[i].second.repr();
      }
      return out + (is_namespace_ ? "}>" : "}");
    }
    case Type::kFunction:
      return "<function " + s_ + ">";
  }
  return "";
}

void Value::dump_json(std::string& out, int indent, int depth, bool sort_keys) const {
  auto newline = [&](int d) {
    if (indent < 0) return;
    out.push_back('\n');
    out.append(static_cast<size_t>(indent * d), ' ');
  };
  const char* item_sep = indent < 0 ? ", " : ",";
  switch (type_) {
    case Type::kUndefined:
      throw TemplateError("tojson: cannot serialize an undefined value (" + s_ + ")");
    case Type::kNone:
      out += "null";
      return;
    case Type::kBool:
      out += b_ ? "true" : "false";
      return;
    case Type::kInt:
      out += std::to_string(i_);
      return;
    case Type::kFloat:
      out += std::isnan(d_) ? "NaN" : std::isinf(d_) ? (d_ > 0 ? "Infinity" : "-Infinity") : python_float_repr(d_);
      return;
    case Type::kString:
      json_string(out, s_);
      return;
    case Type::kList:
      if (list_->empty()) {
        out += "[]";
        return;
      }
      out.push_back('[');
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i) out += item_sep;
        newline(depth + 1);
        (*list_)[i].dump_json(out, indent, depth + 1, sort_keys);
      }
      newline(depth);
      out.push_back(']');
      return;
    case Type::kDict: {
      if (dict_->empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : *dict_) items.push_back(&kv);
      if (sort_keys) std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
      out.push_back('{');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        newline(depth + 1);
        json_string(out, items[i]->first);
        out += ": ";
        items[i]->second.dump_json(out, indent, depth + 1, sort_keys);
      }
      newline(depth);
      out.push_back('}');
      return;
    }
    case Type::kFunction:
      throw TemplateError("tojson: cannot serialize a function");
  }
}

std::string Value::to_json(int indent, bool sort_keys) const {
  std::string out;
  dump_json(out, indent, 0, sort_keys);
  return out;
}

std::string Value::type_name() const {
  switch (type_) {
    case Type::kUndefined:
      return "Undefined";
    case Type::kNone:
      return "NoneType";
    case Type::kBool:
      return "bool";
    case Type::kInt:
      return "int";
    case Type::kFloat:
      return "float";
    case Type::kString:
      return "str";
    case Type::kList:
      return "list";
    case Type::kDict:
      return is_namespace_ ? "Namespace" : "dict";
    case Type::kFunction:
      return "function";
  }
  return "?";
}

Value* Value::find(const std::string& key) const {
  for (auto& kv : *dict_) {
    if (kv.first == key) return &kv.second;
  }
  return nullptr;
}

void Value::set(const std::string& key, Value v) const {
  if (Value* existing = find(key)) {
    *existing = std::move(v);
  } else {
    dict_->emplace_back(key, std::move(v));
  }
}

bool operator==(const Value& a, const Value& b) {
  using T = Value::Type;
  const bool a_num = a.is_number() || a.type() == T::kBool;
  const bool b_num = b.is_number() || b.type() == T::kBool;
  if (a_num && b_num) {
    auto num = [](const Value& v) { return v.type() == T::kBool ? (v.as_bool() ? 1.0 : 0.0) : v.as_double(); };
    if (a.type() == T::kInt && b.type() == T::kInt) return a.as_int() == b.as_int();
    return num(a) == num(b);
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case T::kUndefined:
    case T::kNone:
      return true;
    case T::kString:
      return a.str_ref() == b.str_ref();
    case T::kList:
      return a.list_ref() == b.list_ref();
    case T::kDict: {
      if (a.dict_ref().size() != b.dict_ref().size()) return false;
      for (const auto& [k, v] : a.dict_ref()) {
        const Value* other = b.find(k);
        if (other == nullptr || !(*other == v)) return false;
      }
      return true;
    }
    case T::kFunction:
      return a.fn_ == b.fn_;
    default:
      return false;
  }
}

Value CallArgs::get(size_t index, const std::string& name, Value fallback) const {
  for (const auto& [k, v] : keyword) {
    if (k == name) return v;
  }
  if (index < positional.size()) return positional[index];
  return fallback;
}

}  // namespace vosti::jinja
