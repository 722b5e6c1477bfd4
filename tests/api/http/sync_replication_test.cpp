// Tests of api/http/metrics.hpp's AnyStandbyConfirms: which values of synchronous_standby_names
// let any standby confirm a commit (a '*' among the names, in each of PostgreSQL's forms), and
// which name standbys only.

#include <gtest/gtest.h>

#include "api/http/metrics.hpp"

namespace payledger::api {
namespace {

TEST(AnyStandbyConfirms, IsTrueWhenTheNamesHoldAStar) {
    for (const char* names : {"*", " * ", "FIRST 1 (*)", "1 (*)", "ANY 1 (s1, *)", "s1,*",
                              "2 ( s1 ,* )", "\"*\"", "ANY 2 (\"s1\", \"*\")"}) {
        EXPECT_TRUE(AnyStandbyConfirms(names)) << names;
    }
}

TEST(AnyStandbyConfirms, IsFalseForNamedStandbysAndForNone) {
    for (const char* names : {"", "node2", "\"node2\"", "FIRST 1 (node1, node2)", "ANY 1 (s1, s2)",
                              "s*", "\"s*\"", "**"}) {
        EXPECT_FALSE(AnyStandbyConfirms(names)) << names;
    }
}

}  // namespace
}  // namespace payledger::api
