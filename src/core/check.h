// VOSTI_CHECK: internal invariants. A failed check prints file:line and the
// message and aborts; it is never used for user input (use Status for that).
// VOSTI_DCHECK is compiled only in debug builds (NDEBUG unset).
#pragma once

#include <string>

namespace vosti {
[[noreturn]] void check_failed(const char* file, int line, const char* expr, const std::string& message);
}  // namespace vosti

#define VOSTI_CHECK(cond, ...)                                                               \
  do {                                                                                       \
    if (!(cond)) ::vosti::check_failed(__FILE__, __LINE__, #cond, std::string(__VA_ARGS__)); \
  } while (0)

#ifdef NDEBUG
#define VOSTI_DCHECK(cond, ...) \
  do {                          \
  } while (0)
#else
#define VOSTI_DCHECK(cond, ...) VOSTI_CHECK(cond, __VA_ARGS__)
#endif
