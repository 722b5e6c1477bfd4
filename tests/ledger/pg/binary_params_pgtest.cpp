// The writer's binary parameters and its write-then-COMMIT round trip
// (ledger/pg/binary_params.hpp), against the real server: every element type it binds reads back as
// PostgreSQL's own text of the value, and each way the round trip can end gives the exception
// libpqxx would have given, with nothing committed unless it returned.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <string>
#include <thread>
#include <vector>

#include "ledger/pg/binary_params.hpp"
#include "support/test_database.hpp"

namespace payledger::ledger {
namespace {

using testing::TestDatabase;

class BinaryParamsPgTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!db_.available()) GTEST_SKIP() << "no test database";
        connection_ = db_.Connect();
        pqxx::nontransaction{*connection_}.exec(
            "CREATE TABLE kept (id bigint PRIMARY KEY, ints bigint[], texts text[], "
            "bytes bytea[], times timestamptz[], flags boolean[], one bigint)");
        connection_->prepare("keep",
                             "INSERT INTO kept SELECT $1::bigint, $2::bigint[], $3::text[], "
                             "$4::bytea[], $5::timestamptz[], $6::boolean[], $7::bigint");
        connection_->prepare_now("keep");
    }

    // BEGIN, then the statement `name` and COMMIT in one round trip, as the writer does.
    void Run(const std::string& name, const std::vector<std::string>& params) {
        pqxx::nontransaction{*connection_}.exec("BEGIN");
        ExecPreparedThenCommit(*connection_, name, params);
    }

    std::string Kept(const std::string& column, int id) {
        return db_.Scalar("SELECT " + column + "::text FROM kept WHERE id = " + std::to_string(id));
    }

    TestDatabase db_;
    std::unique_ptr<pqxx::connection> connection_;
};

std::vector<std::string> Row(std::int64_t id, BinaryArray& ints, BinaryArray& texts,
                             BinaryArray& bytes, BinaryArray& times, BinaryArray& flags,
                             std::int64_t one) {
    return {BinaryInt8(id), ints.Take(),  texts.Take(),   bytes.Take(),
            times.Take(),   flags.Take(), BinaryInt8(one)};
}

TEST_F(BinaryParamsPgTest, EveryElementTypeReadsBackAsTheServersOwnText) {
    BinaryArray ints{PgType::kInt8}, texts{PgType::kText}, bytes{PgType::kBytea},
        times{PgType::kTimestamptz}, flags{PgType::kBool};
    for (const std::int64_t value :
         {std::int64_t{0}, std::int64_t{-1}, std::int64_t{256}, INT64_MAX, INT64_MIN}) {
        ints.Int8(value);
    }
    ints.Null();
    texts.Bytes("plain");
    texts.Bytes("with \"quotes\", a \\ and a comma");
    texts.Bytes("支付成功 ✓");
    texts.Bytes("");
    texts.Null();
    bytes.Bytes(std::string("\0\x01\xff", 3));
    bytes.Bytes("");
    times.TimeMicros(0);                      // The Unix epoch, before PostgreSQL's.
    times.TimeMicros(946'684'800'000'000);    // PostgreSQL's epoch: 0 on the wire.
    times.TimeMicros(1'795'996'800'123'456);  // With microseconds.
    times.TimeMicros(-1);                     // Just before the Unix epoch.
    flags.Bool(true);
    flags.Bool(false);
    flags.Null();
    Run("keep", Row(1, ints, texts, bytes, times, flags, -42));

    EXPECT_EQ(Kept("ints", 1), "{0,-1,256,9223372036854775807,-9223372036854775808,NULL}");
    EXPECT_EQ(Kept("texts", 1),
              R"({plain,"with \"quotes\", a \\ and a comma","支付成功 ✓","",NULL})");
    EXPECT_EQ(Kept("bytes", 1), R"({"\\x0001ff","\\x"})");
    EXPECT_EQ(db_.Scalar("SELECT array_agg(to_char(t AT TIME ZONE 'UTC', "
                         "'YYYY-MM-DD\"T\"HH24:MI:SS.US')) FROM kept, unnest(times) AS t "
                         "WHERE id = 1"),
              "{1970-01-01T00:00:00.000000,2000-01-01T00:00:00.000000,"
              "2026-11-30T00:00:00.123456,1969-12-31T23:59:59.999999}");
    EXPECT_EQ(Kept("flags", 1), "{t,f,NULL}");
    EXPECT_EQ(Kept("one", 1), "-42");
    // Each Take left its builder empty: the next row's arrays are empty arrays, not NULL.
    Run("keep", Row(2, ints, texts, bytes, times, flags, 0));
    for (const char* column : {"ints", "texts", "bytes", "times", "flags"}) {
        EXPECT_EQ(Kept(column, 2), "{}") << column;
    }
}

