#pragma once

#include <string>

namespace payledger::testing {

// A primary and a streaming standby of the test's own (scripts/lib/common.sh: initdb, then
// pg_basebackup -R), for the failover and read-replica tests (docs/availability.md#failover). Both
// serve the database `payledger` on a unix socket in their own folder. `synchronous`: the primary
// has synchronous_standby_names = '*', so a commit is acknowledged only once the standby has
// flushed it (and waits while the standby is down).
class OwnCluster {
public:
    // Creates both, starts them and waits until the standby streams (as a synchronous standby
    // when `synchronous`). Fails the test when any step fails.
    explicit OwnCluster(bool synchronous);
    ~OwnCluster();  // Stops both and removes their files.
    OwnCluster(const OwnCluster&) = delete;
    OwnCluster& operator=(const OwnCluster&) = delete;

    // URLs of the database on the node that started as the primary, the standby, and both
    // (in that order, or the standby first), without target_session_attrs.
    [[nodiscard]] std::string PrimaryUrl() const;
    [[nodiscard]] std::string StandbyUrl() const;
    [[nodiscard]] std::string BothUrl(bool standby_first) const;

    // pg_ctl stop -m immediate: the primary dies as in a crash, without a shutdown checkpoint.
    void KillPrimary();
    // Starts the node that started as the primary again (after KillPrimary: crash recovery).
    void StartPrimary();
    // pg_ctl promote -w: returns once the standby accepts writes.
    void PromoteStandby();
    void StopStandby();  // Fast shutdown.
    void StartStandby();

private:
    void Create(bool synchronous);  // A function of its own: gtest's ASSERTs return void.
    int Shell(const std::string& commands) const;
    void AwaitStandbyStreaming(bool synchronous) const;

    std::string dir_;
    std::string primary_data_;
    std::string standby_data_;
    std::string primary_port_;
    std::string standby_port_;
};

}  // namespace payledger::testing
