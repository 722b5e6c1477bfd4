// #/chain : the head of the receipt chain, signed (GET /v1/audit/checkpoint,
// docs/integrity.md#checkpoints), and, for an admin token, a button that runs verify online
// (POST /v1/admin/verify, docs/integrity.md#verify).
import {ApiError, api, session} from './api.js';
import {button, el, fields, heading, table, time} from './dom.js';
import {stringify} from './json.js';
import {errorBox, loading} from './view_common.js';

async function head(section, ctx) {
    section.append(el('h2', {}, 'Chain head'));
    const wait = loading();
    section.append(wait);
    let checkpoint;
    try {
        checkpoint = await api('/v1/audit/checkpoint', {signal: ctx.signal});
    } catch (error) {
        if (error.name === 'AbortError') return;
        wait.remove();
        if (error instanceof ApiError && error.status === 503 && /signing_key/.test(error.message)) {
            section.append(el('div', {class: 'notice', role: 'status', dataset: {kind: 'no-signing-key'}},
                el('p', {}, el('strong', {}, 'Not available: no checkpoint signing key is configured.')),
                el('p', {}, 'The server answers: “' + error.message + '”. Set audit.signing_key ' +
                            '(an Ed25519 private key) in the config to publish signed heads; the ' +
                            'chain itself is kept either way and `payledger audit` checks it.')));
            return;
        }
        section.append(errorBox(error, 'the chain\'s head', ctx.reload));
        return;
    }
    wait.remove();
    section.append(fields([
        ['Receipt', '#' + checkpoint.receipt_id, 'receipt_id'],
        ['Chain', el('code', {}, String(checkpoint.chain)), 'chain'],
        ['Signed at', time(checkpoint.at), 'at'],
        ['Key id', el('code', {}, String(checkpoint.key_id)), 'key_id'],
        ['Signature', el('code', {}, String(checkpoint.signature)), 'signature'],
    ]), el('details', {class: 'checkpoint-json'}, el('summary', {}, 'As JSON, to keep'),
           el('pre', {class: 'raw'}, stringify(checkpoint))),
    el('p', {class: 'muted'}, 'Keep this checkpoint outside the operator\'s reach: saved to a ' +
        'file, `payledger audit --checkpoint FILE --public-key FILE` later proves that nothing ' +
        'before it changed.'));
}

function verifyResult(report) {
    const projections = Array.isArray(report.projections) ? report.projections : [];
    return el('div', {class: 'verify-result', dataset: {ok: String(report.ok === true)}},
        el('p', {}, el('span', {class: 'badge ' + (report.ok ? 'ok' : 'differs')},
                       report.ok ? 'OK' : 'DIFFERS'),
           report.ok ? ' The projections equal the fold of the events.'
                     : ' A projection differs from the fold of the events.'),
        table(['Projection', 'Rows', 'Digest', 'Result'], projections.map((p) => [
            String(p.name), String(p.rows), el('code', {}, String(p.digest)), p.ok ? 'OK' : 'DIFFERS'])),
        projections.filter((p) => Array.isArray(p.differences) && p.differences.length > 0).map((p) =>
            el('section', {}, el('h3', {}, p.name + ': differences'),
               table(['Key', 'What differs'], p.differences.map((d) => [String(d.key), String(d.what)])))));
}

function verify(section) {
    section.append(el('h2', {}, 'Verify'));
    if (session.role() !== 'admin') {
        section.append(el('p', {class: 'muted'}, 'Running verify needs an admin token.'));
        return;
    }
    const out = el('div', {class: 'verify-out', 'aria-live': 'polite'});
    const run = button('Run verify', async () => {
        run.disabled = true;
        out.replaceChildren(loading('Verifying: folding every event…'));
        try {
            out.replaceChildren(verifyResult(await api('/v1/admin/verify', {method: 'POST'})));
        } catch (error) {
            out.replaceChildren(error instanceof ApiError && error.status === 429
                ? el('p', {class: 'notice'}, 'Verify is already running; try again when it has finished.')
                : errorBox(error, 'verify'));
        } finally {
            run.disabled = false;
        }
    }, {id: 'run-verify'});
    section.append(el('p', {}, 'Folds every event in one snapshot and compares the result with the ' +
                               'live projections (read-only).'), el('p', {}, run), out);
}

export async function render(view, ctx) {
    view.append(heading('Chain'));
    const headSection = el('section', {class: 'chain-head'});
    const verifySection = el('section', {class: 'verify'});
    view.append(headSection, verifySection);
    verify(verifySection);
    await head(headSection, ctx);
}
