#pragma once

#include <cstdint>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <string_view>
#include <vector>

namespace payledger::ledger {

// Parameters in PostgreSQL's binary format (the `send`/`recv` functions of each type,
// src/backend/utils/adt), for a statement whose SQL casts each parameter to its type
// (`$1::bigint[]`), so that the server takes that type for it. The writer's rows as JSON literals
// cost the server a JSON parse per row and a scan of the whole string; bound in binary, each value
// is read as it lies (bench/write/run.sh measures the difference).

// The element types the writer binds (pg_type.oid, fixed for built-in types).
enum class PgType : std::uint32_t {
    kBool = 16,
    kBytea = 17,
    kInt8 = 20,
    kText = 25,
    kTimestamptz = 1184,
};

// A one-dimensional array of one element type, built element by element (array_recv's
// format: ndim, has-null flag, element type, length and lower bound, then each element as its
// length, -1 for NULL, and its bytes).
class BinaryArray {
public:
    explicit BinaryArray(PgType element);

    void Int8(std::int64_t value);
    void Bool(bool value);
    // text (valid UTF-8 without NUL: the server checks and refuses the whole statement
    // otherwise; see storable_text.hpp) or bytea (any bytes).
    void Bytes(std::string_view bytes);
    // Microseconds since the Unix epoch (timestamptz's own: since 2000-01-01).
    void TimeMicros(std::int64_t unix_micros);
    void Null();
    void NullableInt8(std::optional<std::int64_t> value) { value ? Int8(*value) : Null(); }
    void NullableBytes(const std::optional<std::string>& bytes) { bytes ? Bytes(*bytes) : Null(); }

    [[nodiscard]] std::size_t size() const { return static_cast<std::size_t>(count_); }
    // The array's bytes; the builder is left empty.
    [[nodiscard]] std::string Take();

private:
    void Length(std::int32_t length);

    PgType element_;
    std::string elements_;
    std::int32_t count_ = 0;
    bool has_null_ = false;
};

// A scalar bigint in binary (int8send): 8 bytes, network order.
[[nodiscard]] std::string BinaryInt8(std::int64_t value);

// One statement of a pipeline (ExecPipelineThenCommit): a prepared statement's `name`, or,
// with `name` empty, the text `sql`; with `params`, all binary.
struct PipelineStatement {
    std::string name{};
    std::string sql{};
    std::vector<std::string> params{};
};

// Runs `statements`, one after another, and then COMMIT, in one round trip (libpq's pipeline
// mode: Bind and Execute for each, the COMMIT, one Sync), on `connection`, which must be idle,
// and inside a transaction block unless the first statement is a BEGIN. libpqxx 6.4 has
// neither binary parameters of other types than bytea nor pipelines, so this speaks libpq on
// libpqxx's session, between two of its statements.
// Returns, for each statement, the first field of its first row as text (null: no row or a
// null).
// Throws, as libpqxx would for the same errors: pqxx::in_doubt_error when the session was lost
// with the round trip in flight (the COMMIT may have happened), and also when the COMMIT
// succeeded but the server warned that it may be local only (with synchronous replication, a
// cancelled wait for the standby: committed locally, perhaps nowhere else; other WARNINGs do
// not count); pqxx::transaction_rollback
// (SQLSTATE class 40) or pqxx::sql_error, with the SQLSTATE, when the server refused a
// statement (it then skipped the rest and the COMMIT: nothing is committed and the block is
// aborted, to be rolled back by the caller).
std::vector<std::optional<std::string>> ExecPipelineThenCommit(
    pqxx::connection_base& connection, const std::vector<PipelineStatement>& statements);

// ExecPipelineThenCommit of the one prepared statement `name` with `params`.
void ExecPreparedThenCommit(pqxx::connection_base& connection, const std::string& name,
                            const std::vector<std::string>& params);

}  // namespace payledger::ledger
