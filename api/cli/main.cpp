// payledger: the command line (docs/api.md#the-command-line).
#include <CLI/CLI.hpp>
#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "api/cli/platform_audit.hpp"
#include "api/cli/progress.hpp"
#include "api/cli/query_command.hpp"
#include "api/cli/reconcile_command.hpp"
#include "api/cli/simulate.hpp"
#include "api/cli/simulate_bill.hpp"
#include "api/cli/simulate_platform.hpp"
#include "api/config.hpp"
#include "api/http/json_output.hpp"
#include "api/http/peer_limits.hpp"
#include "api/http/server.hpp"
#include "api/log.hpp"
#include "api/query/query_scheduler.hpp"
#include "api/routes/app.hpp"
#include "api/routes/route_table.hpp"
#include "api/subscriptions/deliverer.hpp"
#include "ledger/integrity/audit.hpp"
#include "ledger/integrity/rebuild.hpp"
#include "ledger/integrity/verify.hpp"
#include "ledger/pg/connection_pool.hpp"
#include "ledger/pg/database.hpp"
#include "ledger/pg/migrate.hpp"
#include "ledger/query/order_queries.hpp"
#include "ledger/read/durability.hpp"
#include "ledger/read/feed_notifier.hpp"
#include "ledger/read/read_router.hpp"
#include "ledger/read/reads.hpp"
#include "ledger/write/committer.hpp"
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

int Migrate(const api::Config& config, const std::string& grant_role) {
    auto connection = ledger::Connect(config.database_url);
    const std::vector<std::string> applied = ledger::Migrate(*connection);
    for (const std::string& name : applied) std::cout << "applied " << name << "\n";
    if (applied.empty()) std::cout << "schema is up to date\n";
    if (!grant_role.empty()) {
        ledger::GrantServiceRole(*connection, grant_role);
        std::cout << "granted " << grant_role << " what serve needs\n";
    }
    return 0;
}

// docs/availability.md#least-privilege: serve applies only the migrations it has the rights for. A
// role that may not (the service's own, DML only) leaves them to `payledger migrate` as the tables'
// owner.
bool MigrateForServe(pqxx::connection& connection) {
    const std::vector<std::string> pending = ledger::PendingMigrations(connection);
    if (pending.empty()) return true;
    try {
        for (const std::string& name : ledger::Migrate(connection)) {
            api::LogJson("info", "{\"msg\":\"migration applied\",\"name\":\"" + name + "\"}");
        }
        return true;
    } catch (const pqxx::insufficient_privilege&) {
        std::cerr << "payledger: serve: " << pending.size() << " migration(s) pending ("
                  << pending.front() << (pending.size() > 1 ? ", …" : "")
                  << ") that this role may not apply: run `payledger migrate` as the tables' "
                     "owner\n";
        return false;
    }
}

// Told to stop waiting for the database (serve got SIGTERM or SIGINT meanwhile).
class StopFlag {
public:
    void Set() {
        {
            std::lock_guard lock{mutex_};
            set_ = true;
        }
        changed_.notify_all();
    }
    // Waits up to `timeout`; true when the flag is set.
    bool WaitFor(std::chrono::milliseconds timeout) {
        std::unique_lock lock{mutex_};
        return changed_.wait_for(lock, timeout, [this] { return set_; });
    }

private:
    std::mutex mutex_;
    std::condition_variable changed_;
    bool set_ = false;  // Guarded by mutex_.
};

