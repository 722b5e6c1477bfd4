#pragma once

#include <string>

#include "api/config.hpp"

namespace CLI {
class App;
}

namespace payledger::api {

// `payledger query <wechat_v2|wechat_v3|alipay> --out-trade-no N [--close]`
// (docs/query.md#by-hand-and-for-development): asks the platform (or closes the order) once, now,
// through the same path as the schedule: the platform's own request, its answer verified, a final
// one appended through the write path.
struct QueryCommand {
    std::string channel{};
    std::string out_trade_no{};
    bool close = false;
};

// Registers the subcommand on `cli`, its options bound to `command`; returns it.
CLI::App* AddQueryCommand(CLI::App& cli, QueryCommand& command);

// Runs it, printing `query <channel> <out_trade_no> <answer> <outcome>[ seq=<n>]`, and returns
// the exit status: 0 when the platform's answer verified, 1 when it did not or was a mismatch,
// 2 on an error (unreachable, no `query` section, the ledger could not commit).
[[nodiscard]] int RunQueryCommand(const Config& config, const QueryCommand& command);

}  // namespace payledger::api
