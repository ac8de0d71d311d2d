// Errors the API answers with: an HTTP status and a body in the shape of the request's dialect
// (OpenAI's {"error": {"message", "type", "param", "code"}} unless the route says otherwise).
// Handlers throw ApiError; the router turns it into the response.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/sampling/params.h"
#include "server/http_types.h"

namespace ggufd::server {

class ApiError : public std::runtime_error {
  public:
    ApiError(int status, std::string type, const std::string& message, std::string param = {},
             std::string code = {});

    int status() const { return status_; }
    const std::string& type() const { return type_; }
    const std::string& param() const { return param_; }  // the offending request field, if any
    const std::string& code() const { return code_; }
    int retry_after_s() const { return retry_after_s_; }  // > 0: send a Retry-After header

    ApiError& with_retry_after(int seconds) {
        retry_after_s_ = seconds;
        return *this;
    }

    // The usual cases.
    static ApiError bad_request(const std::string& message, std::string param = {},
                                std::string code = {});
    static ApiError unauthorized(const std::string& message);
    static ApiError not_found(const std::string& message, std::string code = "not_found");
    static ApiError method_not_allowed(const std::string& message);
    static ApiError too_large(const std::string& message);
    static ApiError unavailable(const std::string& message, std::string code, int retry_after_s);
    static ApiError internal(const std::string& message);
    // A request parameter the engine's field readers or checks refuse: the client's to fix.
    static ApiError invalid_param(const sampling::InvalidParam& e);

  private:
    int status_;
    std::string type_;
    std::string param_;
    std::string code_;
    int retry_after_s_ = 0;
};

// The error bodies of the dialects: OpenAI's (its Responses API's too), Anthropic's
// {"type": "error", "error": {"type", "message"}} with its type names, Ollama's {"error": message}.
enum class ErrorShape { openai, anthropic, ollama };

// Which shape a request path's errors take, unknown routes included: /v1/messages... Anthropic's,
// /api/... Ollama's, everything else OpenAI's.
ErrorShape error_shape_of(std::string_view path);

nlohmann::json error_json(const ApiError& error, ErrorShape shape = ErrorShape::openai);

// The response for an error: its status, body, Retry-After when it has one, WWW-Authenticate for
// a 401.
HttpResponse error_response(const ApiError& error, ErrorShape shape = ErrorShape::openai);

}  // namespace ggufd::server
