// #/reconciliations and #/reconciliations/<id> : the runs of `payledger reconcile` against the
// platforms' daily statements (docs/reconciliation.md#the-record), newest first, and one run's
// differences.
import {api} from './api.js';
import {button, el, fields, heading, link, table, time} from './dom.js';
import {orderLink} from './view_receipt.js';
import {errorBox, loading} from './view_common.js';

const FETCH_PAGE = 1000;
const FETCH_PAGES_MAX = 100;  // 100 000 runs: a platform's daily run for 270 years.
const SHOW = 50;

// The categories, in the order of docs/reconciliation.md#output-and-exit-codes.
const CATEGORIES = ['matched', 'missing_in_ledger', 'missing_in_bill', 'amount_mismatch',
                    'transaction_mismatch', 'unknown_order', 'pending', 'applied'];

function okBadge(ok) {
    return el('span', {class: 'badge ' + (ok ? 'ok' : 'differs')}, ok ? 'OK' : 'DIFFERS');
}

function countsText(counts) {
    return CATEGORIES.filter((c) => c !== 'matched' && Number(counts?.[c] ?? 0) !== 0)
        .map((c) => c + ' ' + counts[c]).join(', ') || 'nothing differs';
}

// The list of runs is read forwards only (after=): read it all, show the newest first.
async function allRuns(signal) {
    const runs = [];
    let after = '0';
    for (let page = 0; page < FETCH_PAGES_MAX; page++) {
        const body = await api('/v1/reconciliations?limit=' + FETCH_PAGE + '&after=' + after, {signal});
        runs.push(...body.reconciliations);
        after = String(body.next_after);
        if (body.reconciliations.length < FETCH_PAGE) return {runs, complete: true};
    }
    return {runs, complete: false};
}

export async function renderList(view, ctx) {
    view.append(heading('Reconciliations'));
    const wait = loading();
    view.append(wait);
    let result;
    try {
        result = await allRuns(ctx.signal);
    } catch (error) {
        if (error.name === 'AbortError') return;
        wait.remove();
        view.append(errorBox(error, 'reconciliation', ctx.reload));
        return;
    }
    wait.remove();
    const runs = result.runs.reverse();
    if (runs.length === 0) {
        view.append(el('p', {class: 'empty'}, 'No reconciliation has been recorded yet. ' +
            'Runs of `payledger reconcile <wechat|alipay> --bill FILE --date YYYY-MM-DD` appear here.'));
        return;
    }
    const body = el('tbody');
    const pager = el('p', {class: 'pager'});
    view.append(el('div', {class: 'scroll'}, el('table', {class: 'runs'},
        el('thead', {}, el('tr', {}, ['Run', 'Platform', 'Date', 'Result', 'Rows', 'Differences', 'Ran at']
            .map((h) => el('th', {scope: 'col'}, h)))), body)), pager);
    if (!result.complete) {
        view.append(el('p', {class: 'muted'}, 'Only the first ' + runs.length + ' runs were read.'));
    }
    let shown = 0;
    const more = () => {
        for (const run of runs.slice(shown, shown + SHOW)) {
            body.append(el('tr', {dataset: {id: String(run.id)}},
                el('td', {}, link('#/reconciliations/' + encodeURIComponent(String(run.id)), '#' + run.id)),
                el('td', {}, String(run.platform)), el('td', {}, String(run.date)),
                el('td', {}, okBadge(run.ok === true)), el('td', {}, String(run.counts?.rows ?? '')),
                el('td', {}, countsText(run.counts)), el('td', {}, time(run.ran_at))));
        }
        shown = Math.min(runs.length, shown + SHOW);
        pager.replaceChildren(shown < runs.length ? button('Older runs', more) : '');
    };
    more();
}

export async function renderOne(view, ctx, id) {
    view.append(heading('Reconciliation #' + id), el('p', {}, link('#/reconciliations', 'All runs')));
    const wait = loading();
    view.append(wait);
    let run;
    try {
        run = await api('/v1/reconciliations/' + encodeURIComponent(id), {signal: ctx.signal});
    } catch (error) {
        if (error.name === 'AbortError') return;
        wait.remove();
        view.append(errorBox(error, 'reconciliation #' + id, ctx.reload));
        return;
    }
    wait.remove();
    view.append(
        fields([
            ['Result', okBadge(run.ok === true), 'ok'],
            ['Platform', String(run.platform)], ['Date', String(run.date)], ['Ran at', time(run.ran_at)],
            ['Bill SHA-256', el('code', {}, String(run.bill_sha256))],
        ]),
        el('h2', {}, 'Counts'),
        table(['Category', 'Count'], ['rows', ...CATEGORIES].map((c) => [c, String(run.counts?.[c] ?? 0)]),
              'counts'),
        el('h2', {}, 'Differences'));
    const differences = Array.isArray(run.differences) ? run.differences : [];
    if (differences.length === 0) {
        view.append(el('p', {class: 'empty'}, 'No difference: every entry matched.'));
        return;
    }
    view.append(table(['Category', 'Event', 'Order', 'Bill', 'Ledger', 'Reason'],
        differences.map((d) => [String(d.category), String(d.event_type), orderLink(d.out_trade_no),
                                d.bill === null ? '-' : String(d.bill),
                                d.ledger === null ? '-' : String(d.ledger),
                                d.reason ? String(d.reason) : '']), 'differences'));
}
