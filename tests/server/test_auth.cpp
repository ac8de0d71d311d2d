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

TEST(KeyAuthorized, ChecksSchemeAndEveryKey) {
    std::vector<std::string> keys = {"k1", "k2"};
    EXPECT_TRUE(key_authorized("Bearer k1", std::nullopt, keys));
    EXPECT_TRUE(key_authorized("bearer k2", std::nullopt, keys));
    EXPECT_TRUE(key_authorized("Bearer  k2 ", std::nullopt, keys));
    EXPECT_FALSE(key_authorized("Bearer k3", std::nullopt, keys));
    EXPECT_FALSE(key_authorized("Basic k1", std::nullopt, keys));
    EXPECT_FALSE(key_authorized("k1", std::nullopt, keys));
    EXPECT_FALSE(key_authorized("Bearer ", std::nullopt, keys));
    EXPECT_FALSE(key_authorized(std::nullopt, std::nullopt, keys));
    EXPECT_FALSE(key_authorized("Bearer ", std::nullopt, {""}));
}

// Anthropic's clients send the key as x-api-key; either header may carry it.
TEST(KeyAuthorized, TakesTheKeyFromXApiKeyToo) {
    std::vector<std::string> keys = {"k1", "k2"};
    EXPECT_TRUE(key_authorized(std::nullopt, "k2", keys));
    EXPECT_TRUE(key_authorized("Bearer wrong", "k1", keys));
    EXPECT_TRUE(key_authorized("Bearer k1", "wrong", keys));
    EXPECT_FALSE(key_authorized(std::nullopt, "k3", keys));
    EXPECT_FALSE(key_authorized(std::nullopt, "Bearer k1", keys));
    EXPECT_FALSE(key_authorized(std::nullopt, "", {""}));
}

}  // namespace
}  // namespace ggufd::server
