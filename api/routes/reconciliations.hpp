#pragma once

#include <string>
#include <vector>

#include "api/http/http.hpp"
#include "ledger/read/read_router.hpp"

namespace payledger::api {

// GET /v1/reconciliations?after=&limit= and GET /v1/reconciliations/{id}
// (docs/reconciliation.md#the-record), for auditors: the caller has checked the method and the
// token. `segments` is the path split at "/" ("v1", "reconciliations"[, id]). Reads through `reads`
// (docs/availability.md#read-replicas); its failures propagate, for the caller's one
// classification.
[[nodiscard]] Response HandleReconciliations(ledger::ReadRouter& reads, const Incoming& incoming,
                                             const std::vector<std::string>& segments);

}  // namespace payledger::api
