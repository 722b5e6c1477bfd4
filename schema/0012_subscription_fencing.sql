-- Fencing the subscriptions' leases (ledger/subscriptions/subscriptions.hpp, docs/subscriptions.md#inside-serve).
--
-- A process delivers a subscription while it holds the subscription's advisory lock on a
-- session of its own. When that session dies (a network partition, a killed backend), another
-- process takes the lock over, but a POST the first one had in flight still ends, and its
-- answer would be stored by a process that no longer holds the lease. `lease_token` fences it:
-- each process that takes the lock increments the token in a transaction of its own before it
-- reads the subscription, and every write of a delivery's outcome (the cursor's
-- compare-and-set, a failure, a disable) holds only while the stored token is still the one its
-- process took. The row lock orders the increments, so a holder that lost the lock can no
-- longer change the state once the next holder has taken its token.
ALTER TABLE subscriptions ADD COLUMN lease_token bigint NOT NULL DEFAULT 0
    CHECK (lease_token >= 0);
