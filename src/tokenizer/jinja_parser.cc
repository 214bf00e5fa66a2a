// Parser for the chat-template interpreter (see jinja_ast.h): tokens -> tree, with
// Jinja2's operator precedence (filters and tests bind tighter than arithmetic).
#include <set>

#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_lexer.h"

namespace vosti::jinja {
namespace {

constexpr int kMaxNesting = 100;  // bounds recursion on hostile templates

class Parser {
 public:
  Parser(const std::string& src, std::vector<Token> tokens) : src_(src), toks_(std::move(tokens)) {}

  std::vector<Node> parse_all() {
    std::vector<Node> nodes = parse_body({});
    if (peek().type != Token::kEof) fail("unexpected '" + peek_keyword() + "' tag", peek().pos);
    return nodes;
  }

 private:
  const Token& peek(size_t ahead = 0) const { return toks_[std::min(i_ + ahead, toks_.size() - 1)]; }
  const Token& next() { return toks_[std::min(i_++, toks_.size() - 1)]; }
  bool is_op(const char* op, size_t ahead = 0) const {
    return peek(ahead).type == Token::kOp && peek(ahead).value == op;
  }
  bool is_name(const char* name, size_t ahead = 0) const {
    return peek(ahead).type == Token::kName && peek(ahead).value == name;
  }
  bool accept_op(const char* op) {
    if (!is_op(op)) return false;
    ++i_;
    return true;
  }
  bool accept_name(const char* name) {
    if (!is_name(name)) return false;
    ++i_;
    return true;
  }
  void expect_op(const char* op) {
    if (!accept_op(op)) fail(std::string("expected '") + op + "'", peek().pos);
  }
  void expect(Token::Type type, const char* what) {
    if (peek().type != type) fail(std::string("expected ") + what, peek().pos);
    ++i_;
  }
  std::string expect_identifier() {
    if (peek().type != Token::kName) fail("expected a name", peek().pos);
    return next().value;
  }
  std::string peek_keyword() const { return peek(1).type == Token::kName ? peek(1).value : "?"; }
  // The value of an int or float token; a literal outside int64 / double is a parse error.
  Value number_literal(const Token& t) const {
    try {
      return t.type == Token::kInt ? Value(static_cast<int64_t>(std::stoll(t.value))) : Value(std::stod(t.value));
    } catch (const std::exception&) {
      fail("number literal '" + t.value + "' is out of range", t.pos);
    }
  }

  [[noreturn]] void fail(const std::string& message, size_t pos) const {
    throw TemplateError("chat template syntax error at " + describe_position(src_, pos) + ": " + message);
  }

  // Statements ---------------------------------------------------------------------

  // Parses nodes until a {% tag %} whose keyword is in `stop` (left unconsumed) or EOF.
  struct DepthGuard {
    DepthGuard(Parser& p, size_t pos) : p_(p) {
      if (++p_.depth_ > kMaxNesting) p_.fail("nesting deeper than " + std::to_string(kMaxNesting) + " levels", pos);
    }
    ~DepthGuard() { --p_.depth_; }
    Parser& p_;
  };

  std::vector<Node> parse_body(const std::set<std::string>& stop) {
    DepthGuard guard(*this, peek().pos);
    std::vector<Node> nodes;
    while (peek().type != Token::kEof) {
      const Token& t = peek();
      if (t.type == Token::kText) {
        Node n;
        n.kind = Node::Kind::kText;
        n.pos = t.pos;
        n.text = t.value;
        nodes.push_back(std::move(n));
        ++i_;
      } else if (t.type == Token::kVarBegin) {
        Node n;
        n.kind = Node::Kind::kOutput;
        n.pos = t.pos;
        ++i_;
        n.expr = parse_expression();
        expect(Token::kVarEnd, "'}}'");
        nodes.push_back(std::move(n));
      } else if (t.type == Token::kBlockBegin) {
        if (peek(1).type != Token::kName) fail("expected a statement keyword after '{%'", t.pos);
        if (stop.count(peek(1).value)) return nodes;
        nodes.push_back(parse_statement());
      } else {
        fail("unexpected token", t.pos);
      }
    }
    return nodes;
  }

