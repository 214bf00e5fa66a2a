#include "core/status.h"

#include <cstdio>
#include <cstdlib>

namespace vosti {

void check_failed(const char* file, int line, const char* expr, const std::string& message) {
  std::fprintf(stderr, "vosti: internal check failed at %s:%d: %s%s%s\n", file, line, expr, message.empty() ? "" : ": ",
               message.c_str());
  std::fflush(stderr);
  std::abort();
}

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case StatusCode::kNotFound:
      return "NOT_FOUND";
    case StatusCode::kOutOfRange:
      return "OUT_OF_RANGE";
    case StatusCode::kUnimplemented:
      return "UNIMPLEMENTED";
    case StatusCode::kDataLoss:
      return "DATA_LOSS";
    case StatusCode::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    case StatusCode::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case StatusCode::kInternal:
      return "INTERNAL";
  }
  return "UNKNOWN";
}

std::string Status::to_string() const {
  if (ok()) return "OK";
  return std::string(status_code_name(code_)) + ": " + message_;
}

Status Status::with_context(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
Status out_of_range(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
Status unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
Status data_loss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
Status resource_exhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
Status failed_precondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
Status internal_error(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

}  // namespace vosti
