#include "ledger/pg/binary_params.hpp"

#include <libpq-fe.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <type_traits>

#include "projections/assert.hpp"

namespace payledger::ledger {
namespace {

// libpqxx 6.4 keeps its session's PGconn behind a private accessor (only its large-object
// classes may ask, through a transaction). An explicit instantiation may name a private
// member ([temp.spec.general]: access is not checked there), and this one hands it to a
// friend function. The only use: ExecPipelineThenCommit, between two of libpqxx's statements,
// with the session idle before and after.
using RawConnectionOf = pqxx::internal::pq::PGconn* (pqxx::connection_base::*)() const;
template <RawConnectionOf Accessor>
struct RawConnectionAccess {
    friend PGconn* RawConnection(const pqxx::connection_base& connection) {
        return (connection.*Accessor)();
    }
};
PGconn* RawConnection(const pqxx::connection_base& connection);
template struct RawConnectionAccess<&pqxx::connection_base::raw_connection>;

// Microseconds from the Unix epoch to PostgreSQL's (2000-01-01T00:00:00Z).
constexpr std::int64_t kPostgresEpochUnixMicros = 946'684'800'000'000;

template <typename T>
void AppendBigEndian(std::string& out, T value) {
    using U = std::make_unsigned_t<T>;
    auto bits = static_cast<U>(value);
    char bytes[sizeof(U)];
    for (std::size_t i = 0; i < sizeof(U); ++i) {  // Network order: the high byte first.
        bytes[i] = static_cast<char>(static_cast<unsigned char>(bits >> (8 * (sizeof(U) - 1 - i))));
    }
    out.append(bytes, sizeof(U));
}

struct ResultDeleter {
    void operator()(PGresult* result) const { PQclear(result); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

[[noreturn]] void ThrowInDoubt(PGconn* raw) {
    throw pqxx::in_doubt_error(std::string("connection lost during COMMIT: ") +
                               PQerrorMessage(raw));
}

// The WARNINGs the server sends while one pipeline runs, taken from libpq's notice receiver
// for the object's lifetime. With synchronous_standby_names set, a COMMIT whose wait for the
// standby is cancelled (pg_cancel_backend, pg_terminate_backend, a shutdown) is answered as a
// success: the only sign that it committed locally and perhaps nowhere else is a WARNING
// ("canceling wait for synchronous replication ...", "The transaction has already committed
// locally, but might not have been replicated to the standby.") before the CommandComplete.
// Only those make the commit in doubt: both come from SyncRepWaitForLSN in the server's
// syncrep.c, which the notice names in its source-file field whatever lc_messages says; a
// WARNING without that field cannot be told apart and counts too. Any other WARNING (in the
// transaction-id wraparound zone every commit warns "database ... must be vacuumed within ...
// transactions") is passed on and the commit stands: answering 503 to every callback then
// would stop the ledger long before PostgreSQL's own stop. A notice may be parsed while an
// earlier statement's answer is read, so every WARNING of the pipeline is looked at.
// Each notice is passed on to the receiver that was in place, which is libpq's own (libpqxx
// 6.4 sets a notice processor, never a receiver; libpq's receiver ignores its argument, null
// by default): libpqxx's error handlers still see every notice, and the receiver is put back
// as it was.
class WarningCapture {
public:
    explicit WarningCapture(PGconn* raw)
        : raw_(raw), previous_(PQsetNoticeReceiver(raw, &WarningCapture::Receive, this)) {}
    ~WarningCapture() { Restore(); }
    WarningCapture(const WarningCapture&) = delete;
    WarningCapture& operator=(const WarningCapture&) = delete;

    // Puts the previous receiver back; before the session is closed, since closing frees it.
    void Restore() {
        if (raw_ == nullptr) return;
        PQsetNoticeReceiver(raw_, previous_, nullptr);
        raw_ = nullptr;
    }

    // The first such WARNING's SQLSTATE, message and detail; empty when none came.
    [[nodiscard]] const std::string& warning() const { return warning_; }
    // A WARNING came that says, or may say, the commit is local only.
    [[nodiscard]] bool warned() const { return warned_; }

private:
    static void Receive(void* arg, const PGresult* notice) {
        auto* self = static_cast<WarningCapture*>(arg);
        try {
            self->Note(notice);
        } catch (...) {
            self->warned_ = true;  // Out of memory for the text: the WARNING still counts.
        }
        if (self->previous_ != nullptr) self->previous_(nullptr, notice);
    }

    void Note(const PGresult* notice) {
        // The severity as the server names it whatever lc_messages says (PostgreSQL 9.6+).
        const char* severity = PQresultErrorField(notice, PG_DIAG_SEVERITY_NONLOCALIZED);
        if (severity == nullptr || std::strcmp(severity, "WARNING") != 0) return;
        const char* source = PQresultErrorField(notice, PG_DIAG_SOURCE_FILE);
        if (source != nullptr && std::strcmp(source, "syncrep.c") != 0) return;
        const bool first = !warned_;
        warned_ = true;
        if (!first) return;
        const auto field = [&](int code) {
            const char* text = PQresultErrorField(notice, code);
            return std::string(text == nullptr ? "" : text);
        };
        warning_ = "WARNING " + field(PG_DIAG_SQLSTATE) + ": " + field(PG_DIAG_MESSAGE_PRIMARY);
        if (const std::string detail = field(PG_DIAG_MESSAGE_DETAIL); !detail.empty()) {
            warning_ += " (" + detail + ")";
        }
    }

    PGconn* raw_;
    PQnoticeReceiver previous_;
    bool warned_ = false;
    std::string warning_{};
};

// What the server answered to one statement of the pipeline.
struct Answer {
    enum class Kind { kDone, kSkipped, kRefused, kLost } kind = Kind::kLost;
    Result refusal{};                    // kRefused: the server's error, with its SQLSTATE.
    std::optional<std::string> first{};  // kDone: the first field of the first row.
};

// The next statement's answer and the null that ends it. A session lost after an answer is
// not this statement's concern: the next read finds it.
Answer NextAnswer(PGconn* raw) {
    Result result{PQgetResult(raw)};
    if (!result) return {};
    Answer answer;
    switch (PQresultStatus(result.get())) {
        case PGRES_TUPLES_OK:
        case PGRES_COMMAND_OK:
            answer.kind = Answer::Kind::kDone;
            if (PQntuples(result.get()) > 0 && PQnfields(result.get()) > 0 &&
                PQgetisnull(result.get(), 0, 0) == 0) {
                answer.first.emplace(PQgetvalue(result.get(), 0, 0),
                                     static_cast<std::size_t>(PQgetlength(result.get(), 0, 0)));
            }
            break;
        case PGRES_PIPELINE_ABORTED:
            answer.kind = Answer::Kind::kSkipped;
            break;
        case PGRES_FATAL_ERROR:
            // libpq's own errors (a session lost) have no SQLSTATE; the server's have one.
            if (PQresultErrorField(result.get(), PG_DIAG_SQLSTATE) == nullptr) return {};
            answer.kind = Answer::Kind::kRefused;
            answer.refusal = std::move(result);
            break;
        default:
            return {};  // Out of step: as good as lost.
    }
    Result end{PQgetResult(raw)};
    (void)end;  // The null; anything else shows at the Sync.
    return answer;
}

[[noreturn]] void ThrowRefusal(const PGresult* refusal, const std::string& what) {
    // As libpqxx's own: the SQLSTATE decides (ledger/pg/failures.cpp). libpqxx 6.4's classes
    // (its ThrowSQLError): class 40 rolled the transaction back, class 08 is a connection
    // failure; the others keep their SQLSTATE.
    const std::string sqlstate = PQresultErrorField(refusal, PG_DIAG_SQLSTATE);
    const std::string message = PQresultErrorMessage(refusal);
    if (sqlstate.starts_with("40")) throw pqxx::transaction_rollback(message);
    if (sqlstate.starts_with("08")) throw pqxx::broken_connection(message);
    throw pqxx::sql_error(message, what, sqlstate.c_str());
}

}  // namespace

BinaryArray::BinaryArray(PgType element) : element_(element) {}

void BinaryArray::Length(std::int32_t length) {
    PAYLEDGER_ASSERT(count_ < INT32_MAX);
    ++count_;
    AppendBigEndian(elements_, length);
}

void BinaryArray::Int8(std::int64_t value) {
    PAYLEDGER_ASSERT(element_ == PgType::kInt8);
    Length(8);
    AppendBigEndian(elements_, value);
}

void BinaryArray::Bool(bool value) {
    PAYLEDGER_ASSERT(element_ == PgType::kBool);
    Length(1);
    elements_ += value ? '\1' : '\0';
}

void BinaryArray::Bytes(std::string_view bytes) {
    PAYLEDGER_ASSERT(element_ == PgType::kText || element_ == PgType::kBytea);
    PAYLEDGER_ASSERT(bytes.size() <= static_cast<std::size_t>(INT32_MAX));
    Length(static_cast<std::int32_t>(bytes.size()));
    elements_ += bytes;
}

void BinaryArray::TimeMicros(std::int64_t unix_micros) {
    PAYLEDGER_ASSERT(element_ == PgType::kTimestamptz);
    // The server refuses a time outside timestamptz's range (timestamptz_recv).
    PAYLEDGER_ASSERT(unix_micros >= INT64_MIN + kPostgresEpochUnixMicros);
    Length(8);
    AppendBigEndian(elements_, unix_micros - kPostgresEpochUnixMicros);
}

void BinaryArray::Null() {
    has_null_ = true;
    Length(-1);
}

std::string BinaryArray::Take() {
    std::string out;
    out.reserve(20 + elements_.size());
    // An empty array has no dimension (array_send writes ndim 0 and no bounds).
    AppendBigEndian(out, std::int32_t{count_ > 0 ? 1 : 0});
    AppendBigEndian(out, std::int32_t{has_null_ ? 1 : 0});
    AppendBigEndian(out, static_cast<std::uint32_t>(element_));
    if (count_ > 0) {
        AppendBigEndian(out, count_);
        AppendBigEndian(out, std::int32_t{1});  // The lower bound.
    }
    out += elements_;
    elements_.clear();
    count_ = 0;
    has_null_ = false;
    return out;
}

std::string BinaryInt8(std::int64_t value) {
    std::string out;
    AppendBigEndian(out, value);
    return out;
}

std::vector<std::optional<std::string>> ExecPipelineThenCommit(
    pqxx::connection_base& connection, const std::vector<PipelineStatement>& statements) {
    PGconn* raw = RawConnection(connection);
    PAYLEDGER_ASSERT(raw != nullptr && !statements.empty());
    WarningCapture warnings{raw};
    if (PQenterPipelineMode(raw) != 1) {
        // Nothing was sent: the session is lost (or not idle, a bug of ours). Either way a
        // new session (ClassifyFailure reconnects) can write the batch.
        throw pqxx::broken_connection(std::string("cannot enter pipeline mode: ") +
                                      PQerrorMessage(raw));
    }
    bool sent = true;
    for (const PipelineStatement& statement : statements) {
        const std::vector<std::string>& params = statement.params;
        PAYLEDGER_ASSERT(params.size() <= 65535);  // The protocol's limit.
        std::vector<const char*> values;
        std::vector<int> lengths;
        const std::vector<int> formats(params.size(), 1);
        values.reserve(params.size());
        lengths.reserve(params.size());
        for (const std::string& param : params) {
            PAYLEDGER_ASSERT(param.size() <= static_cast<std::size_t>(INT_MAX));
            values.push_back(param.data());
            lengths.push_back(static_cast<int>(param.size()));
        }
        const int n = static_cast<int>(params.size());
        sent = statement.name.empty()
                   ? PQsendQueryParams(raw, statement.sql.c_str(), n, nullptr, values.data(),
                                       lengths.data(), formats.data(), 0) == 1
                   : PQsendQueryPrepared(raw, statement.name.c_str(), n, values.data(),
                                         lengths.data(), formats.data(), 0) == 1;
        if (!sent) break;
    }
    if (!sent || PQsendQueryParams(raw, "COMMIT", 0, nullptr, nullptr, nullptr, nullptr, 0) != 1 ||
        PQpipelineSync(raw) != 1) {
        ThrowInDoubt(raw);  // Part of it may have gone out.
    }

    // Each statement's answer (after a refusal, the rest are skipped), then the COMMIT's,
    // then the Sync's.
    std::vector<Answer> answers;
    answers.reserve(statements.size() + 1);
    while (answers.size() < statements.size() + 1) {
        answers.push_back(NextAnswer(raw));
        if (answers.back().kind == Answer::Kind::kLost) break;
    }
    Result sync{answers.back().kind == Answer::Kind::kLost ? nullptr : PQgetResult(raw)};
    const bool ended =
        sync && PQresultStatus(sync.get()) == PGRES_PIPELINE_SYNC && PQexitPipelineMode(raw) == 1;
    const bool all_done = answers.size() == statements.size() + 1 &&
                          std::all_of(answers.begin(), answers.end(), [](const Answer& answer) {
                              return answer.kind == Answer::Kind::kDone;
                          });
    if (all_done) {
        // Committed. A session that did not end the pipeline cleanly is closed, so that the
        // committer replaces it before the next batch (IdleSessionEnded); the batch stands.
        warnings.Restore();
        if (!ended) connection.disconnect();
        if (warnings.warned()) {
            // Committed here, but perhaps not on the synchronous standby: a failover now would
            // lose it. Not an acknowledgement, then, and never retried: the platform's retry
            // finds a duplicate, or appends if it was lost.
            throw pqxx::in_doubt_error(
                "COMMIT succeeded, but the server warned that it may be local only (a "
                "cancelled wait for the synchronous standby): " +
                (warnings.warning().empty() ? std::string("WARNING") : warnings.warning()));
        }
        std::vector<std::optional<std::string>> firsts;
        firsts.reserve(statements.size());
        for (std::size_t i = 0; i < statements.size(); ++i) firsts.push_back(answers[i].first);
        return firsts;
    }
    for (std::size_t i = 0; i < answers.size(); ++i) {
        if (answers[i].kind != Answer::Kind::kRefused) continue;
        // Refused by the server: nothing committed, whatever became of the session after.
        warnings.Restore();
        if (!ended) connection.disconnect();  // The committer's classification reconnects too.
        const std::string what =
            i < statements.size()
                ? (statements[i].name.empty() ? statements[i].sql : "EXECUTE " + statements[i].name)
                : std::string("COMMIT");
        ThrowRefusal(answers[i].refusal.get(), what);
    }
    // No answer to the COMMIT (the session lost, or out of step, before it): it may have
    // committed.
    ThrowInDoubt(raw);
}

void ExecPreparedThenCommit(pqxx::connection_base& connection, const std::string& name,
                            const std::vector<std::string>& params) {
    (void)ExecPipelineThenCommit(connection, {PipelineStatement{.name = name, .params = params}});
}

}  // namespace payledger::ledger
