// Evaluator of the chat-template interpreter: renders a parsed tree against a context
// with Jinja2 semantics (scoping: for bodies are their own scope, `set` elsewhere writes
// the template scope; undefined variables print as "" but their attributes raise, as
// jinja2.Undefined does; sandboxed: no list/dict mutation except namespace attributes).
//
// Invariants: render() either returns the full output or throws TemplateError.
// Thread safety: render() has no shared state; the tree and context are only read.
#pragma once

#include <string>

#include "tokenizer/jinja_ast.h"

namespace vosti::jinja {

// REQUIRES: context is a dict. Throws TemplateError.
std::string render(const ParsedTemplate& tmpl, const Value& context);

// Built-ins (jinja_builtins.cc). Each throws TemplateError on bad arguments.
Value apply_filter(const std::string& name, const Value& subject, CallArgs& args);
bool apply_test(const std::string& name, const Value& subject, CallArgs& args);
// A method of a str or dict (`s.startswith('x')`, `d.items()`); *found = false when `obj` has none named so.
Value call_method(const Value& obj, const std::string& name, CallArgs& args, bool* found);
// The global functions transformers defines: raise_exception, namespace, strftime_now, range, dict.
Dict global_functions();
// Python's len() for str (code points), list, dict; throws for other types.
int64_t python_len(const Value& v);
// Python iteration: list items, dict keys, str characters; undefined -> empty.
List iterate(const Value& v);

}  // namespace vosti::jinja
