// A delivery's raw body (docs/api.md#the-auditor-console): pretty-printed as what it is — WeChat
// Pay v2's XML, the JSON of the generic channel, WeChat Pay v3 and the API, Alipay's form fields —
// with the raw bytes one click away. Everything is text: the XML is re-indented by a tokenizer,
// never parsed into a document, so nothing in a body can become markup or run.
import {el} from './dom.js';
import {prettyJson} from './json.js';

const XML_PART = /<!\[CDATA\[[\s\S]*?\]\]>|<!--[\s\S]*?-->|<\?[\s\S]*?\?>|<![^>]*>|<\/[^>]*>|<[^>]*>|[^<]+/g;
const FORM = /^[^=&\s]+=[^&\s]*(?:&[^=&\s]+=[^&\s]*)*$/;

function isOpenTag(part) {
    return /^<[^!?/]/.test(part) && !part.endsWith('/>');
}
function tagName(part) {
    return /^<\/?([^\s/>]+)/.exec(part)?.[1] ?? '';
}

// `text` as indented XML, an element whose content is text alone kept on one line; null when
// it is not balanced XML (then the raw text is shown).
export function prettyXml(text) {
    const parts = text.match(XML_PART) ?? [];
    if (parts.join('') !== text || !text.trimStart().startsWith('<')) return null;
    const lines = [];
    const open = [];
    for (let i = 0; i < parts.length; i++) {
        const part = parts[i];
        const indent = '  '.repeat(open.length);
        if (!part.startsWith('<')) {
            if (part.trim() !== '') lines.push(indent + part.trim());
        } else if (part.startsWith('</')) {
            if (open.pop() !== tagName(part)) return null;
            lines.push('  '.repeat(open.length) + part);
        } else if (isOpenTag(part)) {
            const content = parts[i + 1];
            const close = parts[i + 2];
            if (content !== undefined && close === '</' + tagName(part) + '>' &&
                (!content.startsWith('<') || content.startsWith('<![CDATA['))) {
                lines.push(indent + part + content + close);  // <a>text</a> on one line.
                i += 2;
            } else if (content === '</' + tagName(part) + '>') {
                lines.push(indent + part + content);
                i += 1;
            } else {
                lines.push(indent + part);
                open.push(tagName(part));
            }
        } else {
            lines.push(indent + part);  // <a/>, <?xml ?>, <!-- -->, CDATA, <!DOCTYPE>.
        }
    }
    return open.length === 0 ? lines.join('\n') : null;
}

// Form fields (application/x-www-form-urlencoded) as [name, value] pairs; null when `text`
// is not a form. A field whose escapes are broken keeps its raw text.
export function formFields(text) {
    if (!FORM.test(text)) return null;
    return text.split('&').map((pair) => {
        const equals = pair.indexOf('=');
        const decode = (s) => {
            try {
                return decodeURIComponent(s.replace(/\+/g, ' '));
            } catch {
                return s;
            }
        };
        return [decode(pair.slice(0, equals)), decode(pair.slice(equals + 1))];
    });
}

// {format, node}: the body's best reading. format: 'json', 'xml', 'form' or 'text'.
function pretty(text) {
    try {
        return {format: 'json', node: el('pre', {class: 'pretty', dataset: {format: 'json'}},
                                         prettyJson(text))};
    } catch {
        // Not JSON: try the next reading.
    }
    const xml = prettyXml(text);
    if (xml !== null) {
        return {format: 'xml', node: el('pre', {class: 'pretty', dataset: {format: 'xml'}}, xml)};
    }
    const form = formFields(text.trim());
    if (form !== null) {
        const rows = form.map(([name, value]) =>
            el('tr', {}, el('th', {scope: 'row'}, name), el('td', {}, value)));
        return {format: 'form', node: el('div', {class: 'scroll'},
            el('table', {class: 'form-fields', dataset: {format: 'form'}},
               el('thead', {}, el('tr', {}, el('th', {scope: 'col'}, 'field'),
                                  el('th', {scope: 'col'}, 'value'))),
               el('tbody', {}, rows)))};
    }
    return {format: 'text', node: el('pre', {class: 'pretty', dataset: {format: 'text'}}, text)};
}

const LABELS = {json: 'JSON', xml: 'XML', form: 'form fields', text: 'text'};

function base64Bytes(text) {
    const binary = atob(text);
    return Uint8Array.from(binary, (c) => c.charCodeAt(0));
}

// Offset, 16 bytes in hex, and their printable ASCII: the classic dump.
export function hexDump(bytes) {
    const lines = [];
    for (let offset = 0; offset < bytes.length; offset += 16) {
        const row = Array.from(bytes.slice(offset, offset + 16));
        const hex = row.map((b) => b.toString(16).padStart(2, '0')).join(' ');
        const ascii = row.map((b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : '.')).join('');
        lines.push(offset.toString(16).padStart(8, '0') + '  ' + hex.padEnd(48) + ' |' + ascii + '|');
    }
    return lines.join('\n');
}

// The body of `receipt` (docs/api.md#objects): its pretty reading, then the raw bytes in a
// <details> (one click, or Enter, away).
export function bodyView(receipt) {
    if (receipt.body_stored === false) return el('section', {class: 'body'}, el('p', {class: 'muted'},
        'Body not stored: a duplicate beyond the 100th of its event. Its SHA-256 is above.'));
    const section = el('section', {class: 'body'});
    if (typeof receipt.body_base64 === 'string') {
        let bytes;
        try {
            bytes = base64Bytes(receipt.body_base64);
        } catch {
            return section.appendChild(el('p', {class: 'error-text'}, 'The body could not be decoded.'));
        }
        section.append(el('p', {class: 'muted'},
            'The body is not UTF-8 text (' + bytes.length + ' bytes): shown byte for byte.'),
            el('pre', {class: 'raw hex'}, hexDump(bytes)));
        return section;
    }
    const text = typeof receipt.body === 'string' ? receipt.body : '';
    const bytes = new TextEncoder().encode(text);
    if (text === '') {
        section.append(el('p', {class: 'muted'}, 'The body is empty.'));
        return section;
    }
    const {format, node} = pretty(text);
    section.dataset.format = format;
    section.append(el('p', {class: 'body-label'}, 'Body, as ' + LABELS[format] + ':'), node);
    section.append(el('details', {class: 'raw'},
        el('summary', {}, 'Raw body: ' + bytes.length + ' bytes, exactly as received'),
        el('pre', {class: 'raw'}, text),
        el('details', {class: 'raw-hex'}, el('summary', {}, 'As hex'),
           el('pre', {class: 'raw hex'}, hexDump(bytes)))));
    return section;
}
