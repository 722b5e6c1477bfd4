// Prints webhook requests signed by api/subscriptions/webhook_signature.hpp as JSON lines,
// for verify_signatures.mjs to check with the Standard Webhooks reference library (ctest
// StandardWebhooksLibraryVerifiesOurSignatures). Each line: {"what", "id", "timestamp",
// "body", "signature", "secrets": [whsec_ texts], "valid"}. Valid lines must verify with every
// secret; the others (a signature of another secret, a body, timestamp or id changed after
// signing) must verify with none. Timestamps are now: the library refuses ones older than
// five minutes.

#include <cstdint>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/subscriptions/webhook_signature.hpp"
#include "ledger/base/bytes.hpp"

namespace {

using nlohmann::json;
using payledger::api::Checked;
using payledger::api::ParseWebhookSecret;
using payledger::api::SignWebhook;
using payledger::api::WebhookSecret;
using payledger::ledger::Base64Encode;

// A whsec_ text of `size` bytes, each `seed` plus its index.
std::string SecretText(std::size_t size, unsigned char seed) {
    std::string bytes;
    for (std::size_t i = 0; i < size; ++i) bytes += static_cast<char>(seed + i);
    return "whsec_" + Base64Encode(bytes);
}

std::vector<WebhookSecret> SecretsOf(const std::vector<std::string>& texts) {
    std::vector<WebhookSecret> secrets;
    for (const std::string& text : texts) {
        Checked<WebhookSecret> secret = ParseWebhookSecret(text);
        if (!secret) throw std::runtime_error("a test secret does not parse");
        secrets.push_back(*secret);
    }
    return secrets;
}

// A delivery body of `count` events, shaped as a subscription sends it.
std::string DeliveryBody(int count, const std::string& account) {
    json events = json::array();
    for (int i = 1; i <= count; ++i) {
        events.push_back({{"seq", i},
                          {"out_trade_no", "T" + std::to_string(i)},
                          {"event_type", "PAYMENT_SUCCEEDED"},
                          {"source", "wechat_v3"},
                          {"account_id", account},
                          {"amount", 8880},
                          {"currency", "CNY"},
                          {"transaction_id", "4200000000" + std::to_string(i)},
                          {"occurred_at", "2026-11-29T08:30:00Z"},
                          {"recorded_at", "2026-11-29T08:30:01.123456Z"},
                          {"data", {{"attach", "商户备注 / \"quoted\" \\ tab\t"}}}});
    }
    return json{{"type", "ledger.events"},
                {"timestamp", "2026-11-29T08:30:02Z"},
                {"data", {{"subscription", "fulfilment"}, {"events", events}}}}
        .dump();
}

void PrintLine(const std::string& what, const std::string& id, std::int64_t timestamp,
               const std::string& body, const std::string& signature,
               const std::vector<std::string>& secrets, bool valid) {
    std::cout << json{{"what", what},           {"id", id},
                      {"timestamp", timestamp}, {"body", body},
                      {"signature", signature}, {"secrets", secrets},
                      {"valid", valid}}
                     .dump()
              << "\n";
}

}  // namespace

int main() {
    const std::int64_t now = static_cast<std::int64_t>(std::time(nullptr));
    const std::string reference = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const std::string small_body = DeliveryBody(1, "shop-1");
    const std::string large_body = DeliveryBody(1000, "shop.2|*_-");

    struct SignedCase {
        std::string what;
        std::vector<std::string> secrets;
        std::string id;
        std::string body;
    };
    const std::vector<SignedCase> cases = {
        {"one secret of 24 bytes", {reference}, "fulfilment:1-1", small_body},
        {"one secret of 64 bytes", {SecretText(64, 0x80)}, "fulfilment:1-1", small_body},
        {"a rotation of three secrets",
         {SecretText(24, 1), SecretText(32, 0x40), SecretText(64, 0xc0)},
         "fulfilment:1-1",
         small_body},
        {"a batch of 1000 events", {SecretText(32, 7)}, "shop.2|*_-:1-1000", large_body},
        {"an empty JSON object", {reference}, "a:5-5", "{}"},
    };
    for (const SignedCase& c : cases) {
        PrintLine(c.what, c.id, now, c.body, SignWebhook(SecretsOf(c.secrets), c.id, now, c.body),
                  c.secrets, true);
    }
    const std::vector<WebhookSecret> signer = SecretsOf({reference});
    const std::string id = "fulfilment:1-1";
    const std::string signature = SignWebhook(signer, id, now, small_body);
    PrintLine("signed with another secret", id, now, small_body,
              SignWebhook(SecretsOf({SecretText(24, 9)}), id, now, small_body), {reference}, false);
    PrintLine("body changed after signing", id, now, DeliveryBody(1, "shop-9"), signature,
              {reference}, false);
    PrintLine("timestamp changed after signing", id, now - 1, small_body, signature, {reference},
              false);
    PrintLine("id changed after signing", "fulfilment:1-2", now, small_body, signature, {reference},
              false);
    return 0;
}
