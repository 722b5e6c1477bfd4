// POST /v1/orders (SPEC §5): the merchant's token is checked by App::Handle, the body by the
// orders channel, the token's account scope here; the rest is every channel's write path.
#include <algorithm>

#include "api/routes/app.hpp"

namespace payledger::api {
namespace {

// SPEC §9: a token scoped to accounts may register orders for those only.
bool MayRegisterFor(const MerchantToken& token, const std::string& account_id) {
    return !token.accounts || std::find(token.accounts->begin(), token.accounts->end(),
                                        account_id) != token.accounts->end();
}

}  // namespace

void App::HandleCreateOrder(const MerchantToken& token, Incoming incoming, Respond respond) {
    ledger::Delivery delivery = orders_.Verify(incoming);
    if (delivery.event && !MayRegisterFor(token, delivery.event->account_id)) {
        // Authorization, not a delivery: refused like a token of another role, no receipt.
        return respond(ErrorResponse(
            http::status::forbidden, projections::Outcome::kBadSignature,
            "this token may not register orders for account " + delivery.event->account_id));
    }
    Deliver(orders_, std::move(delivery), std::move(incoming), std::move(respond));
}

}  // namespace payledger::api
