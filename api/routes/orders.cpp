// POST /v1/orders (docs/api.md#the-http-api): the merchant's token is checked by App::Handle,
// the body by the orders channel, the token's account scope here; the rest is every channel's write
// path.
#include <algorithm>

#include "api/routes/handlers.hpp"

namespace payledger::api {
namespace {

// A token scoped to accounts may register orders for those only.
bool MayRegisterFor(const MerchantToken& token, const std::string& account_id) {
    return !token.accounts || std::find(token.accounts->begin(), token.accounts->end(),
                                        account_id) != token.accounts->end();
}

}  // namespace

void HandleCreateOrder(WritePath& path, const OrdersChannel& orders, const MerchantToken& token,
                       Incoming incoming, Respond respond) {
    ledger::Delivery delivery = orders.Verify(incoming);
    if (delivery.event && !MayRegisterFor(token, delivery.event->account_id)) {
        // Authorization, not a delivery: refused like a token of another role, no receipt.
        return respond(ErrorResponse(
            http::status::forbidden, projections::Outcome::kBadSignature,
            "this token may not register orders for account " + delivery.event->account_id));
    }
    if (delivery.event && token.out_trade_no_prefix &&
        !delivery.event->out_trade_no.starts_with(*token.out_trade_no_prefix)) {
        // A tenant's order numbers are its own: one that registered another tenant's number
        // would be credited with that tenant's payment.
        return respond(ErrorResponse(http::status::forbidden, projections::Outcome::kBadSignature,
                                     "this token may register only order numbers that start "
                                     "with " +
                                         *token.out_trade_no_prefix));
    }
    Deliver(path, orders, std::move(delivery), std::move(incoming), std::move(respond));
}

}  // namespace payledger::api
