#include "support/own_postgres.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>

#include "support/serve_process.hpp"

namespace payledger::testing {

int OwnPostgres::Shell(const std::string& commands) const {
    const std::string script =
        "set -e; source '" PAYLEDGER_SOURCE_DIR "/scripts/lib/common.sh'; " + commands;
    const std::string command = "bash -c \"" + script + "\" >/dev/null 2>&1";
    return std::system(command.c_str());
}

OwnPostgres::OwnPostgres() {
    dir_ = MakeTestTmpDir("payledger-own-pg.");
    port_ = std::to_string(FreePort());
    const std::string data = dir_ + "/data";
    EXPECT_EQ(Shell("[ \\$(id -u) -ne 0 ] || chmod 755 " + dir_ + "; payledger_pg_init " + data +
                    "; payledger_pg_start " + data + " " + port_ + "; payledger_pg_createdb " +
                    data + " " + port_ + " payledger"),
              0);
    url_ = "postgresql://postgres@/payledger?host=" + data + "&port=" + port_;
}

OwnPostgres::~OwnPostgres() { Shell("payledger_pg_stop " + dir_ + "/data; rm -rf " + dir_); }

void OwnPostgres::Stop() { EXPECT_EQ(Shell("payledger_pg_stop " + dir_ + "/data"), 0); }

void OwnPostgres::Start() { EXPECT_EQ(Shell("payledger_pg_start " + dir_ + "/data " + port_), 0); }

}  // namespace payledger::testing
