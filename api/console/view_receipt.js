// One delivery (a receipt, docs/api.md#objects) as a card: its outcome, where and when it came
// from, its verification headers, its body pretty-printed, and the raw bytes. Shared by the order
// view and the deliveries feed.
import {bodyView} from './body.js';
import {el, fields, isKey, link, orderRoute, table, time} from './dom.js';

// The stored outcomes, in the order of docs/events.md#outcomes (rate_limited and unavailable are
// never stored).
export const OUTCOMES = ['appended', 'duplicate', 'ignored', 'malformed', 'bad_signature',
                         'unknown_order', 'conflict', 'mismatch'];

export function outcomeBadge(outcome) {
    const known = OUTCOMES.includes(outcome);
    return el('span', {class: 'badge outcome-' + (known ? outcome : 'other')}, String(outcome));
}

// The order a receipt names, as a link when it is a valid key (an unverified body may claim
// anything), else as text.
export function orderLink(outTradeNo) {
    if (outTradeNo === null || outTradeNo === undefined) return el('span', {class: 'muted'}, 'none');
    return isKey(outTradeNo) ? link(orderRoute(outTradeNo), outTradeNo) : String(outTradeNo);
}

// A platform's answer to payledger's own query or close (docs/query.md#verification) is stored
// as a receipt of source <channel>_query or <channel>_close, with what payledger asked in its
// Payledger-Request header: shown as a field, since without it the card reads like a
// notification the platform sent of its own accord.
function isAnswer(receipt) {
    return /_(query|close)$/.test(String(receipt.source));
}
function askedRequest(headers) {
    const asked = headers !== null && typeof headers === 'object' ? headers['Payledger-Request'] : null;
    return typeof asked === 'string' ? el('code', {}, asked) : null;
}

function headersView(headers) {
    const names = headers !== null && typeof headers === 'object' ? Object.keys(headers) : [];
    if (names.length === 0) return null;
    return el('details', {class: 'headers'},
        el('summary', {}, 'Headers (' + names.length + ')'),
        table(['header', 'value'], names.map((name) => [name, String(headers[name])])));
}

// `receipt` as an <article id="receipt-<id>">; `withOrder` adds the order it names.
export function receiptCard(receipt, {withOrder = false} = {}) {
    const id = String(receipt.id);
    return el('article', {class: 'receipt', id: 'receipt-' + id, tabindex: '-1',
                          dataset: {id, outcome: String(receipt.outcome)}},
        el('header', {},
           el('h3', {}, 'Delivery #' + id), outcomeBadge(receipt.outcome),
           el('span', {class: 'source'}, String(receipt.source)), time(receipt.received_at)),
        fields([
            ['Outcome', String(receipt.outcome), 'outcome'],
            isAnswer(receipt) ? ['Asked', askedRequest(receipt.headers), 'request'] : null,
            withOrder ? ['Order', orderLink(receipt.out_trade_no), 'out_trade_no'] : null,
            ['Event', receipt.seq === null ? el('span', {class: 'muted'}, 'none') : 'seq ' + receipt.seq, 'seq'],
            ['Message', receipt.message ? String(receipt.message) : null, 'message'],
            ['From', receipt.peer ? String(receipt.peer) : null, 'peer'],
            ['Body SHA-256', el('code', {}, String(receipt.body_sha256)), 'body_sha256'],
            ['Chain', el('code', {}, String(receipt.chain)), 'chain'],
        ].filter(Boolean)),
        headersView(receipt.headers),
        bodyView(receipt));
}
