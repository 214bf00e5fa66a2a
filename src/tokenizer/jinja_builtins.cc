// Built-in filters, tests, str/dict methods and global functions of the chat-template
// interpreter, with the semantics of Jinja2 3.1 and Python 3 that HF templates rely on.
// GCC 12 reports a false -Wrestrict inside std::string's operator+ (GCC bug 105329).
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include <algorithm>
#include <cmath>
#include <ctime>
#include <optional>

#include "tokenizer/jinja_eval.h"
#include "tokenizer/utf8.h"

namespace vosti::jinja {
namespace {

std::u32string to_u32(const std::string& s) {
  std::u32string out;
  size_t pos = 0;
  while (pos < s.size()) out.push_back(next_code_point(s, pos));
  return out;
}

std::string from_u32(const std::u32string& s) {
  std::string out;
  for (char32_t c : s) append_utf8(out, c);
  return out;
}

bool py_space(char32_t c) { return is_unicode_whitespace(c) || (c >= 0x1C && c <= 0x1F); }

const std::string& need_string(const Value& v, const char* what) {
  if (!v.is_string())
    throw TemplateError(std::string("TypeError: ") + what + " expects a string, got " + v.type_name());
  return v.str_ref();
}

// Python str.strip/lstrip/rstrip(chars).
std::string py_strip(const std::string& s, const Value& chars, bool left, bool right) {
  const std::u32string u = to_u32(s);
  const bool default_ws = chars.is_none() || chars.is_undefined();
  const std::u32string set = default_ws ? std::u32string() : to_u32(need_string(chars, "strip"));
  auto strip_it = [&](char32_t c) { return default_ws ? py_space(c) : set.find(c) != std::u32string::npos; };
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && strip_it(u[b])) ++b;
  if (right)
    while (e > b && strip_it(u[e - 1])) --e;
  return from_u32(u.substr(b, e - b));
}

List py_split(const std::string& s, const Value& sep, int64_t maxsplit) {
  List out;
  if (sep.is_none() || sep.is_undefined()) {
    const std::u32string u = to_u32(s);
    size_t i = 0;
    while (true) {
      while (i < u.size() && py_space(u[i])) ++i;
      if (i >= u.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        std::u32string rest = u.substr(i);
        while (!rest.empty() && py_space(rest.back())) rest.pop_back();
        out.emplace_back(from_u32(rest));
        break;
      }
      size_t j = i;
      while (j < u.size() && !py_space(u[j])) ++j;
      out.emplace_back(from_u32(u.substr(i, j - i)));
      i = j;
    }
    return out;
  }
  const std::string& d = need_string(sep, "split");
  if (d.empty()) throw TemplateError("ValueError: empty separator");
  size_t pos = 0;
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    const size_t hit = s.find(d, pos);
    if (hit == std::string::npos) break;
    out.emplace_back(s.substr(pos, hit - pos));
    pos = hit + d.size();
  }
  out.emplace_back(s.substr(pos));
  return out;
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  std::string out;
  size_t pos = 0;
  int64_t n = 0;
  if (from.empty()) return s;  // Python inserts between characters; no template relies on it
  for (size_t hit; (count < 0 || n < count) && (hit = s.find(from, pos)) != std::string::npos; ++n) {
    out.append(s, pos, hit - pos);
    out += to;
    pos = hit + from.size();
  }
  out.append(s, pos, std::string::npos);
  return out;
}

std::string case_map(const std::string& s, int mode) {  // 0 lower, 1 upper, 2 title, 3 capitalize
  std::string out = s;
  bool start = true;
  for (size_t i = 0; i < out.size(); ++i) {
    char& c = out[i];
    const bool alpha = std::isalpha(static_cast<unsigned char>(c)) != 0;
    if (mode == 0 || (mode == 3 && i > 0))
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (mode == 1 || (mode == 3 && i == 0))
      c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    else if (mode == 2)
      c = static_cast<char>(start ? std::toupper(static_cast<unsigned char>(c))
                                  : std::tolower(static_cast<unsigned char>(c)));
    start = !alpha && (static_cast<unsigned char>(c) < 0x80);
  }
  return out;
}

