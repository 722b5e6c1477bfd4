// A commit that PostgreSQL kept local only is never an acknowledgement. With
// synchronous_standby_names set, a COMMIT waits for the standby; when that wait is cancelled
// (pg_cancel_backend here, or pg_terminate_backend; a statement_timeout does not end it) the server
// commits locally, sends a WARNING and answers the COMMIT as a success. A failover at that moment
// would lose the batch, so its deliveries must be answered unavailable, like any commit in doubt.
// - On a cluster of the test's own (support/own_cluster.hpp) with a synchronous standby: the
//   standby is stopped, a delivery's COMMIT waits (found in pg_stat_activity by its wait event
//   SyncRep and the committer's application_name) and is cancelled. The delivery is answered
//   unavailable, the event is in the table nonetheless (the same delivery later is a
//   `duplicate`), and the committer goes on writing.
// - On the shared test server: any other WARNING raised inside a pipeline (as every commit gets
//   in the transaction-id wraparound zone) leaves its COMMIT acknowledged, and the notice
//   capture leaves libpqxx's own notice handling as it was (its error handlers see the notices
//   during the pipeline and after). Only the wait's own warnings, from syncrep.c, are in doubt.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ledger/pg/binary_params.hpp"
#include "ledger/pg/database.hpp"
#include "ledger/pg/failures.hpp"
#include "ledger/pg/migrate.hpp"
#include "ledger/write/committer.hpp"
#include "support/deliveries.hpp"
#include "support/own_cluster.hpp"
#include "support/polling.hpp"
#include "support/test_database.hpp"

