#include "server/api_error.h"

#include <utility>

namespace ggufd::server {

ApiError::ApiError(int status, std::string type, const std::string& message, std::string param,
                   std::string code)
    : std::runtime_error(message),
      status_(status),
      type_(std::move(type)),
      param_(std::move(param)),
      code_(std::move(code)) {}

ApiError ApiError::bad_request(const std::string& message, std::string param, std::string code) {
    return ApiError(400, "invalid_request_error", message, std::move(param), std::move(code));
}

ApiError ApiError::invalid_param(const sampling::InvalidParam& e) {
    return bad_request(e.what(), e.param());
}

ApiError ApiError::unauthorized(const std::string& message) {
    return ApiError(401, "invalid_request_error", message, {}, "invalid_api_key");
}

ApiError ApiError::not_found(const std::string& message, std::string code) {
    return ApiError(404, "invalid_request_error", message, {}, std::move(code));
}

ApiError ApiError::method_not_allowed(const std::string& message) {
    return ApiError(405, "invalid_request_error", message, {}, "method_not_allowed");
}

ApiError ApiError::too_large(const std::string& message) {
    return ApiError(413, "invalid_request_error", message, {}, "request_too_large");
}

ApiError ApiError::unavailable(const std::string& message, std::string code, int retry_after_s) {
    ApiError e(503, "server_error", message, {}, std::move(code));
    e.with_retry_after(retry_after_s);
    return e;
}

ApiError ApiError::internal(const std::string& message) {
    return ApiError(500, "server_error", message, {}, "internal_error");
}

nlohmann::json error_json(const ApiError& error) {
    nlohmann::json body = {{"message", error.what()}, {"type", error.type()}};
    body["param"] = error.param().empty() ? nlohmann::json() : nlohmann::json(error.param());
    body["code"] = error.code().empty() ? nlohmann::json() : nlohmann::json(error.code());
    return {{"error", std::move(body)}};
}

}  // namespace ggufd::server
