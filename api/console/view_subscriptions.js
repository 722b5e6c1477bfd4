// #/subscriptions : the webhook subscriptions (docs/subscriptions.md#inside-serve). For an admin
// token, each subscription's state from GET /v1/admin/subscriptions — its cursor, the feed's
// head, its lag, its failures — refreshed every few seconds while the view is open; another
// token is told that the state needs an admin token. For every token, the recorded changes
// (rewinds, 410s, re-enables) from GET /v1/subscriptions/changes, newest first, followed as
// new ones are recorded by polling after= the newest id shown, and paged back with before=.
// Cursors, heads and lags are plain integers, shown as the server wrote them.
import {api} from './api.js';
import {button, el, heading, time} from './dom.js';
import {errorBox, loading} from './view_common.js';

const NEWEST = '9223372036854775807';
const PAGE = 50;
const FOLLOW_PAGE = 100;
const POLL_MS = 3000;
const RETRY_MS_MAX = 10000;
const ROWS_MAX = 500;  // Older changes leave the page as new ones come; "Older" brings them back.

const STATE_COLUMNS = ['Subscription', 'State', 'URL', 'Cursor', 'Head', 'Behind', 'Oldest waiting',
                       'Failures', 'Last error', 'Last attempt', 'Next attempt'];
const CHANGE_COLUMNS = ['Change', 'Subscription', 'From', 'To', 'Why', 'At'];

// A server integer as text: 0 stays "0"; anything else that is not an integer shows a dash.
function integer(value) {
    return typeof value === 'number' || typeof value === 'bigint' ? String(value) : '—';
}

// The age of the oldest undelivered event, a decimal number of seconds: to a tenth.
function seconds(value) {
    return typeof value === 'number' ? value.toFixed(1) + ' s' : integer(value);
}

function stateBadge(state) {
    const word = String(state);
    return el('span', {class: 'badge subscription-' + word.replace(/[^a-z]/g, '')}, word);
}

function subscriptionRow(s) {
    const cell = (field, value) => el('td', {dataset: {field}}, value);
    return el('tr', {dataset: {name: String(s.name), state: String(s.state)}},
        el('th', {scope: 'row', dataset: {field: 'name'}}, String(s.name)),
        cell('state', stateBadge(s.state)),
        cell('url', el('code', {}, String(s.url))),
        cell('after', integer(s.after)), cell('head', integer(s.head)),
        cell('lag_events', integer(s.lag_events)),
        cell('lag_seconds', seconds(s.lag_seconds)),
        cell('consecutive_failures', integer(s.consecutive_failures)),
        cell('last_error', s.last_error === null || s.last_error === undefined
            ? el('span', {class: 'muted'}, '—') : String(s.last_error)),
        cell('last_attempt_at', time(s.last_attempt_at)),
        cell('next_attempt_at', time(s.next_attempt_at)));
}

function changeRow(c) {
    return el('tr', {dataset: {id: String(c.id), why: String(c.why)}},
        el('td', {}, '#' + c.id), el('td', {}, String(c.name)),
        el('td', {}, integer(c.from)), el('td', {}, integer(c.to)),
        el('td', {}, el('strong', {}, String(c.why))), el('td', {}, time(c.at)));
}

function tableOf(columns, body, className, label) {
    return el('div', {class: 'scroll'}, el('table', {class: className, 'aria-label': label},
        el('thead', {}, el('tr', {}, columns.map((h) => el('th', {scope: 'col'}, h)))), body));
}

