// Fuzzes the batch planner (projections/plan.hpp): the input chooses what three orders hold
// already and a batch of up to 64 deliveries (event type, order, platform id, amount, refund
// claims, or refused before the ledger), and every plan must pass CheckPlan: consecutive ids,
// order rows equal to the fold from scratch, balances equal to the fold from scratch
// (docs/events.md#invariants, 5), and the same answers as the deliveries one batch each.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "projections/plan.hpp"
#include "tests/fuzz/fuzz_check.hpp"
#include "tests/projections/plan_check.hpp"

namespace payledger::fuzz {
namespace {

using testing::OrderSpec;
using testing::PlanCase;

// Two bytes make one delivery: the first its kind and order, the second its variant.
PlanCase Delivery(std::uint8_t kind_byte, std::uint8_t variant) {
    const OrderSpec& order = testing::Orders()[kind_byte % testing::Orders().size()];
    const std::string id = std::to_string(variant % 3);
    // Around the order's amount: equal, a little less or more (mismatch for a payment).
    const std::int64_t amount = order.amount + (variant >> 2) % 5 - 2;
    switch ((kind_byte / testing::Orders().size()) % 7) {
        case 0:
            return testing::Deliver(testing::Created(order));
        case 1:
            return testing::Deliver(testing::Payment(order, "t" + id, amount));
        case 2:
            return testing::Deliver(testing::Close(order));
        case 3:
            return testing::Deliver(
                testing::Refund(order, "r" + id, 1 + amount / (1 + variant % 4)));
        case 4:
            return testing::Deliver(testing::Refund(order, "r" + id, amount / 2),
                                    {.order_amount = amount, .payment_transaction_id = "t" + id});
        case 5:
            return {.outcome = projections::Outcome::kMalformed, .message = "malformed " + id};
        default:
            return {.outcome = projections::Outcome::kIgnored, .message = "ignored " + id};
    }
}

}  // namespace
}  // namespace payledger::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace payledger;
    if (size < 1) return 0;
    projections::LedgerState state{.next_seq = 1 + data[0], .next_receipt_id = 1};
    for (std::size_t i = 0; i < testing::Orders().size(); ++i) {
        testing::Store(testing::Orders()[i], static_cast<testing::Stored>((data[0] >> (2 * i)) % 5),
                       state);
    }
    std::vector<testing::PlanCase> cases;
    for (std::size_t i = 1; i + 1 < size && cases.size() < 64; i += 2) {
        cases.push_back(fuzz::Delivery(data[i], data[i + 1]));
    }
    if (cases.empty()) return 0;
    const projections::BatchPlan plan = projections::PlanBatch(state, testing::Inputs(cases));
    const std::vector<std::string> failures = testing::CheckPlan(state, cases, plan);
    if (!failures.empty()) std::fprintf(stderr, "%s\n", failures.front().c_str());
    FUZZ_CHECK(failures.empty());
    return 0;
}
