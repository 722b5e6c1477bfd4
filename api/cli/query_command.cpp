#include "api/cli/query_command.hpp"

#include <CLI/CLI.hpp>
#include <iostream>

#include "api/query/query_scheduler.hpp"
#include "ledger/write/committer.hpp"
#include "projections/validate.hpp"

namespace payledger::api {
namespace {

constexpr int kExitMismatch = 1;
constexpr int kExitError = 2;

bool HasQuerySection(const Config& config, QueryChannel channel) {
    switch (channel) {
        case QueryChannel::kWechatV2:
            return config.wechat_v2 && config.wechat_v2->query;
        case QueryChannel::kWechatV3:
            return config.wechat_v3 && config.wechat_v3->query;
        case QueryChannel::kAlipay:
            return config.alipay && config.alipay->query;
    }
    return false;
}

}  // namespace

CLI::App* AddQueryCommand(CLI::App& cli, QueryCommand& command) {
    CLI::App* query = cli.add_subcommand(
        "query", "ask the platform about an order once, now (or close it), through the write path");
    query->add_option("channel", command.channel, "wechat_v2, wechat_v3 or alipay")
        ->required()
        ->check(CLI::IsMember({"wechat_v2", "wechat_v3", "alipay"}));
    query->add_option("--out-trade-no", command.out_trade_no, "the order")->required();
    query->add_flag("--close", command.close, "close the order on the platform instead");
    return query;
}

int RunQueryCommand(const Config& config, const QueryCommand& command) {
    const std::optional<QueryChannel> channel = ParseQueryChannel(command.channel);
    if (!channel) return kExitError;  // CLI11 checked it.
    if (!projections::IsValidKey(command.out_trade_no)) {
        std::cerr << "payledger: query: --out-trade-no: must be " << projections::kKeyRuleText
                  << "\n";
        return kExitError;
    }
    if (!HasQuerySection(config, *channel)) {
        std::cerr << "payledger: query: the config has no " << command.channel
                  << ".query section (docs/query.md#configuration)\n";
        return kExitError;
    }
    const QueryAction action = command.close ? QueryAction::kClose : QueryAction::kQuery;
    WebhookClient client;
    PlatformAnswer answer =
        AskPlatform(config, *channel, action, command.out_trade_no, client,
                    std::chrono::duration_cast<std::chrono::milliseconds>(config.query.timeout));
    const AnswerKind kind = answer.kind;
    const std::string words = answer.answer;
    std::string outcome(ToString(kind));
    std::int64_t seq = 0;
    if (answer.delivery) {
        ledger::Committer committer{{.url = config.database_url, .cache_orders_max = 0}};
        const std::optional<ledger::DeliveryResult> stored = StoreAnswer(committer, answer);
        committer.Stop();
        if (stored->outcome == projections::Outcome::kUnavailable) {
            std::cerr << "payledger: query: the ledger could not store the answer: "
                      << stored->message << "\n";
            return kExitError;
        }
        outcome = std::string(projections::ToString(stored->outcome));
        seq = stored->seq;
    }
    std::cout << "query " << command.channel << " " << command.out_trade_no << " " << words << " "
              << outcome;
    if (seq != 0) std::cout << " seq=" << seq;
    std::cout << "\n" << std::flush;
    switch (kind) {
        case AnswerKind::kFailed:
            return kExitError;
        case AnswerKind::kBadSignature:
        case AnswerKind::kRefused:
            return kExitMismatch;
        case AnswerKind::kFinal:
        case AnswerKind::kClosed:
            return outcome == "mismatch" ? kExitMismatch : 0;
        case AnswerKind::kNotFinal:
        case AnswerKind::kClosePaid:
            return 0;
    }
    return kExitError;
}

}  // namespace payledger::api
