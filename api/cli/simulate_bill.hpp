#pragma once

#include <cstdint>
#include <string>

#include "api/config.hpp"

namespace CLI {
class App;
}

namespace payledger::api {

// `payledger simulate-bill <wechat|alipay> --date D [--out FILE] [--drop N] [--alter N]`
// (docs/reconciliation.md#simulated-statements): the statement the platform would send for the
// ledger's day, for trying `reconcile`. WeChat writes gzip when FILE ends in .gz, Alipay a zip when
// it ends in .zip.
struct SimulateBillCommand {
    std::string platform{};
    std::string date{};
    std::string out{};
    std::int64_t drop = 0;
    std::int64_t alter = 0;
};

CLI::App* AddSimulateBillCommand(CLI::App& cli, SimulateBillCommand& command);

// 0 when written, 2 on an error (message on stderr).
[[nodiscard]] int RunSimulateBillCommand(const Config& config, const SimulateBillCommand& command);

}  // namespace payledger::api
