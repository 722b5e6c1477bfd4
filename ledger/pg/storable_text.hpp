#pragma once

#include <string>

namespace payledger::ledger {

// PostgreSQL's text and jsonb cannot hold U+0000: a NUL from the wire in a message, a header
// or a kept platform field would make a whole batch fail. The writer stores texts through
// these, with U+FFFD in its place; the raw body keeps the exact bytes (bytea). Pure: no
// database here (the fuzz targets check JsonWithoutNul on every channel's output).

// `text` with every NUL byte replaced by U+FFFD.
[[nodiscard]] std::string WithoutNul(std::string text);

// A JSON text with every \u0000 escape replaced by \ufffd. An escape is a backslash after
// an even number of backslashes; "\\u0000" is literal text and stays.
[[nodiscard]] std::string JsonWithoutNul(std::string text);

// `text` as PostgreSQL's text can hold it: WithoutNul, and each invalid UTF-8 sequence
// replaced by U+FFFD as nlohmann::json's error_handler_t::replace does (texts from the wire
// are evidence, not something to fail a batch over). Valid UTF-8 without NUL is unchanged.
[[nodiscard]] std::string StorableText(std::string text);

}  // namespace payledger::ledger
