#pragma once

#include <cstddef>
#include <map>
#include <stdexcept>
#include <string>

namespace payledger::ledger {

// A connection string libpq cannot parse; what() is libpq's own message.
class ConninfoError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// The options written in `conninfo` (a postgresql:// URI or key=value text), as libpq's
// PQconninfoParse reads them: only those given, no defaults and no environment. Throws
// ConninfoError.
[[nodiscard]] std::map<std::string, std::string> ParseConninfo(const std::string& conninfo);

// How many hosts libpq will try for `conninfo`: the entries of `host` (or `hostaddr`, whichever
// lists more), else of the PGHOST environment variable, else 1. Throws ConninfoError.
[[nodiscard]] std::size_t ConninfoHostCount(const std::string& conninfo);

// docs/availability.md#failover: the connection string payledger writes through. When `conninfo`
// names several hosts and no target_session_attrs (neither in the text nor in
// PGTARGETSESSIONATTRS), it gets target_session_attrs=read-write, so that libpq skips a standby and
// connects to the primary; otherwise it is returned unchanged. A URI keeps its form (the parameter
// is appended to its query); should appending change how libpq reads any other option, the result
// is the key=value form of the same options instead. Either way the result is checked by parsing it
// again. Throws ConninfoError when `conninfo` does not parse.
[[nodiscard]] std::string ForWrites(const std::string& conninfo);

}  // namespace payledger::ledger