// Connects to the database, waiting for it while it is unreachable (serve started while the
// database is down waits for it, docs/api.md#the-command-line). nullptr when `stop` ended the
// wait.
std::unique_ptr<pqxx::connection> ConnectWhenReachable(const std::string& url, StopFlag& stop) {
    std::chrono::milliseconds backoff{100};
    for (int attempt = 1;; ++attempt) {
        try {
            return ledger::Connect(url);
        } catch (const pqxx::broken_connection& error) {
            if (attempt == 1 || attempt % 10 == 0) {
                api::LogJson("warning",
                             api::Dump(nlohmann::json{{"msg", "waiting for the database"},
                                                      {"attempt", attempt},
                                                      {"error", error.what()}}));
            }
            // Waiting on an outside system: back off up to 2 s, or until told to stop.
            if (stop.WaitFor(backoff)) return nullptr;
            backoff = std::min(backoff * 2, std::chrono::milliseconds{2'000});
        }
    }
}

// docs/api.md#the-command-line: serve listens at once. The database is waited for and migrated
// beside the server, which meanwhile answers /healthz 200 and /readyz and every read and write 503;
// then the app is ready. A migration this role may not apply stops serve (exit 2).
int Serve(const api::Config& config) {
    const std::size_t open_files = api::RaiseOpenFileLimit();
    ledger::ConnectionPool pool{config.database_url, kReadPoolSize, kPoolWaitMax};
    // The waiting feed and the subscriptions wait on one notifier, told of this process's
    // commits by the committer and of the others' by its poll; the waits' continuations (a
    // read each) run on a pool of their own, never on the server's threads.
    boost::asio::thread_pool wait_continuations{2};
    ledger::FeedNotifier notifier{{}, [&wait_continuations](std::function<void()> task) {
                                      boost::asio::post(wait_continuations, std::move(task));
                                  }};
    ledger::Committer committer{
        {.url = config.database_url,
         .queue_bytes_max = config.limits.write_queue_bytes_max,
         .cache_orders_max = config.limits.writer_cache_orders,
         .on_committed = [&notifier](std::int64_t seq) { notifier.Committed(seq); }}};
    api::Metrics metrics;
    api::App app{config, pool, committer, metrics};
    // The background components' log lines, to stderr as the requests' (api/log.hpp).
    const api::Log log = [](const std::string& level, const std::string& line) {
        api::LogJson(level.c_str(), line);
    };
    api::SubscriptionDeliverer deliverer{
        config.subscriptions,
        {.database_url = config.database_url,
         .session = ledger::SessionSettings{.application_name = "payledger_subscriptions"}},
        notifier,
        log};
    app.SetSubscriptions(&deliverer, &notifier);
    // Asking the platforms (docs/query.md), when a channel's section has `query`.
    api::QueryScheduler scheduler{
        config,
        committer,
        {.database_url = config.database_url,
         .session = ledger::SessionSettings{.application_name = "payledger_queries"}},
        log};
    app.SetQueryScheduler(&scheduler);
    const std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
    api::Server server{[&app](api::Incoming incoming, api::Respond respond) {
                           app.Handle(std::move(incoming), std::move(respond));
                       },
                       {.host = config.listen_host,
                        .port = config.listen_port,
                        .io_threads = cores,
                        .worker_threads = std::max<std::size_t>(8, 2 * cores),
                        .read_timeout = config.limits.read_seconds,
                        .connections = config.limits,  // Its ConnectionLimits.
                        .trusted_proxies = config.trusted_proxies,
                        .reserved_for = config.reserved_for,
                        .probe_paths = api::ProbePaths()}};
    server.Start();  // From here on SIGTERM and SIGINT end ServeUntilSignal.
    api::LogJson("info", "{\"msg\":\"listening\",\"address\":\"" + config.listen_host + ":" +
                             std::to_string(server.port()) +
                             "\",\"open_files_max\":" + std::to_string(open_files) + "}");
    StopFlag stop;
    std::atomic<int> exit_code{0};
    std::thread preparing([&] {
        try {
            auto connection = ConnectWhenReachable(config.database_url, stop);
            if (connection == nullptr) return;  // Stopped while waiting.
            if (!MigrateForServe(*connection)) {
                exit_code = kExitError;
                std::raise(SIGTERM);  // Ends ServeUntilSignal: serve exits 2.
                return;
            }
            if (config.AsksPlatforms()) {
                try {
                    ledger::WriteQuerySettings(*connection, config.query.first_after);
                } catch (const pqxx::sql_error& error) {
                    // A role without the right (an old grant): the trigger's default (60 s), or
                    // another serve's delay, stands until this one can write its own.
                    api::LogJson("warning",
                                 api::Dump(nlohmann::json{{"msg", "query settings not written"},
                                                          {"error", error.what()}}));
                }
            }
        } catch (const std::exception& error) {
            std::cerr << "payledger: serve: " << error.what() << "\n";
            exit_code = kExitError;
            std::raise(SIGTERM);
            return;
        }
        app.SetReady();
        notifier.StartPolling(
            [&config] {
                return ledger::Connect(
                    config.database_url,
                    ledger::SessionSettings{.application_name = "payledger_feed"});
            },
            log);
        deliverer.Start();
        scheduler.Start();
        api::LogJson("info", "{\"msg\":\"ready\"}");
    });
    // Before the server drains its requests: the subscriptions stop (their leases go at once,
    // for another process to take), and every waiting read is answered with what it has.
    server.ServeUntilSignal(kShutdownGrace, [&] {
        deliverer.Stop();
        scheduler.Stop();
        notifier.Stop();
    });
    stop.Set();
    preparing.join();
    deliverer.Stop();
    scheduler.Stop();
    notifier.Stop();
    wait_continuations.join();
    committer.Stop();
    api::LogJson("info", "{\"msg\":\"stopped\"}");
    return exit_code;
}

// The rows of `table` now, for the progress display only (on a terminal).
std::int64_t EstimateRows(const api::Config& config, std::string_view table) {
    if (!api::ProgressPrinter::Enabled()) return 0;
    auto connection = ledger::Connect(config.database_url);
    pqxx::read_transaction tx{*connection};
    return tx.exec("SELECT count(*) FROM " + tx.quote_name(std::string(table)))[0][0]
        .as<std::int64_t>();
}

// docs/integrity.md#verify: exit 0 when everything matches, 1 when anything differs.
int VerifyOrRebuild(const api::Config& config, bool rebuild) {
    api::ProgressPrinter progress{rebuild ? "rebuild" : "verify",
                                  EstimateRows(config, "ledger_events")};
    const ledger::VerifyReport report =
        rebuild ? ledger::Rebuild(config.database_url, progress.Callback())
                : ledger::Verify(config.database_url, progress.Callback());
    progress.Finish();
    std::cout << ledger::FormatReport(report) << std::flush;
    return report.ok() ? 0 : 1;
}

std::string ReadSmallFile(const std::string& path, const char* what) {
    constexpr std::size_t kBytesMax = 64 * 1024;
    std::ifstream file{path, std::ios::binary};
    if (!file) throw std::runtime_error(std::string(what) + ": cannot read " + path);
    std::string text(kBytesMax + 1, '\0');
    file.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<std::size_t>(file.gcount()));
    if (text.size() > kBytesMax)
        throw std::runtime_error(std::string(what) + ": " + path + " is too large");
    return text;
}

// `audit`: exit 0 when the chain, every event and the checkpoint hold (and with
// `platform_signatures`, every platform event's signature), 1 when something is broken (a bad
// checkpoint signature included), 2 on error.
int RunAudit(const api::AuditSetup& setup, const std::string& checkpoint_path,
             const std::string& public_key_path, bool platform_signatures) {
    const api::Config& config = setup.config;
    std::string checked;  // What --platform-signatures checked: on stderr, after the report.
    const ledger::AuditCheck check = platform_signatures
                                         ? api::PlatformSignaturesCheck(setup.keys, &checked)
                                         : ledger::AuditCheck{};
    if (checkpoint_path.empty()) {
        if (!public_key_path.empty()) {
            std::cerr << "payledger: audit: --public-key needs --checkpoint\n";
            return kExitError;
        }
        api::ProgressPrinter progress{"audit", EstimateRows(config, "callback_receipts"),
                                      "receipts"};
        const ledger::AuditReport report =
            ledger::Audit(config.database_url, nullptr, nullptr, progress.Callback(), check);
        progress.Finish();
        std::cout << ledger::FormatAuditReport(report) << std::flush;
        std::cerr << checked;
        return report.ok() ? 0 : 1;
    }
    const auto checkpoint =
        ledger::ParseCheckpointJson(ReadSmallFile(checkpoint_path, "--checkpoint"));
    if (!checkpoint) {
        std::cerr << "payledger: audit: " << checkpoint_path << " is not a checkpoint\n";
        return kExitError;
    }
    std::optional<ledger::Ed25519Key> key;
    if (!public_key_path.empty()) {
        key = ledger::Ed25519Key::PublicFromPem(ReadSmallFile(public_key_path, "--public-key"));
    } else if (config.audit_signing_key_pem) {
        key = ledger::Ed25519Key::PrivateFromPem(*config.audit_signing_key_pem);
    } else {
        std::cerr << "payledger: audit: --checkpoint needs --public-key, or audit.signing_key "
                     "in the config\n";
        return kExitError;
    }
    api::ProgressPrinter progress{"audit", EstimateRows(config, "callback_receipts"), "receipts"};
    const ledger::AuditReport report =
        ledger::Audit(config.database_url, &*checkpoint, &*key, progress.Callback(), check);
    progress.Finish();
    std::cout << ledger::FormatAuditReport(report) << std::flush;
    std::cerr << checked;
    return report.ok() ? 0 : 1;
}

// docs/integrity.md#checkpoints: the signed head of the chain, or with --public-key the key's
// public half (PEM).
int RunCheckpoint(const api::Config& config, bool public_key) {
    if (!config.audit_signing_key_pem) {
        std::cerr << "payledger: checkpoint: no key is configured (audit.signing_key)\n";
        return kExitError;
    }
    const auto key = ledger::Ed25519Key::PrivateFromPem(*config.audit_signing_key_pem);
    if (public_key) {
        std::cout << key.PublicPem() << std::flush;
        return 0;
    }
    auto connection = ledger::Connect(config.database_url);
    std::optional<ledger::Checkpoint> signed_head;
    {
        pqxx::read_transaction tx{*connection};
        signed_head = ledger::SignHead(tx, key);
    }
    // docs/api.md#what-a-reader-is-shown: a head signed is a head shown; it is printed only
    // once no failover can take it back, or the ledger could later contradict its checkpoint.
    ledger::AwaitSynchronousStandbys(*connection);
    std::cout << ledger::CheckpointJson(*signed_head) << "\n" << std::flush;
    return 0;
}

int Events(const api::Config& config, std::int64_t after,
           const std::optional<std::string>& out_trade_no) {
    // An auditor read, from the replica when it is fine (docs/availability.md#read-replicas).
    ledger::ReadConnection reads = ledger::ConnectForReads(
        config.database_url, config.read_database_url, config.read_max_lag,
        [](const std::string& why) { std::cerr << "payledger: events: " << why << "\n"; });
    const auto last_seq = [](pqxx::connection& connection) {
        pqxx::read_transaction tx{connection};
        return tx.exec("SELECT coalesce(max(seq), 0) FROM ledger_events")[0][0].as<std::int64_t>();
    };
    // docs/api.md#what-a-reader-is-shown: only the events up to a seq that no failover can
    // take back, as the feeds and the export show them; from a replica, only when the primary
    // holds the replica's newest receipt, else from the primary.
    std::int64_t last = last_seq(*reads.connection);
    if (!reads.source.replica) {
        ledger::AwaitSynchronousStandbys(*reads.connection);
    } else {
        const std::optional<ledger::LedgerHead> head = ledger::ReadLedgerHead(*reads.connection);
        auto primary = ledger::Connect(config.database_url);
        if (!ledger::AwaitSynchronousStandbysHolding(*primary, head)) {
            std::cerr << "payledger: events: the primary does not hold the replica's newest "
                         "receipt (a replica with history the primary lacks); reading the "
                         "primary\n";
            reads.connection = std::move(primary);
            last = last_seq(*reads.connection);
            ledger::AwaitSynchronousStandbys(*reads.connection);
        }
    }
    pqxx::read_transaction tx{*reads.connection};
    ledger::ForEachEvent(tx, after, out_trade_no, [last](const projections::Event& event) {
        if (event.seq > last) return false;  // Committed after the confirmation.
        std::cout << api::Dump(api::EventJson(event)) << '\n';
        return static_cast<bool>(std::cout);
    });
    std::cout.flush();
    return std::cout ? 0 : kExitError;
}

}  // namespace

