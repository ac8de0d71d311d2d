// The ApiError a request parser throws, for the parsers' tests.
#pragma once

#include <gtest/gtest.h>

#include "server/api_error.h"

namespace ggufd::server::testing {

// The ApiError `parse` throws; fails the test when it does not throw.
template <class F>
ApiError error_of(F&& parse) {
    try {
        parse();
    } catch (const ApiError& e) {
        return e;
    }
    ADD_FAILURE() << "expected an ApiError";
    return ApiError::internal("no error");
}

}  // namespace ggufd::server::testing
