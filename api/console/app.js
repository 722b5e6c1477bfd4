// The console's router (docs/api.md#the-auditor-console): deep links a person can share —
// #/orders/<out_trade_no>, #/accounts/<account_id>, #/events, #/receipts?outcome=<outcome>,
// #/reconciliations[/<id>], #/subscriptions, #/chain — each rendered into <main> from the auditor
// API. Without a token, sign-in comes first and then the link that was asked for. Leaving a view
// aborts its requests and timers.
import {session} from './api.js';
import {render as account} from './view_account.js';
import {render as chain} from './view_chain.js';
import {render as events} from './view_events.js';
import {render as home} from './view_home.js';
import {render as order} from './view_order.js';
import {renderList as reconciliations, renderOne as reconciliation} from './view_reconciliations.js';
import {render as receipts} from './view_receipts.js';
import {render as signin} from './view_signin.js';
import {render as subscriptions} from './view_subscriptions.js';

const ROUTES = [
    [/^\/orders\/([^/]+)$/, 'home', (view, ctx, m) => order(view, ctx, m[1])],
    [/^\/accounts\/([^/]+)$/, 'home', (view, ctx, m) => account(view, ctx, m[1])],
    [/^\/events$/, 'events', events],
    [/^\/receipts$/, 'receipts', receipts],
    [/^\/reconciliations$/, 'reconciliations', reconciliations],
    [/^\/reconciliations\/([0-9]{1,18})$/, 'reconciliations',
     (view, ctx, m) => reconciliation(view, ctx, m[1])],
    [/^\/subscriptions$/, 'subscriptions', subscriptions],
    [/^\/chain$/, 'chain', chain],
    [/^\/?$/, 'home', home],
];

const view = document.getElementById('view');
const nav = document.getElementById('nav');
let leave = new AbortController();

function decode(text) {
    try {
        return decodeURIComponent(text);
    } catch {
        return null;
    }
}

// "#/receipts?outcome=conflict" → {path: "/receipts", params}; keys decoded.
function parseHash() {
    const hash = location.hash.startsWith('#') ? location.hash.slice(1) : '';
    const question = hash.indexOf('?');
    const path = question < 0 ? hash : hash.slice(0, question);
    const params = new URLSearchParams(question < 0 ? '' : hash.slice(question + 1));
    return {path, params};
}

function showSession() {
    const signedIn = session.token() !== null;
    nav.hidden = !signedIn;
    document.getElementById('session').hidden = !signedIn;
    document.getElementById('role').textContent = signedIn ? session.role() + ' token' : '';
}

async function route() {
    leave.abort();
    leave = new AbortController();
    const ctx = {signal: leave.signal, params: new URLSearchParams(), reload: () => route()};
    view.replaceChildren();
    showSession();
    if (session.token() === null) {
        await signin(view, {onSignedIn: () => route()});
        return;
    }
    const {path, params} = parseHash();
    ctx.params = params;
    let found = null;
    for (const [pattern, section, render] of ROUTES) {
        const match = pattern.exec(path);
        if (match === null) continue;
        const decoded = match.map((part, i) => (i === 0 ? part : decode(part)));
        if (decoded.includes(null)) break;
        found = {section, run: () => render(view, ctx, decoded)};
        break;
    }
    for (const a of nav.querySelectorAll('a')) {
        if (found && a.dataset.route === found.section) a.setAttribute('aria-current', 'page');
        else a.removeAttribute('aria-current');
    }
    if (found === null) {
        view.append(Object.assign(document.createElement('h1'), {textContent: 'No such view'}),
                    Object.assign(document.createElement('p'), {textContent:
                        'The console has no view at this address. Use the links above.'}));
        return;
    }
    const run = found.run();
    view.querySelector('h1')?.focus({preventScroll: true});
    try {
        await run;
    } catch (error) {
        if (error?.name !== 'AbortError') throw error;
    }
}

function signOut() {
    session.clear();
    route();
}

document.getElementById('sign-out').addEventListener('click', signOut);
window.addEventListener('payledger:signout', signOut);
window.addEventListener('hashchange', route);
route();
