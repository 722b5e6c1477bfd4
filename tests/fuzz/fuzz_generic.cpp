// Fuzzes GenericChannel::Verify (docs/platforms.md#generic). Input: header lines, a blank line, the
// body (tests/fuzz/README.md); Beast parses them as the server would. The header
// `Payledger-Signature: SIGN` is replaced by the correct signature of the body at the
// harness clock, so the fuzzer reaches the JSON checks behind the signature; any other
// value is verified as given. Checks: fuzz_channel.hpp's delivery and answer contracts, a
// correctly signed body is never refused as bad_signature, and one that repeats a JSON key
// (fuzz_json_keys.hpp) is malformed.

#include <cstdint>
#include <string>

#include "api/channels/generic_channel.hpp"
#include "tests/fuzz/fuzz_channel.hpp"
#include "tests/fuzz/fuzz_json_keys.hpp"

namespace {

constexpr const char* kSecret = "fuzz-generic-secret-0123456789";  // generic.secret: 16+ bytes.
constexpr const char* kSignatureHeader = "Payledger-Signature";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace payledger;
    static const api::GenericChannel channel{api::GenericConfig{.secret = kSecret}};
    const fuzz::Split split = fuzz::SplitInput(fuzz::AsText(data, size));
    std::optional<api::Incoming> incoming =
        fuzz::ParseIncoming("/v1/callbacks/generic", split.lines, split.body);
    if (!incoming) return 0;

    const auto header = incoming->request.find(kSignatureHeader);
    const bool signed_here = header != incoming->request.end() &&
                             header->value() == fuzz::kSignPlaceholder &&
                             incoming->request.count(kSignatureHeader) == 1;
    if (signed_here) {
        incoming->request.set(
            kSignatureHeader,
            api::GenericChannel::Sign(kSecret, fuzz::kNowSeconds, incoming->request.body()));
    }
    const std::string body = incoming->request.body();  // Verify moves it into the receipt.
    const ledger::Delivery delivery = channel.Verify(*incoming);
    fuzz::CheckDelivery(delivery, projections::Source::kGeneric, body);
    fuzz::CheckAnswers(channel, delivery);
    if (signed_here) FUZZ_CHECK(delivery.outcome != projections::Outcome::kBadSignature);
    // A signed body that repeats a key is malformed, never last-wins.
    if (signed_here && fuzz::HasRepeatedKey(body)) {
        FUZZ_CHECK(delivery.outcome == projections::Outcome::kMalformed);
    }
    return 0;
}
