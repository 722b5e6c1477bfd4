// #/orders/<out_trade_no> : what happened to one order — its projection row (status, amounts,
// anomalies), the channel and expiry it was registered with and where asking that platform
// stands, the event timeline, and every delivery that named it, duplicates and rejections
// included, each with its raw body (the platforms' answers to payledger's own queries too).
import {ApiError, api} from './api.js';
import {accountRoute, append, button, el, fields, heading, isKey, link, time} from './dom.js';
import {stringify} from './json.js';
import {formatMoney} from './money.js';
import {receiptCard} from './view_receipt.js';
import {errorBox, loading} from './view_common.js';

const RECEIPTS_PAGE = 50;

const ANOMALIES = {
    paid_after_close: 'Paid after close: a payment and a close are both recorded.',
    refund_without_payment: 'Refund without payment: a refund is recorded but no payment.',
};

function summary(order) {
    const anomalies = Array.isArray(order.anomalies) ? order.anomalies : [];
    return el('section', {class: 'order-summary', 'aria-label': 'Order'},
        el('p', {}, el('span', {class: 'badge status-' + String(order.status).toLowerCase(),
                                 dataset: {field: 'status'}}, String(order.status))),
        fields([
            ['Amount', formatMoney(order.amount, order.currency), 'amount'],
            ['Paid', formatMoney(order.paid_amount, order.currency), 'paid_amount'],
            ['Refunded', formatMoney(order.refunded_amount, order.currency), 'refunded_amount'],
            ['Currency', String(order.currency), 'currency'],
            ['Account', isKey(order.account_id)
                ? link(accountRoute(order.account_id), order.account_id) : String(order.account_id),
             'account_id'],
            ['Platform transaction', order.transaction_id === null ? null : String(order.transaction_id),
             'transaction_id'],
            ['Last event', 'seq ' + order.seq, 'seq'],
            ['Channel', order.channel === null ? none() : String(order.channel), 'channel'],
            ['Expires', order.expires_at === null ? none() : time(order.expires_at), 'expires_at'],
        ]),
        anomalies.length === 0
            ? el('p', {class: 'ok-text', dataset: {field: 'anomalies'}}, 'No anomalies.')
            : el('div', {class: 'anomalies', role: 'note', dataset: {field: 'anomalies'}},
                 el('h2', {}, 'Anomalies'),
                 el('ul', {}, anomalies.map((a) => el('li', {dataset: {anomaly: String(a)}},
                     ANOMALIES[a] ?? String(a))))));
}

function none(text = 'none') {
    return el('span', {class: 'muted'}, text);
}

// Where asking the order's platform stands (docs/query.md#the-orders-query-state): null when
// this server does not ask about the order, so the block says why instead of showing nothing.
function queries(order) {
    const query = order.query;
    const block = el('section', {class: 'query-state', 'aria-label': 'Platform queries',
                                 dataset: {field: 'query'}},
                     el('h2', {}, 'Platform queries'));
    if (query === null || typeof query !== 'object') {
        return append(block, el('p', {class: 'muted', dataset: {field: 'not_queried'}},
            order.channel === null
                ? 'Not queried: the order was registered without a channel, so no platform is ' +
                  'asked about it.'
                : 'Not queried: this server is not configured to ask ' + String(order.channel) +
                  ' about its orders.'));
    }
    // No next query once the order is settled (the server clears it), or once the schedule's
    // steps are spent while it waits for payment: then the daily statement is the last check.
    const next = query.next_at !== null ? time(query.next_at)
        : order.status !== 'WAIT_PAY' ? none('none: the order is settled (' + String(order.status) + ')')
        : none('none: the schedule is done');
    return append(block, fields([
        ['Attempts', String(query.attempts), 'query_attempts'],
        ['Last asked', query.last_at === null ? none('never') : time(query.last_at), 'query_last_at'],
        ['Last answer', query.last_answer === null ? none() : el('code', {}, String(query.last_answer)),
         'query_last_answer'],
        ['Next query', next, 'query_next_at'],
        ['Closed on the platform', query.closed_at === null ? none('no') : time(query.closed_at),
         'query_closed_at'],
    ]));
}

function showDelivery(id, status) {
    const card = document.getElementById('receipt-' + id);
    if (card === null) {
        status.textContent = 'Delivery #' + id + ' is on a later page: load more deliveries below.';
        return;
    }
    card.scrollIntoView({block: 'start'});
    card.focus();
}

