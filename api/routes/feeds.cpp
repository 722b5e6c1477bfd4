// GET /v1/events and /v1/receipts (docs/api.md#feeds-and-paging), and the NDJSON event export.
// Database failures are not caught here: App::Handle classifies them once.
#include <boost/url/parse.hpp>
#include <nlohmann/json.hpp>

#include "api/http/json_output.hpp"
#include "api/routes/handlers.hpp"
#include "api/routes/route_helpers.hpp"
#include "ledger/pg/database.hpp"
#include "ledger/read/reads.hpp"

namespace payledger::api {
namespace {

using nlohmann::json;

// Streamed exports each hold a database connection of their own: at most this many at once.
constexpr int kExportsMax = 2;

// One export slot of `active`, held until released or handed to an EventExport.
class ExportSlot {
public:
    explicit ExportSlot(std::shared_ptr<std::atomic<int>> active) : active_(std::move(active)) {
        taken_ = ++*active_ <= kExportsMax;
        if (!taken_) --*active_;
    }
    ~ExportSlot() {
        if (taken_) --*active_;
    }
    ExportSlot(const ExportSlot&) = delete;
    ExportSlot& operator=(const ExportSlot&) = delete;

    [[nodiscard]] bool taken() const { return taken_; }
    // The slot now belongs to whoever decrements `active` (the export's destructor).
    void Release() { taken_ = false; }

private:
    std::shared_ptr<std::atomic<int>> active_;
    bool taken_ = false;
};

// The events after a cursor as NDJSON, a page per piece, up to the last seq committed when
// the export started. Owns its connection and one export slot; one page in memory at a time.
class EventExport final : public BodyProducer {
public:
    // `last`: the last seq committed when the export started (LastSeq), confirmed shown.
    EventExport(std::unique_ptr<pqxx::connection> connection, std::int64_t after, std::int64_t last,
                std::shared_ptr<std::atomic<int>> active)
        : connection_(std::move(connection)),
          after_(after),
          last_(last),
          active_(std::move(active)) {}
    ~EventExport() override { --*active_; }
    EventExport(const EventExport&) = delete;
    EventExport& operator=(const EventExport&) = delete;

    std::string Next() override {
        if (after_ >= last_) return {};
        pqxx::read_transaction tx{*connection_};
        std::string out;
        for (const projections::Event& event :
             ledger::ReadEventsAfter(tx, after_, ledger::kPageSizeMax)) {
            if (event.seq > last_) break;
            out += Dump(EventJson(event));
            out += '\n';
            after_ = event.seq;
        }
        if (out.empty()) after_ = last_;
        return out;
    }

private:
    std::unique_ptr<pqxx::connection> connection_;
    std::int64_t after_ = 0;
    std::int64_t last_ = 0;
    std::shared_ptr<std::atomic<int>> active_;
};

std::int64_t LastSeq(pqxx::connection& connection) {
    pqxx::read_transaction tx{connection};
    return tx.exec("SELECT coalesce(max(seq), 0) FROM ledger_events")[0][0].as<std::int64_t>();
}

}  // namespace

void HandleEventExport(ledger::ReadRouter& reads,
                       const std::shared_ptr<std::atomic<int>>& exports_active, Incoming incoming,
                       Respond respond) {
    const boost::urls::url_view url =
        boost::urls::parse_origin_form(incoming.request.target()).value();
    std::int64_t after = 0;
    for (const auto& param : url.params()) {
        if (param.key != "after") continue;
        const std::optional<std::int64_t> value = ParseCursor(param.value);
        if (!value) return respond(BadRequest("after must be a non-negative integer"));
        after = *value;
    }
    ExportSlot slot{exports_active};
    if (!slot.taken()) {
        return respond(ErrorResponse(http::status::service_unavailable,
                                     projections::Outcome::kUnavailable,
                                     "too many exports at once; retry later"));
    }
    // A failure to connect throws to App::Handle; the slot is given back on the way.
    // On the replica too (docs/availability.md#read-replicas); its connection is the export's own.
    ledger::ReadConnection connection = reads.Connect();
    std::int64_t last = LastSeq(*connection.connection);
    // docs/api.md#what-a-reader-is-shown: only what no failover can take back.
    if (!reads.ConfirmShown(*connection.connection, connection.source)) {
        connection = reads.ConnectPrimary();
        last = LastSeq(*connection.connection);
        (void)reads.ConfirmShown(*connection.connection, connection.source);
    }
    auto producer = std::make_unique<EventExport>(std::move(connection.connection), after, last,
                                                  exports_active);
    slot.Release();  // The export gives it back when the stream ends.
    Response header{http::status::ok, 11};
    header.set(http::field::content_type, "application/x-ndjson");
    SetReadFrom(header, connection.source);
    incoming.respond_stream(std::move(header), std::move(producer));
}

Response HandleFeed(ledger::ReadRouter& reads, const Incoming& incoming, bool events) {
    std::variant<PageQuery, Response> query = ParsePageQuery(incoming, !events, true);
    if (Response* refused = std::get_if<Response>(&query)) return std::move(*refused);
    const PageQuery& page = std::get<PageQuery>(query);
    const auto read_page = [&](ledger::ReadLease& lease) {
        pqxx::read_transaction tx{*lease.connection};
        if (events) {
            return PageResponse("events", page,
                                page.before ? ledger::ReadEventsBefore(tx, *page.before, page.limit)
                                            : ledger::ReadEventsAfter(tx, page.after, page.limit),
                                EventJson,
                                [](const projections::Event& event) { return event.seq; });
        }
        return PageResponse(
            "receipts", page,
            page.before ? ledger::ReadReceiptsBefore(tx, *page.before, page.limit, page.outcome)
                        : ledger::ReadReceiptsAfter(tx, page.after, page.limit, page.outcome),
            ReceiptJson, [](const ledger::Receipt& receipt) { return receipt.id; });
    };
    // docs/api.md#what-a-reader-is-shown: a page is answered only once no failover can take
    // back what it shows; from the primary when the replica cannot prove it follows it.
    {
        ledger::ReadLease lease = reads.Acquire();  // The replica when it is fresh enough.
        Response response = read_page(lease);
        if (reads.ConfirmShown(*lease.connection, lease.source)) {
            SetReadFrom(response, lease.source);
            return response;
        }
    }
    ledger::ReadLease lease = reads.AcquirePrimary();
    Response response = read_page(lease);
    (void)reads.ConfirmShown(*lease.connection, lease.source);
    SetReadFrom(response, lease.source);
    return response;
}

}  // namespace payledger::api
