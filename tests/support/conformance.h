// Locating the shared conformance data (../shared/conformance, made by llama.cpp and Jinja2).
#pragma once

#include <filesystem>
#include <string>

namespace ggufd::testing {

// The conformance folder: $GGUFD_CONFORMANCE_DIR, else the build's default (../shared/conformance
// beside the repository). Empty when it does not exist.
std::filesystem::path conformance_dir();

// True when running under CI (the CI environment variable is set and not "false"/"0").
bool running_in_ci();

}  // namespace ggufd::testing

// Use at the top of a test that needs the conformance data: yields `dir`, or skips the test
// (fails it under CI, where missing oracle data must never pass silently).
#define GGUFD_REQUIRE_CONFORMANCE(dir)                                                 \
    const std::filesystem::path dir = ::ggufd::testing::conformance_dir();             \
    if (dir.empty()) {                                                                 \
        if (::ggufd::testing::running_in_ci()) {                                       \
            FAIL() << "conformance data missing (set GGUFD_CONFORMANCE_DIR); CI=true"; \
        }                                                                              \
        GTEST_SKIP() << "conformance data not found; set GGUFD_CONFORMANCE_DIR";       \
    }