TEST_F(BinaryParamsPgTest, ARefusedStatementSkipsTheCommitAndKeepsItsSqlstate) {
    BinaryArray ints{PgType::kInt8}, texts{PgType::kText}, bytes{PgType::kBytea},
        times{PgType::kTimestamptz}, flags{PgType::kBool};
    Run("keep", Row(1, ints, texts, bytes, times, flags, 1));
    try {
        Run("keep", Row(1, ints, texts, bytes, times, flags, 2));  // The same id again.
        FAIL() << "a duplicate key went through";
    } catch (const pqxx::sql_error& e) {
        EXPECT_EQ(e.sqlstate(), "23505");
    }
    // The COMMIT was skipped: the block is still open, and aborted.
    EXPECT_THROW(pqxx::nontransaction{*connection_}.exec("SELECT 1"), pqxx::sql_error);
    pqxx::nontransaction{*connection_}.exec("ROLLBACK");
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM kept"), "1");
    // And the session is usable again, by libpqxx and by the round trip.
    Run("keep", Row(3, ints, texts, bytes, times, flags, 3));
    EXPECT_EQ(db_.Scalar("SELECT string_agg(one::text, ',' ORDER BY id) FROM kept"), "1,3");
}

TEST_F(BinaryParamsPgTest, APipelineOpensItsBlockAndAnswersEachStatementsFirstField) {
    // BEGIN, two statements and COMMIT in one round trip (the writer's batch from its cache).
    BinaryArray ints{PgType::kInt8}, texts{PgType::kText}, bytes{PgType::kBytea},
        times{PgType::kTimestamptz}, flags{PgType::kBool};
    const std::vector<std::optional<std::string>> firsts = ExecPipelineThenCommit(
        *connection_, {{.sql = "BEGIN"},
                       {.sql = "SELECT $1::bigint + 1", .params = {BinaryInt8(41)}},
                       {.name = "keep", .params = Row(1, ints, texts, bytes, times, flags, 1)}});
    ASSERT_EQ(firsts.size(), 3u);
    EXPECT_FALSE(firsts[0].has_value());  // BEGIN has no row.
    EXPECT_EQ(firsts[1], "42");
    EXPECT_FALSE(firsts[2].has_value());
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM kept"), "1");

    // A refusal in the middle skips the rest and the COMMIT: nothing of the block stays.
    try {
        (void)ExecPipelineThenCommit(
            *connection_,
            {{.sql = "BEGIN"},
             {.name = "keep", .params = Row(2, ints, texts, bytes, times, flags, 2)},
             {.sql = "SELECT 1 / $1::bigint", .params = {BinaryInt8(0)}},
             {.name = "keep", .params = Row(3, ints, texts, bytes, times, flags, 3)}});
        FAIL() << "a division by zero went through";
    } catch (const pqxx::sql_error& e) {
        EXPECT_EQ(e.sqlstate(), "22012");
        EXPECT_EQ(e.query(), "SELECT 1 / $1::bigint");
    }
    pqxx::nontransaction{*connection_}.exec("ROLLBACK");
    EXPECT_EQ(db_.Scalar("SELECT string_agg(id::text, ',') FROM kept"), "1");
}