function timeline(events, status) {
    if (events.length === 0) return el('p', {class: 'muted'}, 'No event is recorded for this order.');
    return el('ol', {class: 'timeline'}, events.map((event) => el('li', {dataset: {seq: String(event.seq)}},
        el('div', {class: 'event-head'},
           el('strong', {}, String(event.event_type)), ' ',
           event.amount === null ? null : el('span', {class: 'amount'}, formatMoney(event.amount, event.currency)),
           ' via ', el('span', {class: 'source'}, String(event.source))),
        fields([
            ['Occurred', time(event.occurred_at)],
            ['Recorded', time(event.recorded_at)],
            ['Seq', String(event.seq)],
            ['Platform id', event.transaction_id === null ? null : String(event.transaction_id)],
            ['Delivery', button('#' + event.receipt_id, () => showDelivery(event.receipt_id, status),
                                {class: 'linkish', 'aria-label': 'Show delivery #' + event.receipt_id})],
        ], 'fields compact'),
        event.data && Object.keys(event.data).length > 0
            ? el('details', {}, el('summary', {}, event.source === 'api'
                     // An ORDER_CREATED's data is the merchant's registration (channel, expiry).
                     ? 'Fields kept from the registration' : 'Fields kept from the platform'),
                 el('pre', {class: 'pretty'}, stringify(event.data)))
            : null)));
}

// The deliveries, a page at a time in arrival order, with a button for the next page.
async function deliveries(section, outTradeNo, ctx) {
    const list = el('div', {class: 'receipts'});
    const more = el('p', {class: 'pager'});
    const count = el('span', {class: 'count'});
    section.append(el('h2', {}, 'Deliveries ', count), list, more);
    let after = '0';
    let shown = 0;
    const load = async () => {
        more.replaceChildren(loading());
        let page;
        try {
            page = await api('/v1/orders/' + encodeURIComponent(outTradeNo) + '/receipts?limit=' +
                             RECEIPTS_PAGE + '&after=' + after, {signal: ctx.signal});
        } catch (error) {
            if (error.name === 'AbortError') return;
            if (error instanceof ApiError && error.kind === 'not_found') {
                count.textContent = '(0)';
                more.replaceChildren(el('span', {class: 'muted'}, 'No delivery named this order.'));
                return;
            }
            more.replaceChildren(errorBox(error, 'delivery for this order', load));
            return;
        }
        for (const receipt of page.receipts) list.append(receiptCard(receipt));
        shown += page.receipts.length;
        after = String(page.next_after);
        count.textContent = '(' + shown + (page.receipts.length === RECEIPTS_PAGE ? '+' : '') + ')';
        more.replaceChildren(page.receipts.length === RECEIPTS_PAGE
            ? button('Load more deliveries', load) : el('span', {class: 'muted'},
                shown === 0 ? 'No delivery named this order.' : 'Every delivery is shown.'));
    };
    await load();
}

export async function render(view, ctx, outTradeNo) {
    view.append(heading('Order ' + outTradeNo));
    if (!isKey(outTradeNo)) {
        view.append(el('div', {class: 'error', role: 'alert', dataset: {kind: 'refused'}},
            el('h2', {}, 'Not an order number'),
            el('p', {}, 'An out_trade_no is 1–64 characters of A-Z a-z 0-9 _ - | * .')));
        return;
    }
    const path = '/v1/orders/' + encodeURIComponent(outTradeNo);
    const status = el('p', {class: 'muted', role: 'status'});
    const wait = loading();
    view.append(wait);
    const [order, events] = await Promise.allSettled([
        api(path, {signal: ctx.signal}), api(path + '/events', {signal: ctx.signal})]);
    wait.remove();
    if (ctx.signal.aborted) return;
    const failure = [order, events].find((r) => r.status === 'rejected' &&
        !(r.reason instanceof ApiError && r.reason.kind === 'not_found'));
    if (failure) {
        view.append(errorBox(failure.reason, 'order ' + outTradeNo, ctx.reload));
        return;
    }
    if (order.status === 'rejected') {
        // Unknown, but deliveries may still name it (forgeries, a callback before its order).
        view.append(errorBox(order.reason, 'order ' + outTradeNo + ' (no ORDER_CREATED)'));
    } else {
        append(view, summary(order.value), queries(order.value),
               el('h2', {}, 'Events'), timeline(events.value.events, status), status);
    }
    const section = el('section', {class: 'deliveries'});
    view.append(section);
    await deliveries(section, outTradeNo, ctx);
}
