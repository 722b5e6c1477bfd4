// #/receipts?outcome=<outcome> : every delivery, or those of one outcome — conflicts,
// mismatches, bad signatures — newest first (before= paging, docs/api.md#feeds-and-paging), each
// opening to its full card with the raw body.
import {api} from './api.js';
import {button, el, heading, time} from './dom.js';
import {OUTCOMES, orderLink, outcomeBadge, receiptCard} from './view_receipt.js';
import {errorBox, loading} from './view_common.js';

const NEWEST = '9223372036854775807';
const PAGE = 50;

function filter(current) {
    const select = el('select', {name: 'outcome', id: 'outcome'},
        el('option', {value: ''}, 'every outcome'),
        OUTCOMES.map((o) => el('option', {value: o, selected: o === current}, o)));
    select.addEventListener('change', () => {
        location.hash = select.value === '' ? '#/receipts'
            : '#/receipts?outcome=' + encodeURIComponent(select.value);
    });
    return el('form', {class: 'filter', method: 'post', novalidate: true,
                       onsubmit: (event) => event.preventDefault()},
              el('label', {for: 'outcome'}, 'Outcome'), select);
}

function row(receipt) {
    // The card is built when it is first opened: a page of 50 raw bodies is heavy.
    const details = el('details', {class: 'receipt-row'},
        el('summary', {},
           el('span', {class: 'id'}, '#' + receipt.id), outcomeBadge(receipt.outcome),
           el('span', {class: 'source'}, String(receipt.source)),
           el('span', {class: 'order'}, receipt.out_trade_no === null ? 'no order' : String(receipt.out_trade_no)),
           time(receipt.received_at),
           receipt.message ? el('span', {class: 'message'}, String(receipt.message)) : null));
    details.addEventListener('toggle', () => {
        if (details.open && details.childElementCount === 1) {
            details.append(el('p', {}, 'Order: ', orderLink(receipt.out_trade_no)), receiptCard(receipt));
        }
    });
    return el('li', {dataset: {id: String(receipt.id), outcome: String(receipt.outcome)}}, details);
}

export async function render(view, ctx) {
    const outcome = ctx.params.get('outcome') ?? '';
    view.append(heading(outcome === '' ? 'Deliveries' : 'Deliveries: ' + outcome),
                el('div', {class: 'toolbar'}, filter(outcome), button('Newest', ctx.reload)));
    if (outcome !== '' && !OUTCOMES.includes(outcome)) {
        view.append(el('div', {class: 'error', role: 'alert', dataset: {kind: 'refused'}},
            el('h2', {}, 'Unknown outcome'),
            el('p', {}, 'The outcomes are: ' + OUTCOMES.join(', ') + '.')));
        return;
    }
    const list = el('ol', {class: 'receipt-feed', 'aria-label': 'Deliveries, newest first'});
    const older = el('p', {class: 'pager'});
    view.append(list, older);
    let before = NEWEST;
    const load = async () => {
        older.replaceChildren(loading());
        let page;
        try {
            page = await api('/v1/receipts?limit=' + PAGE + '&before=' + before +
                             (outcome ? '&outcome=' + encodeURIComponent(outcome) : ''),
                             {signal: ctx.signal});
        } catch (error) {
            if (error.name === 'AbortError') return;
            older.replaceChildren(errorBox(error, 'the deliveries', load));
            return;
        }
        for (let i = page.receipts.length - 1; i >= 0; i--) list.append(row(page.receipts[i]));
        before = String(page.prev_before);
        older.replaceChildren(page.receipts.length === PAGE ? button('Older deliveries', load)
            : el('span', {class: 'muted'}, list.children.length === 0
                ? 'No delivery' + (outcome ? ' with outcome ' + outcome : '') + ' is recorded.'
                : 'The first one is shown.'));
    };
    await load();
}
