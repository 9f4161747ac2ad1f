// One test that passes and one that skips itself: CTest must run both and report the
// second as skipped (tests/cmake/check_discovery.sh).
#include <gtest/gtest.h>

TEST(Discovery, Passes) { EXPECT_EQ(1 + 1, 2); }

TEST(Discovery, SkipsItself) { GTEST_SKIP() << "skipped on purpose"; }
