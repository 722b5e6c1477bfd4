#include "ledger/binary_params.hpp"

#include <libpq-fe.h>

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
// friend function. The only use: ExecPreparedThenCommit, between two of libpqxx's statements,
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


// The next statement's result in the pipeline and the null that ends it: null when it
// succeeded (rows or none; or was skipped after a refusal), the result when the server refused the statement.
// A refusal is definitive for its statement whatever becomes of the session after it.
// `refused_before`: the refusal of an earlier statement of the pipeline, if any: then nothing
// can have committed, and a session lost is only that.
Result NextResult(PGconn* raw, const PGresult* refused_before) {
    Result result{PQgetResult(raw)};
    const ExecStatusType status = result ? PQresultStatus(result.get()) : PGRES_FATAL_ERROR;
    if (status == PGRES_FATAL_ERROR && result &&
        PQresultErrorField(result.get(), PG_DIAG_SQLSTATE) != nullptr) {
        // libpq's own errors (a session lost) have no SQLSTATE; this is the server's answer.
        if (Result end{PQgetResult(raw)}; end && PQstatus(raw) != CONNECTION_BAD) {
            throw pqxx::broken_connection("the writer's pipeline is out of step");
        }
        return result;
    }
    const bool as_expected =
        status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK ||
        (refused_before != nullptr && status == PGRES_PIPELINE_ABORTED);
    Result end;
    if (as_expected && PQstatus(raw) != CONNECTION_BAD) end.reset(PQgetResult(raw));
    if (!as_expected || end || PQstatus(raw) == CONNECTION_BAD) {
        if (refused_before != nullptr) {
            throw pqxx::broken_connection(std::string("connection lost after a refusal: ") +
                                          PQresultErrorMessage(refused_before));
        }
        ThrowInDoubt(raw);  // Lost, or out of step, before the COMMIT's answer.
    }
    return nullptr;
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

void ExecPreparedThenCommit(pqxx::connection_base& connection, const std::string& name,
                            const std::vector<std::string>& params) {
    PGconn* raw = RawConnection(connection);
    PAYLEDGER_ASSERT(raw != nullptr && params.size() <= 65535);  // The protocol's limit.
    if (PQenterPipelineMode(raw) != 1) {
        // Nothing was sent: the session is lost (or not idle, a bug of ours).
        if (PQstatus(raw) == CONNECTION_BAD) throw pqxx::broken_connection(PQerrorMessage(raw));
        throw pqxx::internal_error(std::string("cannot enter pipeline mode: ") +
                                   PQerrorMessage(raw));
    }
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
    if (PQsendQueryPrepared(raw, name.c_str(), static_cast<int>(params.size()), values.data(),
                            lengths.data(), formats.data(), 0) != 1 ||
        PQsendQueryParams(raw, "COMMIT", 0, nullptr, nullptr, nullptr, nullptr, 0) != 1 ||
        PQpipelineSync(raw) != 1) {
        ThrowInDoubt(raw);  // Part of it may have gone out.
    }

    // The statement's result, then the COMMIT's (PGRES_PIPELINE_ABORTED, skipped, when the
    // statement failed), each followed by a null, then the Sync's. Once the server refused the
    // statement, nothing can commit whatever follows; until the COMMIT's answer, a session
    // lost, or anything else than the protocol's results, leaves the outcome unknown.
    Result refused = NextResult(raw, nullptr);
    Result commit_refused = NextResult(raw, refused.get());
    if (!refused) refused = std::move(commit_refused);
    Result sync{PQgetResult(raw)};
    if (!sync || PQresultStatus(sync.get()) != PGRES_PIPELINE_SYNC || PQexitPipelineMode(raw) != 1) {
        // Answered: only the session is in doubt, not the outcome. It is dropped.
        throw pqxx::broken_connection(std::string("the writer's pipeline did not end: ") +
                                      PQerrorMessage(raw));
    }
    if (refused) {
        // As libpqxx's own: the SQLSTATE decides (ledger/failures.cpp).
        const std::string sqlstate = PQresultErrorField(refused.get(), PG_DIAG_SQLSTATE);
        const std::string message = PQresultErrorMessage(refused.get());
        // libpqxx 6.4's classes (its ThrowSQLError): class 40 rolled the transaction back,
        // class 08 is a connection failure; the others keep their SQLSTATE.
        if (sqlstate.starts_with("40")) throw pqxx::transaction_rollback(message);
        if (sqlstate.starts_with("08")) throw pqxx::broken_connection(message);
        throw pqxx::sql_error(message, "EXECUTE " + name, sqlstate.c_str());
    }
}

}  // namespace payledger::ledger