int main(int argc, char** argv) {
    // A database host that does not answer must not hang a request for ever; a URL's own
    // connect_timeout, or the caller's PGCONNECT_TIMEOUT, still wins.
    setenv("PGCONNECT_TIMEOUT", "5", /*overwrite=*/0);
    CLI::App cli{"payledger: an event-sourced payment ledger"};
    cli.require_subcommand(1);
    std::string config_path;
    cli.add_option("--config", config_path, "JSON config file");

    CLI::App* serve = cli.add_subcommand("serve", "migrate, then serve HTTP until SIGTERM");
    CLI::App* migrate = cli.add_subcommand("migrate", "apply the schema migrations");
    std::string grant_role;
    migrate->add_option("--grant", grant_role, "then grant ROLE exactly what serve needs");
    CLI::App* events = cli.add_subcommand("events", "the event history as NDJSON");
    CLI::App* verify =
        cli.add_subcommand("verify", "fold the events and compare with the projections");
    CLI::App* rebuild = cli.add_subcommand("rebuild", "rebuild the projections online");
    CLI::App* audit =
        cli.add_subcommand("audit", "recompute the receipt chain and check every event against it");
    std::string checkpoint_path;
    std::string public_key_path;
    audit->add_option("--checkpoint", checkpoint_path, "a checkpoint to check the ledger against");
    audit->add_option("--public-key", public_key_path,
                      "the PEM public key that signed it (default: audit.signing_key's)");
    bool platform_signatures = false;
    audit->add_flag("--platform-signatures", platform_signatures,
                    "also verify every WeChat Pay v3 and Alipay event's platform signature with "
                    "the configured public keys (wechat_v3.platform_public_keys, "
                    "alipay.alipay_public_key)");
    CLI::App* checkpoint =
        cli.add_subcommand("checkpoint", "print the signed head of the receipt chain");
    bool print_public_key = false;
    checkpoint->add_flag("--public-key", print_public_key, "print the public key (PEM) instead");
    std::int64_t after = 0;
    std::string out_trade_no;
    events->add_option("--after", after, "only events with seq > SEQ")
        ->check(CLI::NonNegativeNumber);
    events->add_option("--out-trade-no", out_trade_no, "only this order's events");
    CLI::App* simulate = cli.add_subcommand("simulate", "build, sign and post a test notification");
    api::SimulateOptions simulate_options;
    std::string simulate_url;
    simulate->add_option("channel", simulate_options.channel, "the channel to simulate")
        ->required()
        ->check(CLI::IsMember({"wechat_v2", "wechat_v3", "alipay", "generic"}));
    simulate->add_option("--out-trade-no", simulate_options.out_trade_no, "the order")->required();
    simulate->add_option("--amount", simulate_options.amount, "minor units (default 1999)")
        ->check(CLI::Range(std::int64_t{1}, projections::kAmountMax));
    simulate
        ->add_option("--order-amount", simulate_options.order_amount,
                     "a refund's order total in minor units (default --amount)")
        ->check(CLI::Range(std::int64_t{1}, projections::kAmountMax));
    simulate->add_option("--kind", simulate_options.kind, "payment (default), refund or close")
        ->check(CLI::IsMember({"payment", "refund", "close"}));
    simulate->add_option("--url", simulate_url, "the service (default http://<listen>)");
    api::ReconcileCommand reconcile_command;
    CLI::App* reconcile = api::AddReconcileCommand(cli, reconcile_command);
    api::SimulateBillCommand simulate_bill_command;
    CLI::App* simulate_bill = api::AddSimulateBillCommand(cli, simulate_bill_command);
    api::QueryCommand query_command;
    CLI::App* query = api::AddQueryCommand(cli, query_command);
    api::SimulatePlatformCommand simulate_platform_command;
    CLI::App* simulate_platform = api::AddSimulatePlatformCommand(cli, simulate_platform_command);
    for (CLI::App* command : {serve, migrate, events, simulate, verify, rebuild, reconcile,
                              simulate_bill, audit, checkpoint, query, simulate_platform}) {
        command->add_option("--config", config_path, "JSON config file");
    }
    try {
        cli.parse(argc, argv);
    } catch (const CLI::ParseError& error) {
        // --help prints and exits 0; a wrong argument is an error like any other (exit 2,
        // docs/api.md#the-command-line), not CLI11's own codes.
        const int printed = cli.exit(error);
        return printed == 0 ? 0 : kExitError;
    }

    try {
        if (*audit) {
            // An auditor's config may hold the platforms' public keys without the channels'
            // secrets: audit reads no more of those sections than the keys.
            const api::AuditSetup setup = config_path.empty()
                                              ? api::AuditSetup{.config = LoadConfigOrEnv("")}
                                              : api::LoadAuditSetup(config_path);
            return RunAudit(setup, checkpoint_path, public_key_path, platform_signatures);
        }
        const api::Config config = LoadConfigOrEnv(config_path);
        if (*serve) return Serve(config);
        if (*migrate) return Migrate(config, grant_role);
        if (*verify || *rebuild) return VerifyOrRebuild(config, static_cast<bool>(*rebuild));
        if (*checkpoint) return RunCheckpoint(config, print_public_key);
        if (*simulate) return api::RunSimulate(config, simulate_options, simulate_url);
        if (*reconcile) return api::RunReconcileCommand(config, reconcile_command);
        if (*simulate_bill) return api::RunSimulateBillCommand(config, simulate_bill_command);
        if (*query) return api::RunQueryCommand(config, query_command);
        if (*simulate_platform) {
            return api::RunSimulatePlatformCommand(config, simulate_platform_command);
        }
        if (!out_trade_no.empty() && !projections::IsValidKey(out_trade_no)) {
            std::cerr << "payledger: --out-trade-no: must be " << projections::kKeyRuleText << "\n";
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
