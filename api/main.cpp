// payledger: the command line (SPEC §8).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <thread>

#include "api/app.hpp"
#include "api/config.hpp"
#include "api/json_output.hpp"
#include "api/log.hpp"
#include "api/server.hpp"
#include "ledger/committer.hpp"
#include "ledger/connection_pool.hpp"
#include "ledger/database.hpp"
#include "ledger/migrate.hpp"
#include "ledger/reads.hpp"
#include "projections/validate.hpp"

namespace {

using namespace payledger;

constexpr int kExitError = 2;
constexpr std::size_t kReadPoolSize = 8;
constexpr std::chrono::milliseconds kPoolWaitMax{2'000};
constexpr std::chrono::milliseconds kShutdownGrace{25'000};

api::Config LoadConfigOrEnv(const std::string& path) {
    if (!path.empty()) return api::LoadConfig(path);
    const char* url = std::getenv("PAYLEDGER_DATABASE_URL");
    const char* listen = std::getenv("PAYLEDGER_LISTEN");
    return api::ParseConfig("{}", url ? std::optional<std::string>(url) : std::nullopt,
                            listen ? std::optional<std::string>(listen) : std::nullopt);
}

int Migrate(const api::Config& config) {
    auto connection = ledger::Connect(config.database_url);
    const std::vector<std::string> applied = ledger::Migrate(*connection);
    for (const std::string& name : applied) std::cout << "applied " << name << "\n";
    if (applied.empty()) std::cout << "schema is up to date\n";
    return 0;
}

int Serve(const api::Config& config) {
    {
        auto connection = ledger::Connect(config.database_url);
        for (const std::string& name : ledger::Migrate(*connection)) {
            api::LogJson("info", "{\"msg\":\"migration applied\",\"name\":\"" + name + "\"}");
        }
    }
    ledger::ConnectionPool pool{config.database_url, kReadPoolSize, kPoolWaitMax};
    ledger::Committer committer{{.url = config.database_url}};
    api::Metrics metrics;
    api::App app{config, pool, committer, metrics};
    const std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
    api::Server server{app, {.host = config.listen_host,
                             .port = config.listen_port,
                             .io_threads = cores,
                             .worker_threads = std::max<std::size_t>(8, 2 * cores)}};
    server.Start();
    api::LogJson("info", "{\"msg\":\"listening\",\"address\":\"" + config.listen_host + ":" +
                             std::to_string(server.port()) + "\"}");
    server.ServeUntilSignal(kShutdownGrace);
    committer.Stop();
    api::LogJson("info", "{\"msg\":\"stopped\"}");
    return 0;
}

int Events(const api::Config& config, std::int64_t after,
           const std::optional<std::string>& out_trade_no) {
    auto connection = ledger::Connect(config.database_url);
    pqxx::read_transaction tx{*connection};
    ledger::ForEachEvent(tx, after, out_trade_no, [](const projections::Event& event) {
        std::cout << api::Dump(api::EventJson(event)) << '\n';
        return static_cast<bool>(std::cout);
    });
    std::cout.flush();
    return std::cout ? 0 : kExitError;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App cli{"payledger: an event-sourced payment ledger"};
    cli.require_subcommand(1);
    std::string config_path;
    cli.add_option("--config", config_path, "JSON config file (SPEC §9)");

    CLI::App* serve = cli.add_subcommand("serve", "migrate, then serve HTTP until SIGTERM");
    CLI::App* migrate = cli.add_subcommand("migrate", "apply the schema migrations");
    CLI::App* events = cli.add_subcommand("events", "the event history as NDJSON");
    std::int64_t after = 0;
    std::string out_trade_no;
    events->add_option("--after", after, "only events with seq > SEQ")->check(CLI::NonNegativeNumber);
    events->add_option("--out-trade-no", out_trade_no, "only this order's events");
    for (CLI::App* command : {serve, migrate, events}) {
        command->add_option("--config", config_path, "JSON config file (SPEC §9)");
    }
    CLI11_PARSE(cli, argc, argv);

    try {
        const api::Config config = LoadConfigOrEnv(config_path);
        if (*serve) return Serve(config);
        if (*migrate) return Migrate(config);
        if (!out_trade_no.empty() && !projections::IsValidKey(out_trade_no)) {
            std::cerr << "payledger: --out-trade-no: not a valid out_trade_no\n";
            return kExitError;
        }
        return Events(config, after,
                      out_trade_no.empty() ? std::nullopt : std::optional(out_trade_no));
    } catch (const api::ConfigError& error) {
        std::cerr << "payledger: invalid config: " << error.what() << "\n";
    } catch (const std::exception& error) {
        std::cerr << "payledger: " << error.what() << "\n";
    }
    return kExitError;
}
