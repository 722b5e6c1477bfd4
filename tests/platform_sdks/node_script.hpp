#pragma once

// Runs a node script of this folder for the C++ tests beside it: sign_notices.mjs for
// sdk_notices_pgtest.cpp (notices the platforms' SDKs sign, one JSON line each on its standard
// output), verify_queries.mjs and verify_answers.mjs for sdk_queries_test.cpp and
// sdk_answers_pgtest.cpp (they read the JSON lines the test wrote and check them with the
// platforms' SDKs, sdks.mjs, printing one line per failed check on their standard error).

#include <stdlib.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace payledger::testing {

inline constexpr int kSdkScriptSkipped = 77;   // sdks.mjs: the SDKs are not installed.
inline constexpr int kSdkShellNotFound = 127;  // No node on the PATH.

struct NodeRun {
    int code = -1;  // The script's exit status; -1 when it did not exit.
    std::string out{};
    std::string errors{};

    // Node or the SDKs are missing and this is not CI: the test is skipped (under CI, where
    // scripts/test installs them, that is a failure).
    [[nodiscard]] bool MissingOutsideCi() const {
        return (code == kSdkScriptSkipped || code == kSdkShellNotFound) &&
               std::getenv("CI") == nullptr;
    }
};

// A new folder for a test's files (mkdtemp) under PAYLEDGER_TEST_TMPDIR, which scripts/test sets
// and empties when it stops, else /tmp: the unit tests do not link support/serve_process.hpp's
// MakeTestTmpDir, which this mirrors.
inline std::string MakeSdkScriptDir(const std::string& prefix) {
    const char* base = std::getenv("PAYLEDGER_TEST_TMPDIR");
    std::string path =
        std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/" + prefix + "XXXXXX";
    if (mkdtemp(path.data()) == nullptr) throw std::runtime_error("mkdtemp " + path);
    return path;
}

// `node tests/platform_sdks/<script> <argument>`, its standard error kept in `errors_path`.
// REQUIRES: no single quote in `argument` or `errors_path` (they are quoted for the shell).
inline NodeRun RunSdkScript(const std::string& script, const std::string& argument,
                            const std::string& errors_path) {
    if (argument.find('\'') != std::string::npos || errors_path.find('\'') != std::string::npos) {
        throw std::invalid_argument("a path with a single quote");
    }
    const std::string command = "node '" PAYLEDGER_SOURCE_DIR "/tests/platform_sdks/" + script +
                                "' '" + argument + "' 2>'" + errors_path + "'";
    NodeRun run;
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) return run;
    char buffer[4096];
    while (const std::size_t n = fread(buffer, 1, sizeof buffer, pipe)) run.out.append(buffer, n);
    const int status = pclose(pipe);
    run.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ostringstream errors;
    errors << std::ifstream{errors_path}.rdbuf();
    run.errors = errors.str();
    return run;
}

}  // namespace payledger::testing
