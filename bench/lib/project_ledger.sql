-- The projections (docs/events.md#projections) in SQL: fills the empty `orders` and `balances` from
-- `ledger_events`, for seed_ledger.sql. The same rules as projections::FoldOrder and
-- BalanceContribution:
--   status: REFUNDED if a refund and a payment exist; else PAID if a payment exists; else
--           CLOSED if a close exists; else WAIT_PAY
--   transaction_id, paid_amount: the payment's, or null and 0
--   refunded_amount: the refund's, or 0
--   anomalies, sorted: paid_after_close (payment and close), refund_without_payment
--   seq: the order's last event
--   balances: one row per (account_id, currency) with an order; the sum of paid_amount less
--             refunded_amount over the orders that have a payment
-- An order without ORDER_CREATED violates orders.account_id NOT NULL and fails the load.
INSERT INTO orders (out_trade_no, account_id, amount, currency, status, transaction_id,
                    paid_amount, refunded_amount, anomalies, seq)
SELECT out_trade_no, account_id, amount, currency,
       CASE WHEN has_refund AND has_payment THEN 'REFUNDED'
            WHEN has_payment THEN 'PAID'
            WHEN has_close THEN 'CLOSED'
            ELSE 'WAIT_PAY'
       END,
       payment_transaction_id, coalesce(paid_amount, 0), coalesce(refunded_amount, 0),
       array_remove(ARRAY[CASE WHEN has_payment AND has_close THEN 'paid_after_close' END,
                          CASE WHEN has_refund AND NOT has_payment
                               THEN 'refund_without_payment' END], NULL),
       last_seq
FROM (SELECT out_trade_no,
             max(account_id) FILTER (WHERE event_type = 'ORDER_CREATED') AS account_id,
             max(amount) FILTER (WHERE event_type = 'ORDER_CREATED') AS amount,
             max(currency) FILTER (WHERE event_type = 'ORDER_CREATED') AS currency,
             bool_or(event_type = 'PAYMENT_SUCCEEDED') AS has_payment,
             bool_or(event_type = 'PAYMENT_CLOSED') AS has_close,
             bool_or(event_type = 'REFUND_SUCCEEDED') AS has_refund,
             max(transaction_id) FILTER (WHERE event_type = 'PAYMENT_SUCCEEDED')
                 AS payment_transaction_id,
             max(amount) FILTER (WHERE event_type = 'PAYMENT_SUCCEEDED') AS paid_amount,
             max(amount) FILTER (WHERE event_type = 'REFUND_SUCCEEDED') AS refunded_amount,
             max(seq) AS last_seq
      FROM ledger_events
      GROUP BY out_trade_no) AS folded
-- Key order, as a ledger whose order numbers grow with time has them, and as rebuild
-- leaves them: an index scan of orders_pkey then reads the heap in order.
ORDER BY out_trade_no;

INSERT INTO balances (account_id, currency, balance)
SELECT account_id, currency,
       sum(CASE WHEN paid_amount > 0 THEN paid_amount - refunded_amount ELSE 0 END)
FROM orders
GROUP BY account_id, currency;
