// API-key checking. Keys are secrets: compared in time independent of where they differ, and
// never logged.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ggufd::server {

// Equal strings? The time taken depends only on the length of `secret`, not on the contents of
// either string nor on where they first differ.
bool constant_time_equals(std::string_view given, std::string_view secret);

// True when `authorization` (the header's value, if any) is "Bearer <key>" for one of `keys`, or
// `api_key` (Anthropic's x-api-key header, if any) is one of them. Every key is compared (no
// early exit) so the time does not reveal which one matched.
bool key_authorized(std::optional<std::string_view> authorization,
                    std::optional<std::string_view> api_key, const std::vector<std::string>& keys);

}  // namespace ggufd::server