Value attribute_of(const Value& v, const std::string& path) {
  Value cur = v;
  size_t pos = 0;
  while (pos <= path.size()) {
    const size_t dot = path.find('.', pos);
    const std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    if (cur.type() != Value::Type::kDict) return Value::undefined("no attribute '" + part + "'");
    const Value* next = cur.find(part);
    if (next == nullptr) return Value::undefined("no attribute '" + part + "'");
    cur = *next;
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }
  return cur;
}

// select/reject/selectattr/rejectattr: args after the test name go to the test.
Value filter_by_test(const Value& seq, CallArgs& args, bool by_attribute, bool keep_when) {
  size_t next = 0;
  std::string attr;
  if (by_attribute) attr = need_string(args.get(next++, "attribute"), "selectattr attribute");
  CallArgs test_args;
  std::string test = "truthy";
  if (next < args.positional.size()) {
    test = need_string(args.positional[next++], "test name");
    test_args.positional.assign(args.positional.begin() + static_cast<long>(next), args.positional.end());
  }
  List out;
  for (const auto& item : iterate(seq)) {
    const Value subject = by_attribute ? attribute_of(item, attr) : item;
    const bool ok = test == "truthy" ? subject.truthy() : apply_test(test, subject, test_args);
    if (ok == keep_when) out.push_back(item);
  }
  return Value::list(std::move(out));
}

std::string format_time(const std::string& fmt) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[256];
  const size_t n = std::strftime(buf, sizeof(buf), fmt.c_str(), &tm);
  return std::string(buf, n);
}

}  // namespace

int64_t python_len(const Value& v) {
  switch (v.type()) {
    case Value::Type::kUndefined:
      return 0;
    case Value::Type::kString:
      return static_cast<int64_t>(to_u32(v.str_ref()).size());
    case Value::Type::kList:
      return static_cast<int64_t>(v.list_ref().size());
    case Value::Type::kDict:
      return static_cast<int64_t>(v.dict_ref().size());
    default:
      throw TemplateError("TypeError: object of type '" + v.type_name() + "' has no len()");
  }
}

List iterate(const Value& v) {
  switch (v.type()) {
    case Value::Type::kUndefined:
      return {};
    case Value::Type::kList:
      return v.list_ref();
    case Value::Type::kDict: {
      List keys;
      for (const auto& kv : v.dict_ref()) keys.emplace_back(kv.first);
      return keys;
    }
    case Value::Type::kString: {
      List chars;
      for (char32_t c : to_u32(v.str_ref())) chars.emplace_back(from_u32(std::u32string(1, c)));
      return chars;
    }
    default:
      throw TemplateError("TypeError: '" + v.type_name() + "' object is not iterable");
  }
}

