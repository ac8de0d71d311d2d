// The API handlers' one way to answer with a JSON body. Not in http_types.h, which stays free of
// nlohmann (fuzz_http_request links it without JSON).
#pragma once

#include <nlohmann/json.hpp>

#include "server/http_types.h"
#include "server/responses.h"

namespace ggufd::server {

inline HttpResponse json_response(int status, const nlohmann::json& body) {
    HttpResponse r;
    r.status = status;
    r.body = dump_json(body);
    return r;
}

}  // namespace ggufd::server