  // Consumes `{% keyword` ... `%}` for an end tag.
  void expect_end_tag(const char* keyword) {
    expect(Token::kBlockBegin, "'{%'");
    if (!accept_name(keyword)) fail(std::string("expected '") + keyword + "'", peek().pos);
    expect(Token::kBlockEnd, "'%}'");
  }

  Node parse_statement() {
    const size_t pos = next().pos;  // {%
    const std::string kw = expect_identifier();
    Node n;
    n.pos = pos;
    if (kw == "if") return parse_if(std::move(n));
    if (kw == "for") return parse_for(std::move(n));
    if (kw == "set") return parse_set(std::move(n));
    if (kw == "break" || kw == "continue") {
      n.kind = kw == "break" ? Node::Kind::kBreak : Node::Kind::kContinue;
      expect(Token::kBlockEnd, "'%}'");
      return n;
    }
    if (kw == "generation") {  // transformers' AssistantTracker block: renders its body
      expect(Token::kBlockEnd, "'%}'");
      n.kind = Node::Kind::kScope;
      n.body = parse_body({"endgeneration"});
      expect_end_tag("endgeneration");
      return n;
    }
    fail("the '{% " + kw +
             " %}' statement is not supported by Vosti's chat-template interpreter "
             "(supported: if, for, set, break, continue, generation)",
         pos);
  }

  Node parse_if(Node n) {
    n.kind = Node::Kind::kIf;
    n.conditions.push_back(parse_expression());
    expect(Token::kBlockEnd, "'%}'");
    n.branches.push_back(parse_body({"elif", "else", "endif"}));
    while (true) {
      expect(Token::kBlockBegin, "'{%'");
      const std::string kw = expect_identifier();
      if (kw == "elif") {
        n.conditions.push_back(parse_expression());
        expect(Token::kBlockEnd, "'%}'");
        n.branches.push_back(parse_body({"elif", "else", "endif"}));
      } else if (kw == "else") {
        expect(Token::kBlockEnd, "'%}'");
        n.branches.push_back(parse_body({"endif"}));
        expect_end_tag("endif");
        return n;
      } else if (kw == "endif") {
        expect(Token::kBlockEnd, "'%}'");
        return n;
      } else {
        fail("unexpected '" + kw + "' inside if", peek().pos);
      }
    }
  }

  Node parse_for(Node n) {
    n.kind = Node::Kind::kFor;
    n.targets.push_back(expect_identifier());
    while (accept_op(",")) n.targets.push_back(expect_identifier());
    if (!accept_name("in")) fail("expected 'in' in for loop", peek().pos);
    n.expr = parse_or();
    if (accept_name("if")) n.filter = parse_or();
    if (is_name("recursive")) fail("recursive for loops are not supported", peek().pos);
    expect(Token::kBlockEnd, "'%}'");
    n.body = parse_body({"else", "endfor"});
    expect(Token::kBlockBegin, "'{%'");
    if (accept_name("else")) {
      expect(Token::kBlockEnd, "'%}'");
      n.else_body = parse_body({"endfor"});
      expect(Token::kBlockBegin, "'{%'");
    }
    if (!accept_name("endfor")) fail("expected 'endfor'", peek().pos);
    expect(Token::kBlockEnd, "'%}'");
    return n;
  }

  Node parse_set(Node n) {
    n.kind = Node::Kind::kSet;
    n.targets.push_back(expect_identifier());
    if (accept_op(".")) {
      n.attribute_target = true;
      n.targets.push_back(expect_identifier());
    } else {
      while (accept_op(",")) n.targets.push_back(expect_identifier());
    }
    if (peek().type == Token::kBlockEnd && !n.attribute_target && n.targets.size() == 1) {
      ++i_;
      n.kind = Node::Kind::kSetBlock;
      n.body = parse_body({"endset"});
      expect_end_tag("endset");
      return n;
    }
    expect_op("=");
    n.expr = parse_tuple_or_expression();
    expect(Token::kBlockEnd, "'%}'");
    return n;
  }

  // Expressions --------------------------------------------------------------------

