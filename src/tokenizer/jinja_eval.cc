// GCC 12 reports a false -Wrestrict inside std::string's operator+ (GCC bug 105329).
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include "tokenizer/jinja_eval.h"

#include <cmath>
#include <cstdint>

#include "tokenizer/utf8.h"

namespace vosti::jinja {
namespace {

enum class Flow { kNormal, kBreak, kContinue };

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

[[noreturn]] void undefined_error(const Value& v) {
  throw TemplateError("UndefinedError: " + (v.hint().empty() ? std::string("value is undefined") : v.hint()));
}

Value get_attr(const Value& obj, const std::string& name) {
  switch (obj.type()) {
    case Value::Type::kUndefined:
      undefined_error(obj);
    case Value::Type::kDict:
      if (const Value* v = obj.find(name)) return *v;
      return Value::undefined(std::string(obj.is_namespace() ? "'Namespace" : "'dict") + " object' has no attribute '" +
                              name + "'");
    default:
      return Value::undefined(std::string("'") + obj.type_name() + " object' has no attribute '" + name + "'");
  }
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) undefined_error(obj);
  if (obj.type() == Value::Type::kDict) {
    if (!key.is_string()) return Value::undefined(std::string("'dict object' has no attribute ") + key.repr());
    return get_attr(obj, key.str_ref());
  }
  if ((obj.type() == Value::Type::kList || obj.is_string()) && key.type() == Value::Type::kInt) {
    if (obj.is_string()) {
      const std::u32string s = to_u32(obj.str_ref());
      int64_t i = key.as_int() < 0 ? key.as_int() + static_cast<int64_t>(s.size()) : key.as_int();
      if (i < 0 || i >= static_cast<int64_t>(s.size()))
        return Value::undefined(std::string("str object has no element ") + key.repr());
      return Value(from_u32(s.substr(static_cast<size_t>(i), 1)));
    }
    const List& l = obj.list_ref();
    int64_t i = key.as_int() < 0 ? key.as_int() + static_cast<int64_t>(l.size()) : key.as_int();
    if (i < 0 || i >= static_cast<int64_t>(l.size()))
      return Value::undefined(std::string("list object has no element ") + key.repr());
    return l[static_cast<size_t>(i)];
  }
  if (key.is_string()) return get_attr(obj, key.str_ref());
  return Value::undefined("'" + obj.type_name() + " object' has no element " + key.repr());
}

// Python slice bounds for a sequence of length n.
std::vector<size_t> slice_indices(int64_t n, const Value& start, const Value& stop, const Value& step) {
  auto as_int = [](const Value& v, const char* what) {
    if (v.type() != Value::Type::kInt)
      throw TemplateError(std::string("TypeError: slice ") + what + " must be an integer or none");
    return v.as_int();
  };
  const int64_t st = (step.is_none() || step.is_undefined()) ? 1 : as_int(step, "step");
  if (st == 0) throw TemplateError("ValueError: slice step cannot be zero");
  auto clamp = [&](const Value& v, int64_t dflt) {
    if (v.is_none() || v.is_undefined()) return dflt;
    int64_t i = as_int(v, "index");
    if (i < 0) i += n;
    if (st > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t b = clamp(start, st > 0 ? 0 : n - 1);
  const int64_t e = clamp(stop, st > 0 ? n : -1);
  std::vector<size_t> out;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) {
    out.push_back(static_cast<size_t>(i));
    if (st > 0 ? e - i <= st : e - i >= st) break;  // the next index is past the end (and i + st may overflow)
  }
  return out;
}

// x + y, x - y or x * y (kind '+', '-', '*') on int64; a result beyond 64 bits is a template
// error naming the template's operator `op` (Python's ints would grow; no chat template needs that).
int64_t checked(char kind, int64_t x, int64_t y, const std::string& op) {
  int64_t r = 0;
  const bool overflow = kind == '+'   ? __builtin_add_overflow(x, y, &r)
                        : kind == '-' ? __builtin_sub_overflow(x, y, &r)
                                      : __builtin_mul_overflow(x, y, &r);
  if (overflow) throw TemplateError("OverflowError: the result of " + op + " does not fit in 64 bits");
  return r;
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return Value(a.to_str() + b.to_str());
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  const bool nums =
      (a.is_number() || a.type() == Value::Type::kBool) && (b.is_number() || b.type() == Value::Type::kBool);
  auto num = [](const Value& v) { return v.type() == Value::Type::kBool ? (v.as_bool() ? 1.0 : 0.0) : v.as_double(); };
  auto ival = [](const Value& v) { return v.type() == Value::Type::kBool ? int64_t{v.as_bool()} : v.as_int(); };
  const bool ints = nums && a.type() != Value::Type::kFloat && b.type() != Value::Type::kFloat;
  if (op == "+") {
    if (a.is_string() && b.is_string()) return Value(a.str_ref() + b.str_ref());
    if (a.type() == Value::Type::kList && b.type() == Value::Type::kList) {
      List l = a.list_ref();
      l.insert(l.end(), b.list_ref().begin(), b.list_ref().end());
      return Value::list(std::move(l));
    }
    if (ints) return Value(checked('+', ival(a), ival(b), op));
    if (nums) return Value(num(a) + num(b));
  } else if (op == "-") {
    if (ints) return Value(checked('-', ival(a), ival(b), op));
    if (nums) return Value(num(a) - num(b));
  } else if (op == "*") {
    if (ints) return Value(checked('*', ival(a), ival(b), op));
    if (nums) return Value(num(a) * num(b));
    const Value* s = a.is_string() ? &a : b.is_string() ? &b : nullptr;
    const Value* n = a.type() == Value::Type::kInt ? &a : b.type() == Value::Type::kInt ? &b : nullptr;
    if (s && n) {
      std::string out;
      for (int64_t i = 0; i < n->as_int() && out.size() < (1u << 24); ++i) out += s->str_ref();
      return Value(std::move(out));
    }
  } else if (op == "/") {
    if (nums) {
      if (num(b) == 0) throw TemplateError("ZeroDivisionError: division by zero");
      return Value(num(a) / num(b));
    }
  } else if (op == "//" || op == "%") {
    if (ints) {
      const int64_t x = ival(a), y = ival(b);
      if (y == 0) throw TemplateError("ZeroDivisionError: integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) {
        if (op == "%") return Value(int64_t{0});
        throw TemplateError("OverflowError: the result of " + op + " does not fit in 64 bits");
      }
      int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) {
        --q;
        r += y;
      }
      return Value(op == "//" ? q : r);
    }
    if (nums) {
      if (num(b) == 0) throw TemplateError("ZeroDivisionError: float division by zero");
      const double q = std::floor(num(a) / num(b));
      return Value(op == "//" ? q : num(a) - q * num(b));
    }
  } else if (op == "**") {
    if (ints && ival(b) >= 0) {  // by squaring; every product checked
      int64_t base = ival(a), r = 1;
      for (int64_t e = ival(b); e > 0; e >>= 1) {
        if (e & 1) r = checked('*', r, base, op);
        if (e > 1) base = checked('*', base, base, op);
      }
      return Value(r);
    }
    if (nums) return Value(std::pow(num(a), num(b)));
  }
  throw TemplateError("TypeError: unsupported operand types for " + op + ": '" + a.type_name() + "' and '" +
                      b.type_name() + "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.type()) {
    case Value::Type::kUndefined:
      return false;
    case Value::Type::kString:
      if (!item.is_string())
        throw TemplateError("TypeError: 'in <string>' requires string as left operand, not " + item.type_name());
      return container.str_ref().find(item.str_ref()) != std::string::npos;
    case Value::Type::kList:
      for (const auto& v : container.list_ref())
        if (v == item) return true;
      return false;
    case Value::Type::kDict:
      return item.is_string() && container.find(item.str_ref()) != nullptr;
    default:
      throw TemplateError("TypeError: argument of type '" + container.type_name() + "' is not iterable");
  }
}

bool less_than(const Value& a, const Value& b) {
  if ((a.is_number() || a.type() == Value::Type::kBool) && (b.is_number() || b.type() == Value::Type::kBool)) {
    auto num = [](const Value& v) {
      return v.type() == Value::Type::kBool ? (v.as_bool() ? 1.0 : 0.0) : v.as_double();
    };
    if (a.type() == Value::Type::kInt && b.type() == Value::Type::kInt) return a.as_int() < b.as_int();
    return num(a) < num(b);
  }
  if (a.is_string() && b.is_string()) return a.str_ref() < b.str_ref();
  throw TemplateError("TypeError: '<' not supported between instances of '" + a.type_name() + "' and '" +
                      b.type_name() + "'");
}

class Renderer {
 public:
  Renderer(const ParsedTemplate& tmpl, const Value& context) : tmpl_(tmpl) {
    scopes_.push_back(Value::dict(global_functions()));
    scopes_.push_back(Value::dict(context.dict_ref()));
  }