namespace payledger::ledger {
namespace {

using projections::Outcome;
using testing::Eventually;
using testing::OrderRegistration;
using testing::OwnCluster;
using testing::QueryScalar;

constexpr const char* kWriterName = "payledger sync-cancel test";

// Submits `delivery`; the committer's answer comes through the future.
std::future<DeliveryResult> Submit(Committer& committer, Delivery delivery) {
    auto answer = std::make_shared<std::promise<DeliveryResult>>();
    std::future<DeliveryResult> future = answer->get_future();
    committer.Submit(std::move(delivery), [answer](DeliveryResult r) { answer->set_value(r); });
    return future;
}

// Waits (up to 120 s, then fails the test) for the answer.
DeliveryResult Await(std::future<DeliveryResult>& answer) {
    if (answer.wait_for(std::chrono::seconds{120}) != std::future_status::ready) {
        ADD_FAILURE() << "the delivery was never answered";
        return {};
    }
    return answer.get();
}

TEST(SyncCancelPgTest, ACancelledWaitForTheStandbyIsAnsweredUnavailableButCommittedLocally) {
    OwnCluster cluster{/*synchronous=*/true};
    {
        auto connection = Connect(cluster.PrimaryUrl());
        (void)Migrate(*connection);
    }
    // Long limits: only the test's pg_cancel_backend may end the wait.
    Committer committer{
        {.url = cluster.PrimaryUrl(), .session = testing::PatientSession(kWriterName)}};
    std::future<DeliveryResult> warm = Submit(committer, OrderRegistration("ORD-WARM"));
    ASSERT_EQ(Await(warm).outcome, Outcome::kAppended);

    cluster.StopStandby();
    std::future<DeliveryResult> waiting = Submit(committer, OrderRegistration("ORD-SYNC"));
    auto admin = Connect(cluster.PrimaryUrl(), testing::PatientSession("sync-cancel admin"));
    const std::string find_waiting =
        std::string(
            "SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND "
            "application_name = '") +
        kWriterName + "'";
    std::string pid;
    ASSERT_TRUE(Eventually(
        [&] {
            pid = QueryScalar(*admin, find_waiting);
            return !pid.empty();
        },
        std::chrono::seconds{60}))
        << "the committer's COMMIT never waited for the standby";
    EXPECT_EQ(QueryScalar(*admin, "SELECT pg_cancel_backend(" + pid + ")"), "t");

    const DeliveryResult cancelled = Await(waiting);
    EXPECT_EQ(cancelled.outcome, Outcome::kUnavailable) << cancelled.message;
    EXPECT_TRUE(cancelled.failure == FailureKind::kInDoubt);  // 503, never retried.
    // The operator's log names the cancelled wait; the answer names no server.
    EXPECT_NE(cancelled.detail.find("synchronous"), std::string::npos) << cancelled.detail;
    EXPECT_EQ(cancelled.message, "commit outcome unknown");
    // Committed locally all the same, and only once (never retried).
    EXPECT_EQ(
        QueryScalar(*admin, "SELECT count(*) FROM ledger_events WHERE out_trade_no = 'ORD-SYNC'"),
        "1");
    EXPECT_EQ(QueryScalar(*admin,
                          "SELECT count(*) FROM callback_receipts WHERE out_trade_no = 'ORD-SYNC'"),
              "1");

    // With the standby back, the platform's retry of the same delivery finds it, and the
    // committer goes on writing.
    cluster.StartStandby();
    std::future<DeliveryResult> retried = Submit(committer, OrderRegistration("ORD-SYNC"));
    EXPECT_EQ(Await(retried).outcome, Outcome::kDuplicate);
    std::future<DeliveryResult> after = Submit(committer, OrderRegistration("ORD-AFTER"));
    EXPECT_EQ(Await(after).outcome, Outcome::kAppended);
    committer.Stop();
    EXPECT_EQ(QueryScalar(*admin, "SELECT count(*) FROM ledger_events"), "3");
}

// Keeps every notice libpqxx hands its error handlers.
class Notices final : public pqxx::errorhandler {
public:
    explicit Notices(pqxx::connection_base& connection) : pqxx::errorhandler(connection) {}
    bool operator()(const char message[]) noexcept override {
        try {
            texts.emplace_back(message);
        } catch (...) {
        }
        return false;  // Not printed on stderr by the default handler.
    }
    std::vector<std::string> texts;
};

bool AnyContains(const std::vector<std::string>& texts, const std::string& part) {
    for (const std::string& text : texts) {
        if (text.find(part) != std::string::npos) return true;
    }
    return false;
}

// payledger's sessions do not inherit a weaker synchronous_commit from the database or the role:
// `local` or `off` there would acknowledge commits the synchronous standby does not hold (or
// that are not even flushed). `remote_apply`, stronger, is kept.
TEST(PipelineWarningPgTest, SessionsCommitAtLeastSynchronouslyWhateverTheDatabaseSays) {
    testing::TestDatabase db;
    PAYLEDGER_REQUIRE_DATABASE(db);
    const auto setting_with = [&](const std::string& database_default) {
        (void)db.Scalar("ALTER DATABASE " + db.name() +
                        " SET synchronous_commit = " + database_default);
        auto connection = Connect(db.url());
        pqxx::nontransaction tx{*connection};
        return tx.exec("SHOW synchronous_commit")[0][0].as<std::string>();
    };
    EXPECT_EQ(setting_with("off"), "on");
    EXPECT_EQ(setting_with("local"), "on");
    EXPECT_EQ(setting_with("remote_write"), "on");
    EXPECT_EQ(setting_with("remote_apply"), "remote_apply");
}

TEST(PipelineWarningPgTest, AnotherWarningLeavesTheCommitStandingAndNoticesStillReachLibpqxx) {
    testing::TestDatabase db;
    PAYLEDGER_REQUIRE_DATABASE(db);
    auto connection = db.Connect();
    {
        pqxx::work tx{*connection};
        tx.exec("CREATE TABLE warned (n integer)");
        tx.commit();
    }
    Notices notices{*connection};
    // The warning every commit gets in the transaction-id wraparound zone (from varsup.c there,
    // from PL/pgSQL here): not a sign that the commit is local only, so it is acknowledged.
    const std::vector<PipelineStatement> statements = {
        {.sql = "BEGIN"},
        {.sql = "DO $$BEGIN RAISE WARNING 'database \"payledger\" must be vacuumed within "
                "10000000 transactions'; END$$"},
        {.sql = "INSERT INTO warned VALUES (1)"}};
    EXPECT_NO_THROW((void)ExecPipelineThenCommit(*connection, statements));
    EXPECT_EQ(db.Scalar("SELECT count(*) FROM warned"), "1");
    EXPECT_TRUE(AnyContains(notices.texts, "must be vacuumed within"));
    // A WARNING raised by the COMMIT itself (a deferred constraint trigger fires there) stands
    // too, and reaches libpqxx's notice handling.
    {
        pqxx::work tx{*connection};
        tx.exec(
            "CREATE FUNCTION warn_at_commit() RETURNS trigger LANGUAGE plpgsql AS "
            "$$BEGIN RAISE WARNING 'raised during COMMIT'; RETURN NULL; END$$; "
            "CREATE CONSTRAINT TRIGGER warned_at_commit AFTER INSERT ON warned "
            "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION warn_at_commit()");
        tx.commit();
    }
    EXPECT_NO_THROW((void)ExecPipelineThenCommit(
        *connection, {{.sql = "BEGIN"}, {.sql = "INSERT INTO warned VALUES (3)"}}));
    EXPECT_EQ(db.Scalar("SELECT count(*) FROM warned WHERE n = 3"), "1");
    EXPECT_TRUE(AnyContains(notices.texts, "raised during COMMIT"));
    {
        pqxx::work tx{*connection};
        tx.exec("DROP TRIGGER warned_at_commit ON warned");
        tx.commit();
    }

    // The session is usable, and libpqxx's notice handling is back as it was.
    {
        pqxx::nontransaction tx{*connection};
        tx.exec("DO $$BEGIN RAISE WARNING 'after the pipeline'; END$$");
    }
    EXPECT_TRUE(AnyContains(notices.texts, "after the pipeline"));

    // A NOTICE is not a WARNING: the pipeline's answer stands.
    const std::vector<PipelineStatement> noticed = {
        {.sql = "BEGIN"},
        {.sql = "DO $$BEGIN RAISE NOTICE 'payledger test notice'; END$$"},
        {.sql = "INSERT INTO warned VALUES (2)"}};
    EXPECT_NO_THROW((void)ExecPipelineThenCommit(*connection, noticed));
    EXPECT_EQ(db.Scalar("SELECT count(*) FROM warned WHERE n = 2"), "1");
}

}  // namespace
}  // namespace payledger::ledger
