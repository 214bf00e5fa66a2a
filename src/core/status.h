// Status and Result<T>: how errors cross boundaries (files, network, user input).
//
// Invariants: an ok Status has an empty message; a Result holds exactly one of
// a value or a non-ok Status. Internal invariants use VOSTI_CHECK (check.h) instead.
// Thread safety: value types, no shared state.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "core/check.h"

namespace vosti {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // the caller's input is wrong (request, flag, file content)
  kNotFound,           // a file, key, model or request does not exist
  kOutOfRange,         // an index, length or size beyond its limit
  kUnimplemented,      // a valid input that Vosti does not support (yet)
  kDataLoss,           // a file is truncated or corrupt
  kResourceExhausted,  // out of memory, blocks, or queue space
  kFailedPrecondition,
  kInternal,
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: message"
  std::string to_string() const;
  // Returns a copy whose message is "context: message".
  Status with_context(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

Status invalid_argument(std::string message);
Status not_found(std::string message);
Status out_of_range(std::string message);
Status unimplemented(std::string message);
Status data_loss(std::string message);
Status resource_exhausted(std::string message);
Status failed_precondition(std::string message);
Status internal_error(std::string message);

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT: implicit by design
    VOSTI_CHECK(!std::get<Status>(v_).ok(), "Result built from an ok Status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  // REQUIRES: ok().
  T& value() & {
    VOSTI_CHECK(ok(), "Result::value() on error: " + std::get<Status>(v_).to_string());
    return std::get<T>(v_);
  }
  const T& value() const& {
    VOSTI_CHECK(ok(), "Result::value() on error: " + std::get<Status>(v_).to_string());
    return std::get<T>(v_);
  }
  T&& value() && {
    VOSTI_CHECK(ok(), "Result::value() on error: " + std::get<Status>(v_).to_string());
    return std::get<T>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace vosti

#define VOSTI_CONCAT_INNER(a, b) a##b
#define VOSTI_CONCAT(a, b) VOSTI_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function if `expr` (a Status) is not ok.
#define VOSTI_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::vosti::Status vosti_status_ = (expr);        \
    if (!vosti_status_.ok()) return vosti_status_; \
  } while (0)

// VOSTI_ASSIGN_OR_RETURN(auto x, ResultExpr): unwraps or returns the error.
#define VOSTI_ASSIGN_OR_RETURN(lhs, expr)                                                                 \
  auto VOSTI_CONCAT(vosti_result_, __LINE__) = (expr);                                                    \
  if (!VOSTI_CONCAT(vosti_result_, __LINE__).ok()) return VOSTI_CONCAT(vosti_result_, __LINE__).status(); \
  lhs = std::move(VOSTI_CONCAT(vosti_result_, __LINE__)).value()