namespace {

// Filters on one value: defaults, serialization, text.
std::optional<Value> value_filter(const std::string& name, const Value& v, CallArgs& args) {
  if (name == "default" || name == "d") {
    const bool boolean = args.get(1, "boolean", Value(false)).truthy();
    if (v.is_undefined() || (boolean && !v.truthy())) return args.get(0, "default_value", Value(""));
    return v;
  }
  if (name == "tojson") {
    const Value indent = args.get(0, "indent", Value::none());
    const int ind = indent.type() == Value::Type::kInt ? static_cast<int>(indent.as_int()) : -1;
    return Value(v.to_json(ind, args.get(99, "sort_keys", Value(false)).truthy()));
  }
  if (name == "length" || name == "count") return Value(python_len(v));
  if (name == "string") return Value(v.to_str());
  if (name == "safe" || name == "e" || name == "escape") {
    if (name == "safe") return v;
    std::string out;
    for (char c : v.to_str()) {
      switch (c) {
        case '&':
          out += "&amp;";
          break;
        case '<':
          out += "&lt;";
          break;
        case '>':
          out += "&gt;";
          break;
        case '"':
          out += "&#34;";
          break;
        case '\'':
          out += "&#39;";
          break;
        default:
          out.push_back(c);
      }
    }
    return Value(out);
  }
  if (name == "trim") return Value(py_strip(v.to_str(), args.get(0, "chars", Value::none()), true, true));
  if (name == "lower") return Value(case_map(v.to_str(), 0));
  if (name == "upper") return Value(case_map(v.to_str(), 1));
  if (name == "title") return Value(case_map(v.to_str(), 2));
  if (name == "capitalize") return Value(case_map(v.to_str(), 3));
  if (name == "replace") {
    const Value count = args.get(2, "count", Value::none());
    return Value(replace_all(v.to_str(), need_string(args.get(0, "old"), "replace"),
                             need_string(args.get(1, "new"), "replace"),
                             count.type() == Value::Type::kInt ? count.as_int() : -1));
  }
  return std::nullopt;
}

// Filters on numbers.
std::optional<Value> number_filter(const std::string& name, const Value& v, CallArgs& args) {
  if (name == "int") {
    if (v.type() == Value::Type::kInt || v.type() == Value::Type::kBool)
      return Value(v.type() == Value::Type::kBool ? int64_t{v.as_bool()} : v.as_int());
    if (v.type() == Value::Type::kFloat) return Value(static_cast<int64_t>(v.as_double()));
    try {
      return Value(static_cast<int64_t>(std::stoll(v.to_str())));
    } catch (const std::exception&) {
      return args.get(0, "default", Value(int64_t{0}));
    }
  }
  if (name == "float") {
    if (v.is_number()) return Value(v.as_double());
    try {
      return Value(std::stod(v.to_str()));
    } catch (const std::exception&) {
      return args.get(0, "default", Value(0.0));
    }
  }
  if (name == "abs") {
    if (v.type() == Value::Type::kInt) return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
    if (v.type() == Value::Type::kFloat) return Value(std::fabs(v.as_double()));
  }
  if (name == "sum") {
    Value total(int64_t{0});
    for (const auto& item : iterate(v)) {
      if (!item.is_number()) throw TemplateError("TypeError: sum of non-numbers");
      total = (total.type() == Value::Type::kInt && item.type() == Value::Type::kInt)
                  ? Value(total.as_int() + item.as_int())
                  : Value(total.as_double() + item.as_double());
    }
    return total;
  }
  return std::nullopt;
}

// Filters on sequences.
std::optional<Value> collection_filter(const std::string& name, const Value& v, CallArgs& args) {
  if (name == "first" || name == "last") {
    const List items = iterate(v);
    if (items.empty()) return Value::undefined("No " + name + " item, sequence was empty.");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") return Value::list(iterate(v));
  if (name == "reverse") {
    if (v.is_string()) {
      std::u32string u = to_u32(v.str_ref());
      std::reverse(u.begin(), u.end());
      return Value(from_u32(u));
    }
    List items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items));
  }
  if (name == "join") {
    const std::string sep = args.get(0, "d", Value("")).to_str();
    const Value attr = args.get(1, "attribute", Value::none());
    std::string out;
    bool first = true;
    for (const auto& item : iterate(v)) {
      out += (first ? "" : sep) + (attr.is_string() ? attribute_of(item, attr.str_ref()) : item).to_str();
      first = false;
    }
    return Value(out);
  }
  if (name == "items") {
    if (v.is_undefined()) return Value::list();
    if (v.type() != Value::Type::kDict)
      throw TemplateError("TypeError: items filter expects a mapping, got " + v.type_name());
    List out;
    for (const auto& [k, val] : v.dict_ref()) out.push_back(Value::list({Value(k), val}));
    return Value::list(std::move(out));
  }
  if (name == "select" || name == "reject") return filter_by_test(v, args, false, name == "select");
  if (name == "selectattr" || name == "rejectattr") return filter_by_test(v, args, true, name == "selectattr");
  if (name == "map") {
    const Value attr = args.get(99, "attribute", Value::none());
    List out;
    for (const auto& item : iterate(v)) {
      if (attr.is_string()) {
        out.push_back(attribute_of(item, attr.str_ref()));
      } else {
        CallArgs rest;
        rest.positional.assign(args.positional.begin() + (args.positional.empty() ? 0 : 1), args.positional.end());
        out.push_back(apply_filter(need_string(args.get(0, "filter"), "map filter name"), item, rest));
      }
    }
    return Value::list(std::move(out));
  }
  if (name == "unique") {
    List out;
    for (const auto& item : iterate(v)) {
      if (std::find(out.begin(), out.end(), item) == out.end()) out.push_back(item);
    }
    return Value::list(std::move(out));
  }
  return std::nullopt;
}

}  // namespace

