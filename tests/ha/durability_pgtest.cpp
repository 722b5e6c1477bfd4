// The durability barrier for readers (ledger/read/durability.hpp) waits for the synchronous
// standby whenever the primary shows a commit that the standby has not confirmed. On a cluster
// of the test's own (support/own_cluster.hpp) whose synchronous standby is stopped, such a
// commit is made visible twice over, as in production: by a cancelled wait (the commit stays,
// locally), and by the crash recovery of a primary killed while the commit waited. In both,
// the barrier must wait (found in pg_stat_activity, waiting on SyncRep, by its
// application_name) and return only once the standby is back. The barrier's first version took
// a transaction id and wrote no WAL: PostgreSQL committed it at once without waiting, and the
// one-hour fault campaign read a payment that a failover then took back
// (tests/campaign/README.md).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "ledger/pg/database.hpp"
#include "ledger/read/durability.hpp"
#include "support/own_cluster.hpp"
#include "support/polling.hpp"
#include "support/test_database.hpp"

namespace payledger::ledger::durability_pgtest {
namespace {

using testing::Eventually;
using testing::OwnCluster;
using testing::PatientSession;
using testing::QueryScalar;

constexpr const char* kBarrierName = "payledger durability barrier test";
constexpr const char* kCommitterName = "payledger durability writer test";

std::string WaitingOnTheStandby(const char* application_name) {
    return std::string(
               "SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND "
               "application_name = '") +
           application_name + "'";
}

// Runs the barrier on a connection of its own, whose session commits without waiting for
// anything (synchronous_commit off); the future is ready when it returns.
std::future<void> StartBarrier(const std::string& url) {
    return std::async(std::launch::async, [url] {
        auto connection = Connect(url, PatientSession(kBarrierName));
        {  // A session that commits without waiting: the barrier waits all the same.
            pqxx::nontransaction tx{*connection};
            (void)tx.exec("SET synchronous_commit = off");
        }
        AwaitSynchronousStandbys(*connection);
    });
}

// The barrier waits on SyncRep while the standby is stopped, and answers once it is back.
void ExpectTheBarrierWaitsForTheStandby(OwnCluster& cluster, pqxx::connection& admin) {
    std::future<void> barrier = StartBarrier(cluster.PrimaryUrl());
    EXPECT_TRUE(
        Eventually([&] { return !QueryScalar(admin, WaitingOnTheStandby(kBarrierName)).empty(); },
                   std::chrono::seconds{30}))
        << "the barrier did not wait for the standby";
    EXPECT_EQ(barrier.wait_for(std::chrono::seconds{0}), std::future_status::timeout)
        << "the barrier passed without the standby";
    cluster.StartStandby();
    ASSERT_EQ(barrier.wait_for(std::chrono::seconds{60}), std::future_status::ready)
        << "the barrier never returned with the standby back";
    barrier.get();  // Rethrows what the barrier threw.
}

TEST(DurabilityPgTest, TheBarrierWaitsForTheStandbyAfterACancelledWaitMadeACommitVisible) {
    OwnCluster cluster{/*synchronous=*/true};
    auto admin = Connect(cluster.PrimaryUrl(), PatientSession("durability admin"));
    (void)QueryScalar(*admin, "CREATE TABLE shown (id int PRIMARY KEY)");
    {  // With the standby streaming, the barrier answers at once.
        auto connection = Connect(cluster.PrimaryUrl(), PatientSession(kBarrierName));
        AwaitSynchronousStandbys(*connection);
    }

    cluster.StopStandby();
    std::future<void> insert = std::async(std::launch::async, [&] {
        auto writer = Connect(cluster.PrimaryUrl(), PatientSession(kCommitterName));
        try {
            (void)QueryScalar(*writer, "INSERT INTO shown VALUES (1)");
        } catch (const pqxx::failure&) {  // The cancelled wait's warning may surface.
        }
    });
    std::string pid;
    ASSERT_TRUE(Eventually(
        [&] {
            pid = QueryScalar(*admin, WaitingOnTheStandby(kCommitterName));
            return !pid.empty();
        },
        std::chrono::seconds{30}));
    EXPECT_EQ(QueryScalar(*admin, "SELECT count(*) FROM shown"), "0")
        << "a commit waiting for the standby is invisible to other sessions";
    EXPECT_EQ(QueryScalar(*admin, "SELECT pg_cancel_backend(" + pid + ")"), "t");
    insert.get();
    EXPECT_EQ(QueryScalar(*admin, "SELECT count(*) FROM shown"), "1")
        << "a cancelled wait leaves the commit, visible, on the primary alone";

    ExpectTheBarrierWaitsForTheStandby(cluster, *admin);
}

TEST(DurabilityPgTest, TheBarrierWaitsForTheStandbyAfterCrashRecoveryMadeACommitVisible) {
    OwnCluster cluster{/*synchronous=*/true};
    {
        auto admin = Connect(cluster.PrimaryUrl(), PatientSession("durability admin"));
        (void)QueryScalar(*admin, "CREATE TABLE shown (id int PRIMARY KEY)");
        cluster.StopStandby();
        std::future<void> insert = std::async(std::launch::async, [&] {
            auto writer = Connect(cluster.PrimaryUrl(), PatientSession(kCommitterName));
            try {
                (void)QueryScalar(*writer, "INSERT INTO shown VALUES (1)");
            } catch (const pqxx::failure&) {  // The primary dies under it.
            }
        });
        ASSERT_TRUE(Eventually(
            [&] { return !QueryScalar(*admin, WaitingOnTheStandby(kCommitterName)).empty(); },
            std::chrono::seconds{30}));
        cluster.KillPrimary();
        insert.get();
    }
    cluster.StartPrimary();
    auto admin = Connect(cluster.PrimaryUrl(), PatientSession("durability admin"));
    EXPECT_EQ(QueryScalar(*admin, "SELECT count(*) FROM shown"), "1")
        << "crash recovery makes the commit visible although the standby never had it";

    ExpectTheBarrierWaitsForTheStandby(cluster, *admin);
}

}  // namespace
}  // namespace payledger::ledger::durability_pgtest