  ExprPtr make(Expr::Kind kind, size_t pos) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = pos;
    return e;
  }

  ExprPtr parse_tuple_or_expression() {
    const size_t pos = peek().pos;
    ExprPtr first = parse_expression();
    if (!is_op(",")) return first;
    auto t = make(Expr::Kind::kTuple, pos);
    t->args.push_back(std::move(first));
    while (accept_op(",")) t->args.push_back(parse_expression());
    return t;
  }

  ExprPtr parse_expression() {
    DepthGuard guard(*this, peek().pos);
    ExprPtr e = parse_or();
    if (is_name("if")) {
      const size_t pos = next().pos;
      auto c = make(Expr::Kind::kCondition, pos);
      c->args.push_back(parse_or());    // condition
      c->args.push_back(std::move(e));  // value if true
      if (accept_name("else")) c->args.push_back(parse_expression());
      return c;
    }
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      auto e = make(Expr::Kind::kOr, next().pos);
      e->args.push_back(std::move(left));
      e->args.push_back(parse_and());
      left = std::move(e);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      auto e = make(Expr::Kind::kAnd, next().pos);
      e->args.push_back(std::move(left));
      e->args.push_back(parse_not());
      left = std::move(e);
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      auto e = make(Expr::Kind::kNot, next().pos);
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    ExprPtr left = parse_math1();
    while (true) {
      std::string op;
      const size_t pos = peek().pos;
      if (peek().type == Token::kOp && (peek().value == "==" || peek().value == "!=" || peek().value == "<" ||
                                        peek().value == ">" || peek().value == "<=" || peek().value == ">=")) {
        op = next().value;
      } else if (is_name("in")) {
        ++i_;
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        i_ += 2;
        op = "not in";
      } else {
        return left;
      }
      auto e = make(Expr::Kind::kCompare, pos);
      e->name = op;
      e->args.push_back(std::move(left));
      e->args.push_back(parse_math1());
      left = std::move(e);
    }
  }

