#pragma once

#include <string>

namespace payledger::testing {

// A PostgreSQL cluster of the test's own (scripts/lib/common.sh), for tests that stop the
// database under load without disturbing the tests that share the suite's server.
class OwnPostgres {
public:
    OwnPostgres();   // Creates and starts it with a database `payledger`.
    ~OwnPostgres();  // Stops it and removes its files.
    OwnPostgres(const OwnPostgres&) = delete;
    OwnPostgres& operator=(const OwnPostgres&) = delete;

    [[nodiscard]] const std::string& url() const { return url_; }
    void Stop();  // Fast shutdown: running transactions are rolled back.
    void Start();

private:
    int Shell(const std::string& commands) const;

    std::string dir_;
    std::string port_;
    std::string url_;
};

}  // namespace payledger::testing
