// What every view shares: the message for a failed request, and "loading".
import {describe} from './api.js';
import {button, el} from './dom.js';

// A failure explained (api.js describe) in an alert, with what can be done next: sign in
// again after a 401, retry after a lost connection or a server failure.
export function errorBox(error, what, retry = null) {
    const {title, detail} = describe(error, what);
    const kind = error?.kind ?? 'console';
    const actions = el('p', {class: 'actions'});
    if (kind === 'unauthorized') {
        actions.append(button('Sign in again', () => {
            window.dispatchEvent(new CustomEvent('payledger:signout'));
        }));
    } else if (retry !== null && kind !== 'not_found' && kind !== 'forbidden') {
        actions.append(button('Try again', retry));
    }
    return el('div', {class: 'error', role: 'alert', dataset: {kind}},
              el('h2', {}, title), el('p', {}, detail), actions.childNodes.length ? actions : null);
}

export function loading(text = 'Loading…') {
    return el('p', {class: 'loading muted', role: 'status'}, text);
}
