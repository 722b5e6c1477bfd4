#include "ledger/pg/conninfo.hpp"

#include <libpq-fe.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

namespace payledger::ledger {
namespace {

constexpr const char* kTargetSessionAttrs = "target_session_attrs";
constexpr const char* kReadWrite = "read-write";

std::size_t ListLength(const std::string& list) {
    return static_cast<std::size_t>(std::count(list.begin(), list.end(), ',')) + 1;
}

bool IsUri(const std::string& conninfo) {
    return conninfo.rfind("postgresql://", 0) == 0 || conninfo.rfind("postgres://", 0) == 0;
}

// key=value text of `options`, every value quoted (libpq: backslash escapes ' and \).
std::string KeyValueText(const std::map<std::string, std::string>& options) {
    std::string text;
    for (const auto& [keyword, value] : options) {
        if (!text.empty()) text += ' ';
        text += keyword + "='";
        for (const char c : value) {
            if (c == '\'' || c == '\\') text += '\\';
            text += c;
        }
        text += '\'';
    }
    return text;
}

// True when `candidate` parses to exactly `expected`.
bool ParsesTo(const std::string& candidate, const std::map<std::string, std::string>& expected) {
    try {
        return ParseConninfo(candidate) == expected;
    } catch (const ConninfoError&) {
        return false;
    }
}

}  // namespace

std::map<std::string, std::string> ParseConninfo(const std::string& conninfo) {
    char* error = nullptr;
    const std::unique_ptr<PQconninfoOption, decltype(&PQconninfoFree)> options{
        PQconninfoParse(conninfo.c_str(), &error), &PQconninfoFree};
    if (options == nullptr) {
        std::string message = error != nullptr ? error : "out of memory";
        if (error != nullptr) PQfreemem(error);
        while (!message.empty() && message.back() == '\n') message.pop_back();
        throw ConninfoError(message);
    }
    std::map<std::string, std::string> parsed;
    for (const PQconninfoOption* option = options.get(); option->keyword != nullptr; ++option) {
        if (option->val != nullptr) parsed[option->keyword] = option->val;
    }
    return parsed;
}

std::size_t ConninfoHostCount(const std::string& conninfo) {
    const std::map<std::string, std::string> options = ParseConninfo(conninfo);
    std::size_t count = 0;
    for (const char* keyword : {"host", "hostaddr"}) {
        const auto it = options.find(keyword);
        if (it != options.end()) count = std::max(count, ListLength(it->second));
    }
    if (count > 0) return count;
    // Neither in the text: libpq takes the environment's (PQconnectdb's fallback).
    const char* host = std::getenv("PGHOST");
    const char* hostaddr = std::getenv("PGHOSTADDR");
    if (host != nullptr) count = ListLength(host);
    if (hostaddr != nullptr) count = std::max(count, ListLength(hostaddr));
    return std::max<std::size_t>(count, 1);
}

std::string ForWrites(const std::string& conninfo) {
    std::map<std::string, std::string> options = ParseConninfo(conninfo);
    // The operator's own choice (any value) stands: a session on a read-only server is still
    // refused by Connect and by the classification of SQLSTATE 25006 (ledger/pg/failures.cpp).
    if (options.count(kTargetSessionAttrs) != 0) return conninfo;
    if (std::getenv("PGTARGETSESSIONATTRS") != nullptr) return conninfo;
    if (ConninfoHostCount(conninfo) <= 1) return conninfo;
    options[kTargetSessionAttrs] = kReadWrite;
    const std::string parameter = std::string(kTargetSessionAttrs) + "=" + kReadWrite;
    std::string candidate;
    if (IsUri(conninfo)) {
        // A URI's query starts at its first '?' (libpq requires '?' elsewhere to be
        // percent-encoded); the re-parse below catches any string where that is not so.
        candidate = conninfo + (conninfo.find('?') == std::string::npos ? "?" : "&") + parameter;
    } else {
        candidate = conninfo + " " + parameter;
    }
    if (ParsesTo(candidate, options)) return candidate;
    candidate = KeyValueText(options);
    if (!ParsesTo(candidate, options)) {
        throw ConninfoError("cannot add target_session_attrs=read-write to the connection string");
    }
    return candidate;
}

}  // namespace payledger::ledger
