#include "server/auth.h"

#include <cctype>

namespace ggufd::server {

bool constant_time_equals(std::string_view given, std::string_view secret) {
    // A volatile accumulator keeps the compiler from turning the loop into an early-exit compare.
    volatile unsigned char diff = given.size() == secret.size() ? 0 : 1;
    for (size_t i = 0; i < secret.size(); ++i) {
        unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
        diff = diff | (g ^ static_cast<unsigned char>(secret[i]));
    }
    return diff == 0;
}

namespace {

// Every key is compared (no early exit) so the time does not reveal which one matched.
bool one_of(std::string_view token, const std::vector<std::string>& keys) {
    bool ok = false;
    for (const auto& key : keys) {
        bool match = constant_time_equals(token, key);
        ok = ok || match;
    }
    return ok && !token.empty();
}

}  // namespace

bool key_authorized(std::optional<std::string_view> authorization,
                    std::optional<std::string_view> api_key, const std::vector<std::string>& keys) {
    if (api_key && one_of(*api_key, keys)) return true;
    if (!authorization) return false;
    std::string_view value = *authorization;
    constexpr std::string_view scheme = "bearer ";
    if (value.size() < scheme.size()) return false;
    for (size_t i = 0; i < scheme.size(); ++i) {
        if (std::tolower(static_cast<unsigned char>(value[i])) != scheme[i]) return false;
    }
    std::string_view token = value.substr(scheme.size());
    while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
    while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
    return one_of(token, keys);
}

}  // namespace ggufd::server
