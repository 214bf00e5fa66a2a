#include "server/api_error.h"

#include "server/json_writer.h"

namespace vosti {

ApiError bad_request(std::string message, std::string param) {
  ApiError e;
  e.http_status = 400;
  e.message = std::move(message);
  e.param = std::move(param);
  return e;
}

std::string error_json(const ApiError& error) {
  JsonWriter w;
  w.begin_object().key("error").begin_object();
  w.key("message").value(error.message);
  w.key("type").value(error.type);
  w.key("param");
  if (error.param.empty()) {
    w.null();
  } else {
    w.value(error.param);
  }
  w.key("code");
  if (error.code.empty()) {
    w.null();
  } else {
    w.value(error.code);
  }
  w.end_object().end_object();
  return w.take();
}

}  // namespace vosti