  std::string run() {
    std::string out;
    exec(tmpl_.nodes, out);
    return out;
  }

 private:
  [[noreturn]] void fail_at(size_t pos, const std::string& message) const {
    throw TemplateError(message + " (at " + describe_position(tmpl_.source, pos) + ")");
  }

  Value lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      if (const Value* v = it->find(name)) return *v;
    }
    return Value::undefined("'" + name + "' is undefined");
  }

  CallArgs eval_args(const Expr& e, size_t first_positional) {
    CallArgs args;
    for (size_t i = first_positional; i < e.args.size(); ++i) args.positional.push_back(eval(*e.args[i]));
    for (const auto& [k, v] : e.kwargs) args.keyword.emplace_back(k, eval(*v));
    return args;
  }

  Value eval_call(const Expr& e) {
    const Expr& callee = *e.args[0];
    CallArgs args = eval_args(e, 1);
    Value fn;
    if (callee.kind == Expr::Kind::kAttr) {
      const Value obj = eval(*callee.args[0]);
      if (obj.is_undefined()) undefined_error(obj);
      bool found = false;
      Value r = call_method(obj, callee.name, args, &found);
      if (found) return r;
      fn = get_attr(obj, callee.name);
    } else {
      fn = eval(callee);
    }
    if (fn.is_undefined()) undefined_error(fn);
    if (fn.type() != Value::Type::kFunction)
      fail_at(e.pos, "TypeError: '" + fn.type_name() + "' object is not callable");
    return fn.function_ref()(args);
  }

  Value eval(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        return e.literal;
      case Expr::Kind::kName:
        return lookup(e.name);
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        List items;
        for (const auto& a : e.args) items.push_back(eval(*a));
        return Value::list(std::move(items));
      }
      case Expr::Kind::kDict: {
        Value d = Value::dict();
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          const Value k = eval(*e.args[i]);
          if (!k.is_string()) fail_at(e.pos, "dict literal keys must be strings in chat templates");
          d.set(k.str_ref(), eval(*e.args[i + 1]));
        }
        return d;
      }
      case Expr::Kind::kAttr:
        return get_attr(eval(*e.args[0]), e.name);
      case Expr::Kind::kIndex:
        return get_item(eval(*e.args[0]), eval(*e.args[1]));
      case Expr::Kind::kSlice:
        return eval_slice(e);
      case Expr::Kind::kCall:
        return eval_call(e);
      case Expr::Kind::kFilter: {
        const Value subject = eval(*e.args[0]);
        CallArgs args = eval_args(e, 1);
        return apply_filter(e.name, subject, args);
      }
      case Expr::Kind::kTest: {
        const Value subject = eval(*e.args[0]);
        CallArgs args = eval_args(e, 1);
        return Value(apply_test(e.name, subject, args) != e.negated);
      }
      case Expr::Kind::kNeg:
      case Expr::Kind::kPos: {
        const Value v = eval(*e.args[0]);
        if (v.is_undefined()) undefined_error(v);
        if (v.type() == Value::Type::kInt) {
          if (e.kind == Expr::Kind::kNeg && v.as_int() == INT64_MIN)
            fail_at(e.pos, "OverflowError: -(" + std::to_string(v.as_int()) + ") does not fit in 64 bits");
          return Value(e.kind == Expr::Kind::kNeg ? -v.as_int() : v.as_int());
        }
        if (v.type() == Value::Type::kFloat) return Value(e.kind == Expr::Kind::kNeg ? -v.as_double() : v.as_double());
        fail_at(e.pos, "TypeError: bad operand type for unary minus: '" + v.type_name() + "'");
      }
      case Expr::Kind::kNot:
        return Value(!eval(*e.args[0]).truthy());
      case Expr::Kind::kAnd: {
        Value a = eval(*e.args[0]);
        return a.truthy() ? eval(*e.args[1]) : a;
      }
      case Expr::Kind::kOr: {
        Value a = eval(*e.args[0]);
        return a.truthy() ? a : eval(*e.args[1]);
      }
      case Expr::Kind::kCompare:
        return eval_compare(e);
      case Expr::Kind::kBinary:
        return arithmetic(e.name, eval(*e.args[0]), eval(*e.args[1]));
      case Expr::Kind::kCondition:
        if (eval(*e.args[0]).truthy()) return eval(*e.args[1]);
        return e.args.size() > 2 ? eval(*e.args[2]) : Value::undefined("the inline if had no else branch");
    }
    fail_at(e.pos, "internal error: unknown expression");
  }

  Value eval_compare(const Expr& e) {
    const Value a = eval(*e.args[0]);
    const Value b = eval(*e.args[1]);
    const std::string& op = e.name;
    if (op == "==") return Value(a == b);
    if (op == "!=") return Value(!(a == b));
    if (op == "in") return Value(contains(b, a));
    if (op == "not in") return Value(!contains(b, a));
    if (op == "<") return Value(less_than(a, b));
    if (op == ">") return Value(less_than(b, a));
    if (op == "<=") return Value(!less_than(b, a));
    return Value(!less_than(a, b));  // >=
  }

  Value eval_slice(const Expr& e) {
    const Value obj = eval(*e.args[0]);
    auto part = [&](size_t i) { return e.args[i] ? eval(*e.args[i]) : Value::none(); };
    const Value start = part(1), stop = part(2), step = part(3);
    if (obj.is_undefined()) undefined_error(obj);
    if (obj.is_string()) {
      const std::u32string s = to_u32(obj.str_ref());
      std::u32string out;
      for (size_t i : slice_indices(static_cast<int64_t>(s.size()), start, stop, step)) out.push_back(s[i]);
      return Value(from_u32(out));
    }
    if (obj.type() == Value::Type::kList) {
      List out;
      for (size_t i : slice_indices(static_cast<int64_t>(obj.list_ref().size()), start, stop, step))
        out.push_back(obj.list_ref()[i]);
      return Value::list(std::move(out));
    }
    fail_at(e.pos, "TypeError: '" + obj.type_name() + "' object is not subscriptable");
  }

  Flow exec(const std::vector<Node>& nodes, std::string& out) {
    for (const auto& n : nodes) {
      const Flow f = exec_node(n, out);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  void assign(const Node& n, Value v) {
    if (n.attribute_target) {
      const Value obj = lookup(n.targets[0]);
      if (obj.type() != Value::Type::kDict || !obj.is_namespace()) {
        fail_at(n.pos,
                "cannot assign attribute '" + n.targets[1] + "' on '" + n.targets[0] + "': it is not a namespace()");
      }
      obj.set(n.targets[1], std::move(v));
      return;
    }
    if (n.targets.size() == 1) {
      scopes_.back().set(n.targets[0], std::move(v));
      return;
    }
    const List items = iterate(v);
    if (items.size() != n.targets.size()) fail_at(n.pos, "ValueError: wrong number of values to unpack");
    for (size_t i = 0; i < items.size(); ++i) scopes_.back().set(n.targets[i], items[i]);
  }

  Flow exec_node(const Node& n, std::string& out) {
    if (++steps_ > kMaxSteps || out.size() > kMaxOutputBytes) {
      fail_at(n.pos, "the template exceeded its execution budget (" + std::to_string(kMaxSteps) + " steps, " +
                         std::to_string(kMaxOutputBytes >> 20) + " MiB of output)");
    }
    switch (n.kind) {
      case Node::Kind::kText:
        out += n.text;
        return Flow::kNormal;
      case Node::Kind::kOutput:
        out += eval(*n.expr).to_str();
        return Flow::kNormal;
      case Node::Kind::kIf:
        for (size_t i = 0; i < n.branches.size(); ++i) {
          if (i >= n.conditions.size() || eval(*n.conditions[i]).truthy()) return exec(n.branches[i], out);
        }
        return Flow::kNormal;
      case Node::Kind::kFor:
        exec_for(n, out);
        return Flow::kNormal;
      case Node::Kind::kSet:
        assign(n, eval(*n.expr));
        return Flow::kNormal;
      case Node::Kind::kSetBlock: {
        std::string captured;
        exec(n.body, captured);
        assign(n, Value(std::move(captured)));
        return Flow::kNormal;
      }
      case Node::Kind::kBreak:
        return Flow::kBreak;
      case Node::Kind::kContinue:
        return Flow::kContinue;
      case Node::Kind::kScope:
        return exec(n.body, out);
    }
    return Flow::kNormal;
  }

  void exec_for(const Node& n, std::string& out) {
    const Value seq = eval(*n.expr);
    if (seq.is_none()) fail_at(n.pos, "TypeError: 'NoneType' object is not iterable");
    List items = iterate(seq);
    if (n.filter) {
      List kept;
      for (auto& item : items) {
        scopes_.push_back(Value::dict());
        bind_targets(n, item);
        const bool keep = eval(*n.filter).truthy();
        scopes_.pop_back();
        if (keep) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    const auto len = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < len; ++i) {
      Value loop = Value::dict({{"index0", Value(i)},
                                {"index", Value(i + 1)},
                                {"revindex0", Value(len - i - 1)},
                                {"revindex", Value(len - i)},
                                {"first", Value(i == 0)},
                                {"last", Value(i == len - 1)},
                                {"length", Value(len)}});
      loop.set("previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value::undefined("there is no previous item"));
      loop.set("nextitem", i + 1 < len ? items[static_cast<size_t>(i + 1)] : Value::undefined("there is no next item"));
      scopes_.push_back(Value::dict({{"loop", loop}}));
      bind_targets(n, items[static_cast<size_t>(i)]);
      const Flow f = exec(n.body, out);
      scopes_.pop_back();
      if (f == Flow::kBreak) break;
    }
    if (len == 0) exec(n.else_body, out);
  }

  void bind_targets(const Node& n, const Value& item) {
    if (n.targets.size() == 1) {
      scopes_.back().set(n.targets[0], item);
      return;
    }
    const List parts = iterate(item);
    if (parts.size() != n.targets.size()) fail_at(n.pos, "ValueError: wrong number of values to unpack in for loop");
    for (size_t k = 0; k < parts.size(); ++k) scopes_.back().set(n.targets[k], parts[k]);
  }

  static constexpr int64_t kMaxSteps = 20'000'000;
  static constexpr size_t kMaxOutputBytes = size_t{64} << 20;
  const ParsedTemplate& tmpl_;
  std::vector<Value> scopes_;  // dicts, innermost last
  int64_t steps_ = 0;
};

}  // namespace

std::string render(const ParsedTemplate& tmpl, const Value& context) {
  Renderer r(tmpl, context);
  return r.run();
}

}  // namespace vosti::jinja
