#pragma once

#include <string>

#include "api/config.hpp"

namespace CLI {
class App;
}

namespace payledger::api {

// `payledger reconcile <wechat|alipay> --bill FILE --date YYYY-MM-DD [--apply]`
// (docs/reconciliation.md#the-command).
struct ReconcileCommand {
    std::string platform{};
    std::string bill{};
    std::string date{};
    bool apply = false;
};

// Registers the subcommand on `cli`, its options bound to `command`; returns it.
CLI::App* AddReconcileCommand(CLI::App& cli, ReconcileCommand& command);

// Runs it and returns the exit status: 0 nothing differs, 1 something does, 2 an error (a
// bill that cannot be reconciled included: nothing is recorded). Messages go to stderr.
[[nodiscard]] int RunReconcileCommand(const Config& config, const ReconcileCommand& command);

}  // namespace payledger::api
