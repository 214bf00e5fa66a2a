// ApiError: an HTTP error in OpenAI's shape {"error":{"message","type","param","code"}}.
// Messages name the offending field and the fix. Thread safety: a value type.
#pragma once

#include <string>

namespace vosti {

struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending field, empty if none
  std::string code;   // machine-readable code, empty if none
};

// 400 invalid_request_error about `param`.
ApiError bad_request(std::string message, std::string param = "");
// The JSON body for `error` (param/code are null when empty).
std::string error_json(const ApiError& error);

}  // namespace vosti
