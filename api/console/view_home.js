// #/ : look up an order or an account, and the ways into the feeds.
import {accountRoute, el, heading, isKey, link, orderRoute} from './dom.js';

function lookup(label, name, route, hint) {
    const input = el('input', {name, id: 'lookup-' + name, required: true, maxlength: '64',
                               autocomplete: 'off', spellcheck: 'false',
                               pattern: '[A-Za-z0-9_\\-|*.]{1,64}'});
    const message = el('p', {class: 'field-error', role: 'alert'});
    const form = el('form', {class: 'lookup', method: 'post', novalidate: true},
        el('label', {for: 'lookup-' + name}, label), el('div', {class: 'row'}, input,
        el('button', {type: 'submit'}, 'Open')), el('p', {class: 'hint muted'}, hint), message);
    form.addEventListener('submit', (event) => {
        event.preventDefault();
        const key = input.value.trim();
        if (!isKey(key)) {
            message.textContent = 'That is not a valid ' + name.replace('_', ' ') +
                ': 1–64 characters of A-Z a-z 0-9 _ - | * .';
            input.focus();
            return;
        }
        location.hash = route(key);
    });
    return form;
}

export async function render(view) {
    view.append(heading('Find'),
        el('div', {class: 'lookups'},
           lookup('Order number (out_trade_no)', 'out_trade_no', orderRoute,
                  'Its status, amounts, events and every delivery.'),
           lookup('Account', 'account_id', accountRoute, 'Its balance in each currency.')),
        el('h2', {}, 'Feeds'),
        el('ul', {class: 'links'},
           el('li', {}, link('#/events', 'Every event'), ', newest first, following new ones live'),
           el('li', {}, link('#/receipts?outcome=conflict', 'Conflicts'), ', ',
              link('#/receipts?outcome=mismatch', 'mismatches'), ', ',
              link('#/receipts?outcome=bad_signature', 'bad signatures'), ' and ',
              link('#/receipts', 'every delivery')),
           el('li', {}, link('#/reconciliations', 'Reconciliations'),
              ' against the platforms\' daily statements'),
           el('li', {}, link('#/chain', 'The chain\'s head'), ' and verify')));
}
