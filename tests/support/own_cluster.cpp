#include "support/own_cluster.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <pqxx/pqxx>
#include <thread>

#include "support/serve_process.hpp"

namespace payledger::testing {
namespace {

std::string Url(const std::string& hosts, const std::string& ports) {
    return "postgresql://postgres@/payledger?host=" + hosts + "&port=" + ports;
}

}  // namespace

int OwnCluster::Shell(const std::string& commands) const {
    const std::string script =
        "set -e; source '" PAYLEDGER_SOURCE_DIR "/scripts/lib/common.sh'; " + commands;
    const std::string command = "bash -c \"" + script + "\" >/dev/null 2>&1";
    return std::system(command.c_str());
}

OwnCluster::OwnCluster(bool synchronous) { Create(synchronous); }

void OwnCluster::Create(bool synchronous) {
    dir_ = MakeTestTmpDir("payledger-own-cluster.");
    primary_data_ = dir_ + "/a";
    standby_data_ = dir_ + "/b";
    primary_port_ = std::to_string(FreePort());
    standby_port_ = std::to_string(FreePort());
    // Two servers per test: small shared buffers, as the tests' data is small.
    std::string commands = "[ \\$(id -u) -ne 0 ] || chmod 755 " + dir_;
    commands += "; payledger_pg_init " + primary_data_;
    commands += "; echo 'shared_buffers = 32MB' >> " + primary_data_ + "/postgresql.conf";
    commands += "; payledger_pg_start " + primary_data_ + " " + primary_port_;
    commands += "; payledger_pg_createdb " + primary_data_ + " " + primary_port_ + " payledger";
    commands +=
        "; payledger_pg_standby " + primary_data_ + " " + primary_port_ + " " + standby_data_;
    commands += "; payledger_pg_start " + standby_data_ + " " + standby_port_;
    if (synchronous) {
        // Only once it has a standby: before, CREATE DATABASE would wait for one for ever.
        commands += "; echo \\\"synchronous_standby_names = '*'\\\" >> " + primary_data_ +
                    "/postgresql.conf; _pg_as \\$PG_BIN/pg_ctl -D " + primary_data_ + " reload";
    }
    const int created = Shell(commands);
    ASSERT_EQ(created, 0) << "could not create the cluster in " << dir_;
    AwaitStandbyStreaming(synchronous);
}

OwnCluster::~OwnCluster() {
    Shell("payledger_pg_stop " + primary_data_ + "; payledger_pg_stop " + standby_data_ +
          "; rm -rf " + dir_);
}

std::string OwnCluster::PrimaryUrl() const { return Url(primary_data_, primary_port_); }
std::string OwnCluster::StandbyUrl() const { return Url(standby_data_, standby_port_); }

std::string OwnCluster::BothUrl(bool standby_first) const {
    return standby_first
               ? Url(standby_data_ + "," + primary_data_, standby_port_ + "," + primary_port_)
               : Url(primary_data_ + "," + standby_data_, primary_port_ + "," + standby_port_);
}

void OwnCluster::AwaitStandbyStreaming(bool synchronous) const {
    // What the primary reports of its standby, not time: the walsender's state.
    const std::string wanted = synchronous ? "sync" : "async";
    pqxx::connection primary{PrimaryUrl()};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{60};
    std::string state;
    while (std::chrono::steady_clock::now() < deadline) {
        pqxx::nontransaction tx{primary};
        const pqxx::result rows =
            tx.exec("SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming'");
        state = rows.empty() ? "" : rows[0][0].as<std::string>();
        if (state == wanted) return;
        std::this_thread::sleep_for(std::chrono::milliseconds{20});  // Poll pace.
    }
    FAIL() << "the standby never streamed as " << wanted << " (last: '" << state << "')";
}

void OwnCluster::KillPrimary() {
    EXPECT_EQ(Shell("_pg_as \\$PG_BIN/pg_ctl -D " + primary_data_ + " -m immediate -w stop"), 0);
}

void OwnCluster::StartPrimary() {
    EXPECT_EQ(Shell("payledger_pg_start " + primary_data_ + " " + primary_port_), 0);
}

void OwnCluster::PromoteStandby() {
    EXPECT_EQ(Shell("_pg_as \\$PG_BIN/pg_ctl -D " + standby_data_ + " -w -t 60 promote"), 0);
}

void OwnCluster::StopStandby() { EXPECT_EQ(Shell("payledger_pg_stop " + standby_data_), 0); }

void OwnCluster::StartStandby() {
    EXPECT_EQ(Shell("payledger_pg_start " + standby_data_ + " " + standby_port_), 0);
}

}  // namespace payledger::testing
