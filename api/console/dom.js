// Building the page from data, as text only. Everything the server returns is hostile input
// (docs/api.md#the-auditor-console): a raw body may hold <script> or <img onerror>. Values
// become Text nodes or attribute values through the DOM, never markup: nothing in the console
// parses HTML, and the page's Content-Security-Policy (Trusted Types without a policy) makes every
// HTML sink throw.

// el('p', {class: 'note', text: 'hello'}, child, 'more text'): an element with properties
// and children. `text` sets textContent; a function under an `on…` key is an event listener;
// `dataset` sets data-* attributes; other keys are attributes (false, null, undefined: left
// out; true: present and empty). Children are Nodes or values shown as text.
export function el(tag, props = {}, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props)) {
        if (value === undefined || value === null || value === false) continue;
        if (key === 'text') {
            node.textContent = String(value);
        } else if (key === 'class') {
            node.className = value;
        } else if (key === 'dataset') {
            for (const [name, data] of Object.entries(value)) node.dataset[name] = String(data);
        } else if (key.startsWith('on') && typeof value === 'function') {
            node.addEventListener(key.slice(2), value);
        } else if (key === 'href') {
            throw new Error('links are made with link(), which takes only console routes');
        } else {
            node.setAttribute(key, value === true ? '' : String(value));
        }
    }
    return append(node, ...children);
}

// Appends Nodes, or any other value as a Text node; skips null, undefined and false.
export function append(node, ...children) {
    for (const child of children.flat(Infinity)) {
        if (child === null || child === undefined || child === false) continue;
        node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
}

// A link to a console route ("#/orders/ORD-1"): the only way an href is set, so a hostile
// value can never become a javascript: or another origin's URL.
export function link(route, text, props = {}) {
    if (typeof route !== 'string' || !route.startsWith('#/')) {
        throw new Error('not a console route: ' + route);
    }
    const a = el('a', props, text);
    a.setAttribute('href', route);
    return a;
}

// The route of an order or an account: the key percent-encoded.
export function orderRoute(outTradeNo) {
    return '#/orders/' + encodeURIComponent(outTradeNo);
}
export function accountRoute(accountId) {
    return '#/accounts/' + encodeURIComponent(accountId);
}

// An out_trade_no or account_id is 1–64 characters of A-Z a-z 0-9 _ - | * .
export function isKey(text) {
    return typeof text === 'string' && /^[A-Za-z0-9_\-|*.]{1,64}$/.test(text);
}

// A <dl> from [label, value, field] rows; a value may be a Node. `field` names the row for
// tests and styles (data-field).
export function fields(rows, className = 'fields') {
    const dl = el('dl', {class: className});
    for (const [label, value, field] of rows) {
        dl.append(el('dt', {}, label), el('dd', {dataset: field ? {field} : {}}, value ?? '—'));
    }
    return dl;
}

// A <time> for an RFC 3339 UTC time: shown as written (exact, time zone included).
export function time(text) {
    if (typeof text !== 'string') return el('span', {class: 'muted'}, '—');
    return el('time', {datetime: text}, text.replace('T', ' '));
}

// A table that scrolls sideways on narrow screens: `head` the column titles, `rows` arrays of
// cell values (Nodes or text).
export function table(head, rows, className = '') {
    const thead = el('thead', {}, el('tr', {}, head.map((h) => el('th', {scope: 'col'}, h))));
    const tbody = el('tbody', {}, rows.map((row) => el('tr', {}, row.map((c) => el('td', {}, c)))));
    return el('div', {class: 'scroll'}, el('table', {class: className}, thead, tbody));
}

// The view's heading, focusable so that a route change moves the keyboard focus to it.
export function heading(text) {
    return el('h1', {tabindex: '-1'}, text);
}

export function button(text, onclick, props = {}) {
    return el('button', {type: 'button', onclick, ...props}, text);
}
