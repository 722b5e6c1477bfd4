// #/events : the global feed (docs/api.md#feeds-and-paging), newest first. It opens at the
// newest page (before=2^63−1), pages back with prev_before, and follows new events as they commit
// by polling after= the newest seq shown: the feed never skips, so nothing is missed between two
// polls. A lost connection is shown and retried; the page never reloads.
import {api} from './api.js';
import {accountRoute, button, el, heading, isKey, link, time} from './dom.js';
import {formatMoney} from './money.js';
import {orderLink} from './view_receipt.js';
import {errorBox, loading} from './view_common.js';

const NEWEST = '9223372036854775807';
const PAGE = 50;
const FOLLOW_PAGE = 100;
const POLL_MS = 1500;
const RETRY_MS_MAX = 10000;
const ROWS_MAX = 500;  // Older rows leave the page as new ones come; "Older" brings them back.

function row(event) {
    return el('li', {class: 'event', dataset: {seq: String(event.seq)}},
        el('span', {class: 'seq'}, '#' + event.seq),
        el('strong', {class: 'type'}, String(event.event_type)),
        el('span', {class: 'order'}, orderLink(event.out_trade_no)),
        el('span', {class: 'amount'}, formatMoney(event.amount, event.currency)),
        el('span', {class: 'account'}, isKey(event.account_id)
            ? link(accountRoute(event.account_id), event.account_id) : String(event.account_id)),
        el('span', {class: 'source'}, String(event.source)),
        time(event.recorded_at));
}

export async function render(view, ctx) {
    const state = el('span', {class: 'feed-status', role: 'status', dataset: {state: 'opening'}},
                     'Opening…');
    const pause = button('Pause', () => toggle());
    const list = el('ol', {class: 'feed', 'aria-label': 'Events, newest first'});
    const older = el('p', {class: 'pager'});
    view.append(heading('Events'), el('p', {class: 'feed-bar'}, state, pause), list, older);

    let newest = '0';      // The largest seq shown: the next poll reads after it.
    let oldest = NEWEST;   // The smallest seq shown: "Older" reads before it.
    let paused = false;
    let timer = null;
    let retryMs = POLL_MS;
    ctx.signal.addEventListener('abort', () => clearTimeout(timer));

    const setState = (name, text) => {
        state.dataset.state = name;
        state.textContent = text;
    };
    let reachedStart = false;  // The last "Older" page was not full: nothing lies before it.
    const pager = () => {
        older.replaceChildren(!reachedStart ? button('Older events', loadOlder)
            : el('span', {class: 'muted'}, list.children.length === 0
                ? 'The ledger has no event yet.' : 'The first event is shown.'));
    };
    const trim = () => {
        if (list.children.length <= ROWS_MAX) return;
        while (list.children.length > ROWS_MAX) list.lastElementChild.remove();
        oldest = list.lastElementChild.dataset.seq;
        reachedStart = false;
    };
    const toggle = () => {
        paused = !paused;
        pause.textContent = paused ? 'Follow' : 'Pause';
        setState(paused ? 'paused' : 'live', paused ? 'Paused.' : 'Following new events.');
        if (!paused) schedule(0);
    };
    const schedule = (ms) => {
        clearTimeout(timer);
        if (!ctx.signal.aborted && !paused) timer = setTimeout(follow, ms);
    };
    async function follow() {
        let page;
        try {
            page = await api('/v1/events?limit=' + FOLLOW_PAGE + '&after=' + newest,
                             {signal: ctx.signal});
        } catch (error) {
            if (error.name === 'AbortError') return;
            if (error.kind === 'offline' || error.kind === 'unavailable' || error.kind === 'server') {
                setState('lost', 'Lost connection to the server: retrying…');
                retryMs = Math.min(retryMs * 2, RETRY_MS_MAX);
                schedule(retryMs);
            } else {
                setState('stopped', 'Stopped.');
                view.append(errorBox(error, 'the global feed'));
            }
            return;
        }
        retryMs = POLL_MS;
        if (!paused) setState('live', 'Following new events.');
        for (const event of page.events) list.prepend(row(event));
        newest = String(page.next_after);
        trim();
        pager();
        schedule(page.events.length === FOLLOW_PAGE ? 0 : POLL_MS);
    }
    async function loadOlder() {
        older.replaceChildren(loading());
        let page;
        try {
            page = await api('/v1/events?limit=' + PAGE + '&before=' + oldest, {signal: ctx.signal});
        } catch (error) {
            if (error.name === 'AbortError') return false;
            older.replaceChildren(errorBox(error, 'the global feed', loadOlder));
            return false;
        }
        for (let i = page.events.length - 1; i >= 0; i--) list.append(row(page.events[i]));
        if (page.events.length > 0) oldest = String(page.prev_before);
        if (newest === '0' && page.events.length > 0) {
            newest = String(page.events[page.events.length - 1].seq);
        }
        reachedStart = page.events.length < PAGE;
        pager();
        return true;
    }
    if (await loadOlder()) {
        setState('live', 'Following new events.');
        schedule(POLL_MS);
    } else {
        setState('stopped', 'Could not open the feed.');
    }
}