TEST_F(BinaryParamsPgTest, ACommitThatFailsCommitsNothing) {
    // A deferred unique key is checked by COMMIT itself: the statement passes, COMMIT fails.
    pqxx::nontransaction{*connection_}.exec(
        "CREATE TABLE deferred (k bigint UNIQUE DEFERRABLE INITIALLY DEFERRED)");
    connection_->prepare("twice", "INSERT INTO deferred VALUES ($1::bigint), ($1::bigint)");
    connection_->prepare_now("twice");
    try {
        Run("twice", {BinaryInt8(7)});
        FAIL() << "a COMMIT that violates a deferred key succeeded";
    } catch (const pqxx::sql_error& e) {
        EXPECT_EQ(e.sqlstate(), "23505");
    }
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM deferred"), "0");
}

TEST_F(BinaryParamsPgTest, ARollbackClassRefusalIsATransactionRollback) {
    pqxx::nontransaction{*connection_}.exec(
        "CREATE FUNCTION refuse() RETURNS bigint LANGUAGE plpgsql AS $$ BEGIN "
        "RAISE EXCEPTION 'as if serialization failed' USING ERRCODE = '40001'; END $$");
    connection_->prepare("refuse", "SELECT refuse() + $1::bigint");
    connection_->prepare_now("refuse");
    EXPECT_THROW(Run("refuse", {BinaryInt8(1)}), pqxx::transaction_rollback);
}

TEST_F(BinaryParamsPgTest, AStatementRefusedAsItsSessionEndsCommittedNothing) {
    // The server answers the statement with an error (57P01, admin_shutdown) and closes the
    // session: the COMMIT behind it never ran, so this is a refusal, not an outcome in doubt,
    // and the session is closed for the committer to replace (IdleSessionEnded).
    connection_->prepare("vanish",
                         "INSERT INTO kept (id) SELECT $1::bigint "
                         "WHERE pg_terminate_backend(pg_backend_pid())");
    connection_->prepare_now("vanish");
    try {
        Run("vanish", {BinaryInt8(1)});
        FAIL() << "a statement whose session ended returned";
    } catch (const pqxx::sql_error& e) {
        EXPECT_EQ(e.sqlstate(), "57P01");
    }
    EXPECT_FALSE(connection_->is_open());
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM kept"), "0");
}

TEST_F(BinaryParamsPgTest,
       ASessionLostBeforeTheAnswerLeavesTheOutcomeInDoubtAndItMayHaveCommitted) {
    // The statement waits for an advisory lock held here; meanwhile the client's end of the
    // session is shut. The statement and COMMIT were already sent, so once the lock is free
    // the server commits them, while the client saw only a lost session: in doubt, which the
    // committer never retries (answered 503, the platform's retry is exact;
    // docs/write-path.md#in-doubt-commits).
    connection_->prepare("wait_then_keep",
                         "INSERT INTO kept (id) SELECT $1::bigint "
                         "FROM (SELECT pg_advisory_xact_lock(4242)) AS locked");
    connection_->prepare_now("wait_then_keep");
    const int backend = connection_->backendpid();
    auto holder = db_.Connect();
    pqxx::nontransaction{*holder}.exec("SELECT pg_advisory_lock(4242)");
    std::thread cut([&] {
        testing::AwaitLockWaiters(db_, testing::kAdvisoryWaitersSql);
        ::shutdown(connection_->sock(), SHUT_RDWR);
        pqxx::nontransaction{*holder}.exec("SELECT pg_advisory_unlock(4242)");
    });
    EXPECT_THROW(Run("wait_then_keep", {BinaryInt8(9)}), pqxx::in_doubt_error);
    cut.join();
    // It did commit: the server's session ends after its COMMIT, when it finds the client gone.
    testing::AwaitSessionDone(db_, backend);
    EXPECT_EQ(db_.Scalar("SELECT count(*) FROM kept WHERE id = 9"), "1");
}

}  // namespace
}  // namespace payledger::ledger
