#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "projections/event.hpp"

namespace payledger::api {

// A signed timestamp is accepted within 300 s of the server clock, either way
// (docs/platforms.md#signature-window).
inline constexpr std::int64_t kSignatureWindowSeconds = 300;

// One way to say no: every refusal of an input, in every channel, is an outcome
// (docs/events.md#outcomes) and a message for a person, built by the same few helpers. `kIgnored`
// travels the same way: a valid notice that records no event stops the channel exactly like a
// refusal does.
struct Refusal {
    projections::Outcome outcome = projections::Outcome::kMalformed;
    std::string message{};
};

[[nodiscard]] inline Refusal Malformed(std::string message) {
    return {.outcome = projections::Outcome::kMalformed, .message = std::move(message)};
}
[[nodiscard]] inline Refusal BadSignature(std::string message) {
    return {.outcome = projections::Outcome::kBadSignature, .message = std::move(message)};
}
[[nodiscard]] inline Refusal Mismatch(std::string message) {
    return {.outcome = projections::Outcome::kMismatch, .message = std::move(message)};
}
[[nodiscard]] inline Refusal Ignored(std::string message) {
    return {.outcome = projections::Outcome::kIgnored, .message = std::move(message)};
}

// A value or the refusal that stands in its place: std::expected<T, Refusal> in C++20.
template <typename T>
class [[nodiscard]] Checked {
public:
    Checked(T value) : state_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit.
    Checked(Refusal refusal)                                                // NOLINT: implicit.
        : state_(std::in_place_index<1>, std::move(refusal)) {}

    [[nodiscard]] bool ok() const { return state_.index() == 0; }
    explicit operator bool() const { return ok(); }

    // REQUIRES: ok().
    [[nodiscard]] T& operator*() { return std::get<0>(state_); }
    [[nodiscard]] const T& operator*() const { return std::get<0>(state_); }
    [[nodiscard]] T* operator->() { return &std::get<0>(state_); }
    [[nodiscard]] const T* operator->() const { return &std::get<0>(state_); }

    // REQUIRES: !ok().
    [[nodiscard]] const Refusal& refusal() const { return std::get<1>(state_); }

private:
    std::variant<T, Refusal> state_;
};

// The checks every channel shares, each refusing with the same message everywhere.

// The key rule (out_trade_no, account_id; docs/events.md#money-keys-and-time): malformed "<field>
// must be 1-64 characters of A-Z a-z 0-9 _ - | * ." otherwise.
[[nodiscard]] Checked<std::string> RequireKey(std::string_view text, std::string_view field);

// Currency: malformed "<field> must be an upper-case ISO 4217 code" otherwise.
[[nodiscard]] Checked<std::string> RequireCurrency(std::string_view text, std::string_view field);

// A platform number (transaction_id, refund_id, trade_no, out_biz_no) by
// projections::IsValidPlatformId: malformed "<field> must be 1-128 visible ASCII characters"
// otherwise.
[[nodiscard]] Checked<std::string> RequirePlatformId(std::string_view text, std::string_view field);

// The signature window (docs/platforms.md#signature-window) for a signed timestamp header `what`
// (unix seconds): bad_signature "<what> is not unix seconds" unless `text` is plain digits, "<what>
// is outside the 300 s window" unless within kSignatureWindowSeconds of `received_at`, either way.
// The seconds.
[[nodiscard]] Checked<std::int64_t> RequireSignedAt(std::string_view text,
                                                    projections::TimeMicros received_at,
                                                    std::string_view what);

// Merchant and app ids (docs/platforms.md#cross-checks): malformed "<field> is missing" when
// `value` is empty, mismatch "<field> <value> is not the configured <field>" when it is not
// `configured`.
[[nodiscard]] std::optional<Refusal> CheckConfiguredId(std::string_view value,
                                                       std::string_view field,
                                                       std::string_view configured);

}  // namespace payledger::api
