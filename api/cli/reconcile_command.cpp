#include "api/cli/reconcile_command.hpp"

#include <CLI/CLI.hpp>
#include <iostream>
#include <optional>

#include "api/cli/progress.hpp"
#include "ledger/reconcile/reconciliation.hpp"

namespace payledger::api {

CLI::App* AddReconcileCommand(CLI::App& cli, ReconcileCommand& command) {
    CLI::App* reconcile =
        cli.add_subcommand("reconcile", "compare a platform's daily statement with the ledger");
    reconcile->add_option("platform", command.platform, "wechat or alipay")
        ->required()
        ->check(CLI::IsMember({"wechat", "alipay"}));
    reconcile
        ->add_option("--bill", command.bill,
                     "WeChat: the ALL trade bill, text or gzip; Alipay: the bill zip or its "
                     "_业务明细.csv")
        ->required();
    reconcile->add_option("--date", command.date, "the Asia/Shanghai day, YYYY-MM-DD")->required();
    reconcile->add_flag("--apply", command.apply,
                        "append the payments and refunds the ledger is proven to miss");
    return reconcile;
}

int RunReconcileCommand(const Config& config, const ReconcileCommand& command) {
    namespace reconcile = ledger::reconcile;
    reconcile::ReconcileOptions options{.platform = command.platform == "wechat"
                                                        ? reconcile::Platform::kWechat
                                                        : reconcile::Platform::kAlipay,
                                        .bill_path = command.bill,
                                        .date = command.date,
                                        .apply = command.apply};
    if (config.wechat_v2) options.wechat_mch_ids.push_back(config.wechat_v2->mch_id);
    if (config.wechat_v3) options.wechat_mch_ids.push_back(config.wechat_v3->mchid);
    if (config.alipay) options.alipay_seller_id = config.alipay->seller_id;
    // Progress on a terminal, one line per phase.
    std::optional<ProgressPrinter> progress;
    std::string phase_shown;
    if (ProgressPrinter::Enabled()) {
        options.progress = [&](std::string_view phase, std::int64_t done, std::int64_t total) {
            if (phase != phase_shown) {
                progress.reset();  // Ends the previous phase's line.
                phase_shown = phase;
                if (phase == "done") return;
                progress.emplace("reconcile " + phase_shown, total,
                                 phase == "reading" ? "entries" : "entries applied");
            }
            progress->Callback()(done);
        };
    }
    try {
        const reconcile::ReconcileReport report =
            reconcile::Reconcile(config.database_url, options, std::cout, &std::cerr);
        progress.reset();
        std::cerr << "payledger: reconciliation " << report.id << " recorded\n";
        if (!report.failure.empty()) {
            std::cerr << "payledger: reconcile: " << report.failure << "\n";
            return 2;
        }
        return report.ok ? 0 : 1;
    } catch (const reconcile::BillError& error) {
        progress.reset();
        std::cerr << "payledger: reconcile: " << error.what() << "; nothing recorded\n";
        return 2;
    }
}

}  // namespace payledger::api
