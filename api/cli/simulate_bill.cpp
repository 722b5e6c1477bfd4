#include "api/cli/simulate_bill.hpp"

#include <CLI/CLI.hpp>
#include <iostream>

#include "ledger/reconcile/simulate_bill.hpp"

namespace payledger::api {

CLI::App* AddSimulateBillCommand(CLI::App& cli, SimulateBillCommand& command) {
    CLI::App* simulate = cli.add_subcommand(
        "simulate-bill", "write the statement a platform would send for the ledger's day");
    simulate->add_option("platform", command.platform, "wechat or alipay")
        ->required()
        ->check(CLI::IsMember({"wechat", "alipay"}));
    simulate->add_option("--date", command.date, "the Asia/Shanghai day, YYYY-MM-DD")->required();
    simulate->add_option("--out", command.out, "the file (default stdout)");
    simulate->add_option("--drop", command.drop, "leave out the first N rows")
        ->check(CLI::NonNegativeNumber);
    simulate->add_option("--alter", command.alter, "raise the amount of the next N rows by a fen")
        ->check(CLI::NonNegativeNumber);
    return simulate;
}

int RunSimulateBillCommand(const Config& config, const SimulateBillCommand& command) {
    namespace reconcile = ledger::reconcile;
    reconcile::SimulateBillOptions options{.platform = command.platform == "wechat"
                                                           ? reconcile::Platform::kWechat
                                                           : reconcile::Platform::kAlipay,
                                           .date = command.date,
                                           .out_path = command.out,
                                           .drop = command.drop,
                                           .alter = command.alter};
    if (config.wechat_v2) {
        options.wechat_v2_mch_id = config.wechat_v2->mch_id;
        options.wechat_v2_appid = config.wechat_v2->appid;
    }
    if (config.wechat_v3) {
        options.wechat_v3_mch_id = config.wechat_v3->mchid;
        options.wechat_v3_appid = config.wechat_v3->appid;
    }
    if (config.alipay) {
        options.alipay_account =
            config.alipay->seller_id.empty() ? config.alipay->app_id : config.alipay->seller_id;
    }
    if (options.platform == reconcile::Platform::kAlipay && options.alipay_account.empty()) {
        std::cerr << "payledger: simulate-bill alipay needs the alipay section of the config\n";
        return 2;
    }
    try {
        const reconcile::SimulateBillReport report =
            reconcile::SimulateBill(config.database_url, options, std::cout, std::cerr);
        std::cerr << "simulate-bill: " << report.rows << " rows written\n";
        return 0;
    } catch (const reconcile::BillError& error) {
        std::cerr << "payledger: simulate-bill: " << error.what() << "\n";
        return 2;
    }
}

}  // namespace payledger::api
