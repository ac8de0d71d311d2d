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

ErrorShape error_shape_of(std::string_view path) {
    if (path == "/v1/messages" || path.starts_with("/v1/messages/")) return ErrorShape::anthropic;
    if (path.starts_with("/api/")) return ErrorShape::ollama;
    return ErrorShape::openai;
}

namespace {

// Anthropic's error type for a status.
const char* anthropic_type(int status) {
    switch (status) {
        case 400:
        case 405:
            return "invalid_request_error";
        case 401:
            return "authentication_error";
        case 403:
            return "permission_error";
        case 404:
            return "not_found_error";
        case 413:
            return "request_too_large";
        case 429:
            return "rate_limit_error";
        case 503:
            return "overloaded_error";
        default:
            return "api_error";
    }
}

}  // namespace

nlohmann::json error_json(const ApiError& error, ErrorShape shape) {
    if (shape == ErrorShape::anthropic) {
        return {{"type", "error"},
                {"error", {{"type", anthropic_type(error.status())}, {"message", error.what()}}}};
    }
    if (shape == ErrorShape::ollama) return {{"error", error.what()}};
    nlohmann::json body = {{"message", error.what()}, {"type", error.type()}};
    body["param"] = error.param().empty() ? nlohmann::json() : nlohmann::json(error.param());
    body["code"] = error.code().empty() ? nlohmann::json() : nlohmann::json(error.code());
    return {{"error", std::move(body)}};
}

HttpResponse error_response(const ApiError& error, ErrorShape shape) {
    HttpResponse r;
    r.status = error.status();
    r.body =
        error_json(error, shape).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (error.retry_after_s() > 0) {
        r.headers.emplace_back("Retry-After", std::to_string(error.retry_after_s()));
    }
    if (error.status() == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer");
    return r;
}

}  // namespace ggufd::server
