// JinjaValue: the dynamic value of the chat-template interpreter, with Python/Jinja2
// semantics for truthiness, str(), repr(), equality and json.dumps (as transformers'
// tojson calls it: ensure_ascii=False).
//
// Invariants: lists and dicts are shared by reference like Python objects (a namespace
// is a dict whose attributes `set ns.x = ...` may change); dicts keep insertion order
// and have string keys. An undefined value carries a hint naming what was missing, for
// the error raised when it is used in a way Jinja2 forbids.
// Thread safety: values are not synchronized; one render uses its own values.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace vosti::jinja {

// Raised inside the interpreter; render_chat turns it into a Status.
class TemplateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;
struct CallArgs;
using Function = std::function<Value(CallArgs&)>;

class Value {
 public:
  enum class Type { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction };

  Value() = default;  // undefined
  static Value undefined(std::string hint);
  static Value none();
  Value(bool b);                                    // NOLINT: implicit by design
  Value(int64_t i);                                 // NOLINT
  Value(int i) : Value(static_cast<int64_t>(i)) {}  // NOLINT
  Value(double d);                                  // NOLINT
  Value(std::string s);                             // NOLINT
  Value(const char* s) : Value(std::string(s)) {}   // NOLINT
  static Value list(List items = {});
  static Value dict(Dict items = {}, bool is_namespace = false);
  static Value function(std::string name, Function f);
  static Value from_json(const nlohmann::json& j);
  static Value from_json(const nlohmann::ordered_json& j);  // keeps object key order, as Python dicts do

  Type type() const { return type_; }
  bool is_undefined() const { return type_ == Type::kUndefined; }
  bool is_none() const { return type_ == Type::kNone; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_number() const { return type_ == Type::kInt || type_ == Type::kFloat; }
  bool is_namespace() const { return is_namespace_; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return i_; }
  double as_double() const { return type_ == Type::kInt ? static_cast<double>(i_) : d_; }
  const std::string& str_ref() const { return s_; }
  List& list_ref() const { return *list_; }
  Dict& dict_ref() const { return *dict_; }
  const Function& function_ref() const { return *fn_; }
  const std::string& hint() const { return s_; }

  bool truthy() const;
  // Python str(): what {{ value }} prints (undefined prints as "").
  std::string to_str() const;
  // Python repr() (strings quoted), used inside list/dict str().
  std::string repr() const;
  // json.dumps(value, ensure_ascii=False, indent=indent, sort_keys=sort_keys); indent < 0: one line.
  std::string to_json(int indent = -1, bool sort_keys = false) const;
  std::string type_name() const;

  // Dict lookup; nullptr when absent. REQUIRES: type() == kDict.
  Value* find(const std::string& key) const;
  void set(const std::string& key, Value v) const;

  friend bool operator==(const Value& a, const Value& b);

 private:
  void dump_json(std::string& out, int indent, int depth, bool sort_keys) const;
  Type type_ = Type::kUndefined;
  bool b_ = false;
  bool is_namespace_ = false;
  int64_t i_ = 0;
  double d_ = 0;
  std::string s_;  // string value, or the undefined hint
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Function> fn_;
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // The keyword `name` or positional[index] or `fallback`.
  Value get(size_t index, const std::string& name, Value fallback = Value()) const;
};

// Python float repr (shortest round trip; exponent form outside [1e-4, 1e16)).
std::string python_float_repr(double d);

}  // namespace vosti::jinja
