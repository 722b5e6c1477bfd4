// Tests of ledger/pg/conninfo.hpp against docs/availability.md#failover: a database_url naming
// several hosts without target_session_attrs gets target_session_attrs=read-write, in both forms
// libpq reads (URI and key=value), and every other option reads the same afterwards (checked with
// libpq's own parser); one host, or a target_session_attrs of the operator's, is left as written;
// what libpq cannot parse throws. The environment is not consulted here: the strings name their
// hosts.
#include "ledger/pg/conninfo.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace payledger::ledger {
namespace {

// `conninfo`'s options plus target_session_attrs=read-write: what ForWrites must read as.
std::map<std::string, std::string> WithReadWrite(const std::string& conninfo) {
    std::map<std::string, std::string> options = ParseConninfo(conninfo);
    options["target_session_attrs"] = "read-write";
    return options;
}

TEST(ForWrites, OneHostIsLeftAsWritten) {
    for (const char* url : {"postgresql://ledger@db/payledger", "postgresql://db:5433/payledger",
                            "host=db port=5432 dbname=payledger",
                            "postgresql://postgres@/payledger?host=/tmp/pg&port=5432", ""}) {
        EXPECT_EQ(ForWrites(url), url);
    }
}

TEST(ForWrites, SeveralHostsInAUriGetReadWriteAppendedToItsQuery) {
    EXPECT_EQ(ForWrites("postgresql://ledger@h1:5432,h2:5432/payledger"),
              "postgresql://ledger@h1:5432,h2:5432/payledger?target_session_attrs=read-write");
    EXPECT_EQ(ForWrites("postgres://h1,h2/payledger?connect_timeout=3"),
              "postgres://h1,h2/payledger?connect_timeout=3&target_session_attrs=read-write");
    // The hosts in the query (unix sockets, as the tests' clusters are named).
    EXPECT_EQ(ForWrites("postgresql://postgres@/payledger?host=/run/a,/run/b&port=5432,5433"),
              "postgresql://postgres@/payledger?host=/run/a,/run/b&port=5432,5433"
              "&target_session_attrs=read-write");
}

TEST(ForWrites, SeveralHostsInKeyValueTextGetReadWriteAppended) {
    EXPECT_EQ(ForWrites("host=h1,h2 port=5432,5433 dbname=payledger"),
              "host=h1,h2 port=5432,5433 dbname=payledger target_session_attrs=read-write");
    EXPECT_EQ(ForWrites("hostaddr=10.0.0.1,10.0.0.2 dbname=payledger"),
              "hostaddr=10.0.0.1,10.0.0.2 dbname=payledger target_session_attrs=read-write");
    // A quoted value with spaces and an escaped quote reads the same afterwards.
    const std::string quoted = R"(host=h1,h2 password='it\'s a secret' dbname=payledger)";
    EXPECT_EQ(ParseConninfo(ForWrites(quoted)), WithReadWrite(quoted));
    EXPECT_EQ(ParseConninfo(ForWrites(quoted)).at("password"), "it's a secret");
}

TEST(ForWrites, TheOperatorsOwnTargetSessionAttrsStands) {
    for (const char* url : {"postgresql://h1,h2/payledger?target_session_attrs=any",
                            "postgresql://h1,h2/payledger?target_session_attrs=read-write",
                            "host=h1,h2 target_session_attrs=primary"}) {
        EXPECT_EQ(ForWrites(url), url);
    }
}

TEST(ForWrites, EveryOtherOptionReadsTheSameAfterTheRewrite) {
    for (const char* url : {
             "postgresql://u:p%3Fw%26x@h1,h2/db",               // Encoded ? and & in the password.
             "postgresql://u@h1,h2/db?application_name=a%20b",  // An encoded space.
             "postgresql://u@[::1]:5432,h2:5433/db",            // An IPv6 host.
             "postgresql://h1,h2",                              // No database, no query.
             "host=h1,,h2 dbname=db",                           // An empty entry: the default.
         }) {
        SCOPED_TRACE(url);
        const std::string rewritten = ForWrites(url);
        EXPECT_NE(rewritten, url);
        EXPECT_EQ(ParseConninfo(rewritten), WithReadWrite(url));
    }
}

TEST(ForWrites, AUriThatAppendingWouldChangeIsRewrittenAsKeyValueText) {
    // libpq reads a raw '?' inside the user info as part of the password; appending "&..."
    // would then land in the database name. The same options are written as key=value.
    const std::string url = "postgresql://u:p?w@h1,h2/db";
    ASSERT_EQ(ParseConninfo(url).at("password"), "p?w");
    const std::string rewritten = ForWrites(url);
    EXPECT_EQ(rewritten.rfind("postgresql://", 0), std::string::npos) << rewritten;
    EXPECT_EQ(ParseConninfo(rewritten), WithReadWrite(url));
}

TEST(ForWrites, WhatLibpqCannotParseThrows) {
    for (const char* url : {"postgresql://h1,h2/db?no_such_option=1", "host='unterminated",
                            "host=h1 nonsense", "postgresql://h1,h2/db?port=%zz"}) {
        SCOPED_TRACE(url);
        EXPECT_THROW((void)ForWrites(url), ConninfoError);
    }
}

TEST(ConninfoHostCount, CountsTheHostsLibpqWillTry) {
    EXPECT_EQ(ConninfoHostCount("postgresql://h1:1,h2:2,h3:3/db"), 3u);
    EXPECT_EQ(ConninfoHostCount("host=a,b"), 2u);
    EXPECT_EQ(ConninfoHostCount("host=a hostaddr=10.0.0.1,10.0.0.2"), 2u);
    EXPECT_EQ(ConninfoHostCount("postgresql://db/payledger"), 1u);
}

}  // namespace
}  // namespace payledger::ledger
