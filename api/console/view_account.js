// #/accounts/<account_id> : the account's balance in each currency (docs/events.md#balances): paid
// minus refunded over its orders, exact to the minor unit.
import {api} from './api.js';
import {el, heading, isKey, table} from './dom.js';
import {formatMoney} from './money.js';
import {errorBox, loading} from './view_common.js';

export async function render(view, ctx, accountId) {
    view.append(heading('Account ' + accountId));
    if (!isKey(accountId)) {
        view.append(el('div', {class: 'error', role: 'alert', dataset: {kind: 'refused'}},
            el('h2', {}, 'Not an account id'),
            el('p', {}, 'An account_id is 1–64 characters of A-Z a-z 0-9 _ - | * .')));
        return;
    }
    const wait = loading();
    view.append(wait);
    let body;
    try {
        body = await api('/v1/accounts/' + encodeURIComponent(accountId) + '/balances',
                         {signal: ctx.signal});
    } catch (error) {
        if (error.name === 'AbortError') return;
        wait.remove();
        view.append(errorBox(error, 'order crediting account ' + accountId, ctx.reload));
        return;
    }
    wait.remove();
    view.append(el('h2', {}, 'Balances'),
        table(['Currency', 'Balance'], body.balances.map((row) => [
            String(row.currency),
            el('span', {class: 'amount', dataset: {currency: String(row.currency)}},
               formatMoney(row.balance, row.currency)),
        ]), 'balances'),
        el('p', {class: 'muted'}, 'Paid minus refunded over the account\'s orders; a refund ' +
                                  'counts only where its order also has a payment.'));
}
