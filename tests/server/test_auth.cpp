#include <gtest/gtest.h>

#include "server/auth.h"

namespace ggufd::server {
namespace {

TEST(ConstantTimeEquals, ComparesWholeStrings) {
    EXPECT_TRUE(constant_time_equals("secret", "secret"));
    EXPECT_FALSE(constant_time_equals("secreT", "secret"));
    EXPECT_FALSE(constant_time_equals("secret1", "secret"));
    EXPECT_FALSE(constant_time_equals("secre", "secret"));
    EXPECT_FALSE(constant_time_equals("", "secret"));
    EXPECT_TRUE(constant_time_equals("", ""));
    // A prefix of the given string equal to the secret is not a match.
    EXPECT_FALSE(constant_time_equals(std::string("secret\0", 7), "secret"));
}

TEST(BearerAuthorized, ChecksSchemeAndEveryKey) {
    std::vector<std::string> keys = {"k1", "k2"};
    EXPECT_TRUE(bearer_authorized("Bearer k1", keys));
    EXPECT_TRUE(bearer_authorized("bearer k2", keys));
    EXPECT_TRUE(bearer_authorized("Bearer  k2 ", keys));
    EXPECT_FALSE(bearer_authorized("Bearer k3", keys));
    EXPECT_FALSE(bearer_authorized("Basic k1", keys));
    EXPECT_FALSE(bearer_authorized("k1", keys));
    EXPECT_FALSE(bearer_authorized("Bearer ", keys));
    EXPECT_FALSE(bearer_authorized(std::nullopt, keys));
    EXPECT_FALSE(bearer_authorized("Bearer ", {""}));
}

}  // namespace
}  // namespace ggufd::server