export async function render(view, ctx) {
    const status = el('span', {class: 'feed-status', role: 'status', dataset: {state: 'opening'}},
                      'Opening…');
    const stateArea = el('section', {class: 'subscriptions-state', 'aria-label': 'State'});
    const changesBody = el('tbody');
    const changesArea = el('section', {class: 'subscription-changes'});
    const older = el('p', {class: 'pager'});
    view.append(heading('Subscriptions'), el('p', {class: 'feed-bar'}, status), stateArea,
                el('h2', {}, 'Changes, newest first'), changesArea, older);

    let timer = null;
    let retryMs = POLL_MS;
    let stateReadable = true;  // False after a 403: the token may not read the state.
    let newest = '0';          // The largest change id shown: the next poll reads after it.
    let oldest = NEWEST;       // The smallest id shown: "Older" reads before it.
    let reachedStart = false;  // The last "Older" page was not full: nothing lies before it.
    let changesTable = null;
    ctx.signal.addEventListener('abort', () => clearTimeout(timer));

    const setStatus = (name, text) => {
        status.dataset.state = name;
        status.textContent = text;
    };
    const schedule = (ms) => {
        clearTimeout(timer);
        if (!ctx.signal.aborted) timer = setTimeout(poll, ms);
    };
    const showChanges = () => {
        if (changesBody.children.length === 0) {
            changesArea.replaceChildren(el('p', {class: 'empty'},
                'No change has been recorded: no cursor was rewound, no receiver answered 410.'));
            changesTable = null;
        } else if (changesTable === null) {
            changesTable = tableOf(CHANGE_COLUMNS, changesBody, 'subscription-changes',
                                   'Changes, newest first');
            changesArea.replaceChildren(changesTable);
        }
        older.replaceChildren(!reachedStart ? button('Older changes', loadOlder)
            : changesBody.children.length === 0 ? ''
                : el('span', {class: 'muted'}, 'The first change is shown.'));
    };
    const trim = () => {
        if (changesBody.children.length <= ROWS_MAX) return;
        while (changesBody.children.length > ROWS_MAX) changesBody.lastElementChild.remove();
        oldest = changesBody.lastElementChild.dataset.id;
        reachedStart = false;
    };

    // The state, for a token that may read it; a 403 leaves the notice and stops asking.
    async function readState() {
        if (!stateReadable) return;
        let body;
        try {
            body = await api('/v1/admin/subscriptions', {signal: ctx.signal});
        } catch (error) {
            if (error.kind !== 'forbidden') throw error;
            stateReadable = false;
            stateArea.replaceChildren(el('p', {class: 'notice', role: 'status',
                                               dataset: {kind: 'needs-admin'}},
                'The subscriptions’ state — cursors, lag, failures — needs an admin token. ' +
                'Sign in with one to see it; the changes below are open to auditors.'));
            return;
        }
        const subscriptions = Array.isArray(body.subscriptions) ? body.subscriptions : [];
        if (subscriptions.length === 0) {
            stateArea.replaceChildren(el('p', {class: 'empty'},
                'This server delivers to no subscription: its config has no "subscriptions".'));
            return;
        }
        stateArea.replaceChildren(tableOf(STATE_COLUMNS, el('tbody', {}, subscriptions.map(subscriptionRow)),
                                          'subscriptions', 'Subscriptions'));
    }

    // New changes since the newest shown, oldest first from the server: each goes on top.
    async function followChanges() {
        for (;;) {
            const page = await api('/v1/subscriptions/changes?limit=' + FOLLOW_PAGE + '&after=' + newest,
                                   {signal: ctx.signal});
            for (const change of page.changes) changesBody.prepend(changeRow(change));
            newest = String(page.next_after);
            if (page.changes.length < FOLLOW_PAGE) break;
        }
        trim();
        showChanges();
    }

    async function poll() {
        try {
            await readState();
            await followChanges();
        } catch (error) {
            if (error.name === 'AbortError') return;
            if (error.kind === 'offline' || error.kind === 'unavailable' || error.kind === 'server') {
                setStatus('lost', 'Lost connection to the server: retrying…');
                retryMs = Math.min(retryMs * 2, RETRY_MS_MAX);
                schedule(retryMs);
            } else {
                setStatus('stopped', 'Stopped.');
                view.append(errorBox(error, 'the subscriptions'));
            }
            return;
        }
        retryMs = POLL_MS;
        setStatus('live', 'Refreshing every ' + POLL_MS / 1000 + ' seconds.');
        schedule(POLL_MS);
    }

    async function loadOlder() {
        older.replaceChildren(loading());
        let page;
        try {
            page = await api('/v1/subscriptions/changes?limit=' + PAGE + '&before=' + oldest,
                             {signal: ctx.signal});
        } catch (error) {
            if (error.name === 'AbortError') return false;
            older.replaceChildren(errorBox(error, 'the subscriptions’ changes', loadOlder));
            return false;
        }
        // A page read backwards still comes oldest first: the newest of it goes on top.
        for (let i = page.changes.length - 1; i >= 0; i--) changesBody.append(changeRow(page.changes[i]));
        if (page.changes.length > 0) oldest = String(page.prev_before);
        if (newest === '0' && page.changes.length > 0) {
            newest = String(page.changes[page.changes.length - 1].id);
        }
        reachedStart = page.changes.length < PAGE;
        showChanges();
        return true;
    }

    stateArea.append(loading());
    changesArea.append(loading());
    try {
        await readState();
    } catch (error) {
        if (error.name === 'AbortError') return;
        stateArea.replaceChildren(errorBox(error, 'the subscriptions', ctx.reload));
        setStatus('stopped', 'Could not read the subscriptions.');
        return;
    }
    if (await loadOlder()) {
        setStatus('live', 'Refreshing every ' + POLL_MS / 1000 + ' seconds.');
        schedule(POLL_MS);
    } else {
        setStatus('stopped', 'Could not read the changes.');
    }
}
