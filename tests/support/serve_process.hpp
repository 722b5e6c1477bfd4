#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <string>

namespace payledger::testing {

// `payledger serve` as a child process with its own config file (the test tokens and the
// generic secret of test_service.hpp), on a free port. For tests that kill it or run several.
class ServeProcess {
public:
    // What Start() waits for: /readyz 200 (its database reached and migrated), or only that
    // it accepts connections (serve started while its database is down).
    enum class Await { kReady, kListening };

    // Writes the config (plus the sections of `extra`) and starts the server; returns once
    // it is ready (or listens, with Await::kListening).
    // `open_files_max` > 0 starts it with that limit of open files (soft and hard).
    explicit ServeProcess(const std::string& database_url,
                          const nlohmann::json& extra = nlohmann::json::object(),
                          unsigned short port = 0, long open_files_max = 0,
                          Await await = Await::kReady);
    ~ServeProcess();
    ServeProcess(const ServeProcess&) = delete;
    ServeProcess& operator=(const ServeProcess&) = delete;

    [[nodiscard]] unsigned short port() const { return port_; }
    [[nodiscard]] pid_t pid() const { return pid_; }
    [[nodiscard]] const std::string& log_path() const { return log_path_; }

    void Start();
    // SIGKILL, then reap. The port is reused by the next Start().
    void Kill();
    // SIGTERM, then wait; returns the exit status (WEXITSTATUS), or -1 when killed.
    int Terminate();
    // The process's resident set size now and at its peak, in KiB (/proc).
    [[nodiscard]] long RssKiB() const;
    [[nodiscard]] long PeakRssKiB() const;

private:
    std::string config_path_;
    std::string log_path_;
    unsigned short port_ = 0;
    long open_files_max_ = 0;
    Await await_ = Await::kReady;
    pid_t pid_ = -1;
};

// A TCP port on 127.0.0.1 that nothing uses right now, below the kernel's ephemeral range so
// that no bind(0) or outgoing connection elsewhere takes it before the server binds it.
[[nodiscard]] unsigned short FreePort();

// The folder for a test's temporary files, clusters and sockets: PAYLEDGER_TEST_TMPDIR, which
// scripts/test sets to a folder of its own and empties when it stops (so that a test killed
// half-way leaves nothing running), else /tmp.
[[nodiscard]] std::string TestTmpDir();

// mkdtemp under TestTmpDir(): a new folder whose name starts with `prefix`.
[[nodiscard]] std::string MakeTestTmpDir(const std::string& prefix);

// Waits (bounded) until 127.0.0.1:`port` accepts a connection; false when it never did or
// when `*child` (if given) exited first, which then is reaped and set to -1.
[[nodiscard]] bool AwaitListening(unsigned short port, pid_t* child = nullptr);

}  // namespace payledger::testing
