// The auditor API (docs/api.md#the-http-api), as the console uses it: the bearer token from the
// tab's sessionStorage (never in a URL, never in a cookie), answers read as exact JSON (json.js),
// and every failure as an ApiError whose kind the views explain to a person.
import {parseJson} from './json.js';

const TOKEN_KEY = 'payledger.console.token';
const ROLE_KEY = 'payledger.console.role';

// The signed-in session of this tab: the token and the role the sign-in found.
export const session = {
    token: () => sessionStorage.getItem(TOKEN_KEY),
    role: () => sessionStorage.getItem(ROLE_KEY),
    save(token, role) {
        sessionStorage.setItem(TOKEN_KEY, token);
        sessionStorage.setItem(ROLE_KEY, role);
    },
    clear() {
        sessionStorage.removeItem(TOKEN_KEY);
        sessionStorage.removeItem(ROLE_KEY);
    },
};

// kind: 'unauthorized' 401, 'forbidden' 403, 'not_found' 404, 'refused' other 4xx,
// 'unavailable' 503, 'server' other 5xx, 'offline' no answer at all (status 0).
export class ApiError extends Error {
    constructor(kind, status, message, outcome = null) {
        super(message);
        this.kind = kind;
        this.status = status;
        this.outcome = outcome;
    }
}

function kindOf(status) {
    if (status === 401) return 'unauthorized';
    if (status === 403) return 'forbidden';
    if (status === 404) return 'not_found';
    if (status === 503) return 'unavailable';
    return status < 500 ? 'refused' : 'server';
}

// Calls `path` (same origin) and returns its JSON body. Throws ApiError, or the AbortError
// of `signal` when the view that asked has been left.
export async function api(path, {method = 'GET', signal, token = session.token()} = {}) {
    let response;
    let text;
    try {
        response = await fetch(path, {
            method,
            headers: {Authorization: 'Bearer ' + (token ?? ''), Accept: 'application/json'},
            cache: 'no-store',
            credentials: 'omit',
            redirect: 'error',
            referrerPolicy: 'no-referrer',
            signal,
        });
        text = await response.text();
    } catch (error) {
        if (error.name === 'AbortError') throw error;
        throw new ApiError('offline', 0, 'no answer from the server');
    }
    let body = null;
    try {
        body = text === '' ? null : parseJson(text);
    } catch {
        body = null;
    }
    if (!response.ok) {
        const message = typeof body?.message === 'string' ? body.message : response.statusText;
        const outcome = typeof body?.outcome === 'string' ? body.outcome : null;
        throw new ApiError(kindOf(response.status), response.status, message, outcome);
    }
    if (body === null) throw new ApiError('server', response.status, 'the answer is not JSON');
    return body;
}

// What a person should read about `error`: {title, detail}. `what` names what was asked for.
export function describe(error, what = 'this') {
    if (!(error instanceof ApiError)) {
        return {title: 'The console failed', detail: String(error?.message ?? error)};
    }
    const server = error.message ? ' The server says: “' + error.message + '”.' : '';
    switch (error.kind) {
        case 'unauthorized':
            return {title: 'Not signed in (401)',
                    detail: 'The server did not accept this token. Sign in again with an ' +
                            'auditor or admin token.' + server};
        case 'forbidden':
            return {title: 'Not allowed (403)',
                    detail: 'This token may not read ' + what + '. The console needs an auditor ' +
                            'or admin token; running verify needs an admin token.' + server};
        case 'not_found':
            return {title: 'Not found (404)', detail: 'There is no ' + what + '.' + server};
        case 'offline':
            return {title: 'Lost connection',
                    detail: 'The server did not answer: it may be down or the network lost. ' +
                            'Nothing was changed; try again when it is back.'};
        case 'unavailable':
            return {title: 'Unavailable (503)',
                    detail: 'The server could not answer now; retry later.' + server};
        case 'refused':
            return {title: 'Refused (' + error.status + ')', detail: 'The server refused the request.' + server};
        default:
            return {title: 'Server error (' + error.status + ')', detail: 'The server failed.' + server};
    }
}