Value apply_filter(const std::string& name, const Value& v, CallArgs& args) {
  if (auto r = value_filter(name, v, args)) return *r;
  if (auto r = collection_filter(name, v, args)) return *r;
  if (auto r = number_filter(name, v, args)) return *r;
  throw TemplateError("the '" + name + "' filter is not supported by Vosti's chat-template interpreter");
}

bool apply_test(const std::string& name, const Value& v, CallArgs& args) {
  using T = Value::Type;
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.type() == T::kInt;
  if (name == "float") return v.type() == T::kFloat;
  if (name == "boolean") return v.type() == T::kBool;
  if (name == "true") return v.type() == T::kBool && v.as_bool();
  if (name == "false") return v.type() == T::kBool && !v.as_bool();
  if (name == "mapping") return v.type() == T::kDict;
  if (name == "iterable") return v.type() == T::kList || v.type() == T::kDict || v.is_string() || v.is_undefined();
  if (name == "sequence") return v.type() == T::kList || v.type() == T::kDict || v.is_string();
  if (name == "callable") return v.type() == T::kFunction;
  if (name == "equalto" || name == "eq" || name == "==" || name == "sameas") return v == args.get(0, "other");
  if (name == "ne" || name == "!=") return !(v == args.get(0, "other"));
  if (name == "odd" || name == "even") {
    if (v.type() != T::kInt) throw TemplateError("TypeError: '" + name + "' test expects an integer");
    return ((v.as_int() % 2) != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    const Value n = args.get(0, "num");
    if (v.type() != T::kInt || n.type() != T::kInt || n.as_int() == 0)
      throw TemplateError("TypeError: divisibleby expects nonzero integers");
    return v.as_int() % n.as_int() == 0;
  }
  if (name == "in") {
    const Value seq = args.get(0, "seq");
    if (seq.is_string()) return v.is_string() && seq.str_ref().find(v.str_ref()) != std::string::npos;
    for (const auto& item : iterate(seq))
      if (item == v) return true;
    return false;
  }
  if (name == "lower") return v.is_string() && case_map(v.str_ref(), 0) == v.str_ref();
  if (name == "upper") return v.is_string() && case_map(v.str_ref(), 1) == v.str_ref();
  throw TemplateError("the '" + name + "' test is not supported by Vosti's chat-template interpreter");
}

Value call_method(const Value& obj, const std::string& name, CallArgs& args, bool* found) {
  *found = true;
  if (obj.is_string()) {
    const std::string& s = obj.str_ref();
    if (name == "startswith" || name == "endswith") {
      const Value arg = args.get(0, "prefix");
      List options = arg.type() == Value::Type::kList ? arg.list_ref() : List{arg};
      for (const auto& o : options) {
        const std::string& p = need_string(o, name.c_str());
        const bool hit = name == "startswith"
                             ? s.compare(0, p.size(), p) == 0
                             : (s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0);
        if (hit) return Value(true);
      }
      return Value(false);
    }
    if (name == "strip") return Value(py_strip(s, args.get(0, "chars", Value::none()), true, true));
    if (name == "lstrip") return Value(py_strip(s, args.get(0, "chars", Value::none()), true, false));
    if (name == "rstrip") return Value(py_strip(s, args.get(0, "chars", Value::none()), false, true));
    if (name == "split") {
      const Value maxsplit = args.get(1, "maxsplit", Value(int64_t{-1}));
      return Value::list(py_split(s, args.get(0, "sep", Value::none()),
                                  maxsplit.type() == Value::Type::kInt ? maxsplit.as_int() : -1));
    }
    if (name == "lower") return Value(case_map(s, 0));
    if (name == "upper") return Value(case_map(s, 1));
    if (name == "title") return Value(case_map(s, 2));
    if (name == "capitalize") return Value(case_map(s, 3));
    if (name == "replace") {
      const Value count = args.get(2, "count", Value(int64_t{-1}));
      return Value(replace_all(s, need_string(args.get(0, "old"), "replace"),
                               need_string(args.get(1, "new"), "replace"),
                               count.type() == Value::Type::kInt ? count.as_int() : -1));
    }
    if (name == "find") {
      const size_t hit = s.find(need_string(args.get(0, "sub"), "find"));
      return Value(hit == std::string::npos ? int64_t{-1} : static_cast<int64_t>(to_u32(s.substr(0, hit)).size()));
    }
    if (name == "count") {
      const std::string& sub = need_string(args.get(0, "sub"), "count");
      int64_t n = 0;
      if (!sub.empty())
        for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
      return Value(n);
    }
    if (name == "join") {
      std::string out;
      bool first = true;
      for (const auto& item : iterate(args.get(0, "iterable"))) {
        out += (first ? "" : s) + need_string(item, "join");
        first = false;
      }
      return Value(out);
    }
  } else if (obj.type() == Value::Type::kDict && !obj.is_namespace()) {
    if (name == "items") return apply_filter("items", obj, args);
    if (name == "keys") return Value::list(iterate(obj));
    if (name == "values") {
      List out;
      for (const auto& kv : obj.dict_ref()) out.push_back(kv.second);
      return Value::list(std::move(out));
    }
    if (name == "get") {
      const Value key = args.get(0, "key");
      const Value* hit = key.is_string() ? obj.find(key.str_ref()) : nullptr;
      return hit != nullptr ? *hit : args.get(1, "default", Value::none());
    }
  }
  if (obj.type() == Value::Type::kList || obj.type() == Value::Type::kDict) {
    if (name == "append" || name == "pop" || name == "insert" || name == "extend" || name == "update" ||
        name == "clear") {
      throw TemplateError("SecurityError: access to attribute '" + name + "' of '" + obj.type_name() +
                          "' object is unsafe");
    }
  }
  *found = false;
  return Value();
}

Dict global_functions() {
  Dict g;
  g.emplace_back("raise_exception", Value::function("raise_exception", [](CallArgs& a) -> Value {
                   throw TemplateError("TemplateError: " + a.get(0, "message").to_str());
                 }));
  g.emplace_back("namespace", Value::function("namespace", [](CallArgs& a) {
                   Value ns = Value::dict({}, /*is_namespace=*/true);
                   for (const auto& p : a.positional) {
                     if (p.type() == Value::Type::kDict)
                       for (const auto& [k, v] : p.dict_ref()) ns.set(k, v);
                   }
                   for (const auto& [k, v] : a.keyword) ns.set(k, v);
                   return ns;
                 }));
  g.emplace_back("dict", Value::function("dict", [](CallArgs& a) {
                   Value d = Value::dict();
                   for (const auto& [k, v] : a.keyword) d.set(k, v);
                   return d;
                 }));
  g.emplace_back("strftime_now", Value::function("strftime_now", [](CallArgs& a) {
                   return Value(format_time(need_string(a.get(0, "format"), "strftime_now")));
                 }));
  g.emplace_back("range", Value::function("range", [](CallArgs& a) {
                   int64_t start = 0, stop = 0, step = 1;
                   for (const auto& p : a.positional)
                     if (p.type() != Value::Type::kInt) throw TemplateError("TypeError: range() expects integers");
                   if (a.positional.size() == 1)
                     stop = a.positional[0].as_int();
                   else if (a.positional.size() >= 2)
                     start = a.positional[0].as_int(), stop = a.positional[1].as_int();
                   if (a.positional.size() >= 3) step = a.positional[2].as_int();
                   if (step == 0) throw TemplateError("ValueError: range() arg 3 must not be zero");
                   List out;
                   for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
                     if (out.size() >= 100000) throw TemplateError("range() too large for a chat template");
                     out.emplace_back(i);
                   }
                   return Value::list(std::move(out));
                 }));
  return g;
}

}  // namespace vosti::jinja
