#include "tests/support/conformance.h"

#include <cstdlib>
#include <string_view>

namespace ggufd::testing {

std::filesystem::path conformance_dir() {
    const char* env = std::getenv("GGUFD_CONFORMANCE_DIR");
    std::filesystem::path dir = (env && *env) ? env : GGUFD_DEFAULT_CONFORMANCE_DIR;
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) return {};
    return std::filesystem::weakly_canonical(dir, ec);
}

bool running_in_ci() {
    const char* ci = std::getenv("CI");
    if (!ci) return false;
    std::string_view v(ci);
    return !v.empty() && v != "false" && v != "0";
}

}  // namespace ggufd::testing
