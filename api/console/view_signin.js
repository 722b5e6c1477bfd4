// Sign-in (docs/api.md#the-auditor-console): one input named `token`. The token is checked
// against the server, kept in this tab's sessionStorage only and sent as the bearer header; it
// never goes into a URL (the form is built here with its submit handled, so it is never submitted
// as a query).
import {ApiError, api, describe, session} from './api.js';
import {el, heading} from './dom.js';

// Checks `token` and finds its role: an auditor read that every reader may do (an empty page),
// then GET /v1/admin/verify, which answers 405 to an admin token and 403 to any other.
async function check(token) {
    await api('/v1/events?before=0&limit=1', {token});
    try {
        await api('/v1/admin/verify', {token});
    } catch (error) {
        if (error instanceof ApiError && error.status === 405) return 'admin';
        if (error instanceof ApiError && error.status === 403) return 'auditor';
        throw error;
    }
    return 'auditor';
}

export async function render(view, {onSignedIn}) {
    const input = el('input', {name: 'token', id: 'token', type: 'password', required: true,
                               autocomplete: 'off', spellcheck: 'false'});
    const submit = el('button', {type: 'submit'}, 'Sign in');
    const message = el('div', {class: 'signin-message', role: 'alert'});
    const form = el('form', {class: 'signin', method: 'post', novalidate: true},
        el('label', {for: 'token'}, 'Auditor or admin token'), input, submit, message);
    form.addEventListener('submit', async (event) => {
        event.preventDefault();
        const token = input.value.trim();
        message.replaceChildren();
        if (token === '') {
            message.append(el('p', {class: 'error-text'}, 'Paste a token first.'));
            input.focus();
            return;
        }
        submit.disabled = true;
        try {
            const role = await check(token);
            session.save(token, role);
            input.value = '';
            onSignedIn();
        } catch (error) {
            const {title, detail} = describe(error, 'the ledger');
            const hint = error instanceof ApiError && error.kind === 'forbidden'
                ? 'This looks like a merchant token: merchants register orders, auditors read.'
                : null;
            message.append(el('div', {class: 'error', dataset: {kind: error?.kind ?? 'console'}},
                              el('h2', {}, title), el('p', {}, detail), hint && el('p', {}, hint)));
            input.focus();
        } finally {
            submit.disabled = false;
        }
    });
    view.append(heading('Sign in'),
        el('p', {}, 'The console reads the ledger with an auditor token (an admin token can also ' +
                    'run verify). The token stays in this browser tab and is forgotten when the tab closes.'),
        form);
    input.focus();
}