  ExprPtr binary(ExprPtr left, const std::string& op, size_t pos, ExprPtr right) {
    auto e = make(Expr::Kind::kBinary, pos);
    e->name = op;
    e->args.push_back(std::move(left));
    e->args.push_back(std::move(right));
    return e;
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& t = next();
      left = binary(std::move(left), t.value, t.pos, parse_concat());
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (is_op("~")) {
      const Token& t = next();
      left = binary(std::move(left), "~", t.pos, parse_math2());
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& t = next();
      left = binary(std::move(left), t.value, t.pos, parse_pow());
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      const Token& t = next();
      left = binary(std::move(left), "**", t.pos, parse_unary(true));
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this, peek().pos);
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      const Token& t = next();
      node = make(t.value == "-" ? Expr::Kind::kNeg : Expr::Kind::kPos, t.pos);
      node->args.push_back(parse_unary(false));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = peek();
    if (t.type == Token::kName) {
      ++i_;
      auto e = make(Expr::Kind::kLiteral, t.pos);
      if (t.value == "true" || t.value == "True")
        e->literal = Value(true);
      else if (t.value == "false" || t.value == "False")
        e->literal = Value(false);
      else if (t.value == "none" || t.value == "None")
        e->literal = Value::none();
      else {
        e->kind = Expr::Kind::kName;
        e->name = t.value;
      }
      return e;
    }
    if (t.type == Token::kString) {
      auto e = make(Expr::Kind::kLiteral, t.pos);
      std::string s;
      while (peek().type == Token::kString) s += next().value;  // adjacent literals concatenate
      e->literal = Value(std::move(s));
      return e;
    }
    if (t.type == Token::kInt || t.type == Token::kFloat) {
      ++i_;
      auto e = make(Expr::Kind::kLiteral, t.pos);
      e->literal = number_literal(t);
      return e;
    }
    if (is_op("(")) {
      ++i_;
      if (accept_op(")")) return make(Expr::Kind::kTuple, t.pos);
      ExprPtr first = parse_expression();
      if (accept_op(")")) return first;
      auto tuple = make(Expr::Kind::kTuple, t.pos);
      tuple->args.push_back(std::move(first));
      while (accept_op(",")) {
        if (is_op(")")) break;
        tuple->args.push_back(parse_expression());
      }
      expect_op(")");
      return tuple;
    }
    if (is_op("[")) {
      ++i_;
      auto list = make(Expr::Kind::kList, t.pos);
      while (!is_op("]")) {
        list->args.push_back(parse_expression());
        if (!accept_op(",")) break;
      }
      expect_op("]");
      return list;
    }
    if (is_op("{")) {
      ++i_;
      auto dict = make(Expr::Kind::kDict, t.pos);
      while (!is_op("}")) {
        dict->args.push_back(parse_expression());
        expect_op(":");
        dict->args.push_back(parse_expression());
        if (!accept_op(",")) break;
      }
      expect_op("}");
      return dict;
    }
    fail("unexpected '" + (t.value.empty() ? std::string("end of tag") : t.value) + "' in expression", t.pos);
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".")) {
        const size_t pos = next().pos;
        auto e = make(Expr::Kind::kAttr, pos);
        if (peek().type == Token::kInt) {  // x.0 is x[0] in Jinja
          e->kind = Expr::Kind::kIndex;
          auto idx = make(Expr::Kind::kLiteral, peek().pos);
          idx->literal = number_literal(next());
          e->args.push_back(std::move(node));
          e->args.push_back(std::move(idx));
        } else {
          e->name = expect_identifier();
          e->args.push_back(std::move(node));
        }
        node = std::move(e);
      } else if (is_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const size_t pos = next().pos;  // [
    ExprPtr parts[3];
    bool is_slice = false;
    for (int k = 0; k < 3; ++k) {
      if (!is_op(":") && !is_op("]")) parts[k] = parse_expression();
      if (k < 2 && accept_op(":")) {
        is_slice = true;
        continue;
      }
      break;
    }
    expect_op("]");
    auto e = make(is_slice ? Expr::Kind::kSlice : Expr::Kind::kIndex, pos);
    e->args.push_back(std::move(node));
    if (!is_slice && !parts[0]) fail("empty subscript", pos);
    for (int k = 0; k < (is_slice ? 3 : 1); ++k) e->args.push_back(std::move(parts[k]));
    return e;
  }

  void parse_call_args(Expr& e) {
    expect_op("(");
    while (!is_op(")")) {
      if (peek().type == Token::kName && is_op("=", 1)) {
        std::string key = next().value;
        ++i_;
        e.kwargs.emplace_back(std::move(key), parse_expression());
      } else {
        e.args.push_back(parse_expression());
      }
      if (!accept_op(",")) break;
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr node) {
    auto e = make(Expr::Kind::kCall, peek().pos);
    e->args.push_back(std::move(node));
    parse_call_args(*e);
    return e;
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        const size_t pos = next().pos;
        auto e = make(Expr::Kind::kFilter, pos);
        e->name = expect_identifier();
        e->args.push_back(std::move(node));
        if (is_op("(")) parse_call_args(*e);
        node = std::move(e);
      } else if (is_name("is")) {
        const size_t pos = next().pos;
        auto e = make(Expr::Kind::kTest, pos);
        e->negated = accept_name("not");
        e->name = expect_identifier();
        e->args.push_back(std::move(node));
        if (is_op("(")) {
          parse_call_args(*e);
        } else if (peek().type == Token::kString || peek().type == Token::kInt || peek().type == Token::kFloat ||
                   (peek().type == Token::kName && !is_name("and") && !is_name("or") && !is_name("else") &&
                    !is_name("if") && !is_name("in") && !is_name("not") && !is_name("is"))) {
          e->args.push_back(parse_primary());  // `x is divisibleby 3`, `x is equalto 'a'`
        }
        node = std::move(e);
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  const std::string& src_;
  std::vector<Token> toks_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

ParsedTemplate parse_template(const std::string& source) {
  ParsedTemplate t;
  t.source = normalize_source(source);
  Lexer lexer(t.source);
  Parser parser(t.source, lexer.run());
  t.nodes = parser.parse_all();
  return t;
}

}  // namespace vosti::jinja
