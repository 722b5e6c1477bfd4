// JSON with exact integers. JSON.parse reads every number as a double, so 9007199254740993
// would come back as 9007199254740992: a balance above 2^53 fen would be shown wrong. Here an
// integer is a Number only while it is safe, else a BigInt, and a body is pretty-printed from
// its own tokens, so every number and escape is shown exactly as sent.

const TOKEN = new RegExp(
    '[ \\t\\n\\r]*(?:([{}\\[\\]:,])' +                          // 1: punctuation
    '|("(?:[^"\\\\\\u0000-\\u001f]|\\\\(?:["\\\\/bfnrt]|u[0-9a-fA-F]{4}))*")' +  // 2: string
    '|(-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)' +  // 3: number
    '|(true|false|null))',                                        // 4: literal
    'y');
const SPACE = /^[ \t\n\r]*$/;
const DEPTH_MAX = 256;  // Deeper is refused (a hostile body must not exhaust the stack).

// The tokens of `text` as {kind, text}; throws SyntaxError at anything that is not a token.
export function tokenize(text) {
    const tokens = [];
    let position = 0;
    while (position < text.length) {
        TOKEN.lastIndex = position;
        const match = TOKEN.exec(text);
        if (match === null) {
            if (SPACE.test(text.slice(position))) break;
            throw new SyntaxError('not JSON at offset ' + position);
        }
        const kind = match[1] ? 'punct' : match[2] ? 'string' : match[3] ? 'number' : 'literal';
        tokens.push({kind, text: match[1] ?? match[2] ?? match[3] ?? match[4]});
        position = TOKEN.lastIndex;
    }
    return tokens;
}

function number(text) {
    if (/^-?[0-9]+$/.test(text)) {
        const value = Number(text);
        return Number.isSafeInteger(value) ? value : BigInt(text);
    }
    return Number(text);
}

// Parses `text` strictly (RFC 8259): integers beyond ±(2^53 − 1) become BigInt. Keys such as
// "__proto__" are own properties, as with JSON.parse. Throws SyntaxError.
export function parseJson(text) {
    const tokens = tokenize(text);
    let index = 0;
    const next = () => {
        if (index >= tokens.length) throw new SyntaxError('unexpected end of JSON');
        return tokens[index++];
    };
    const expect = (punct) => {
        const token = next();
        if (token.kind !== 'punct' || token.text !== punct) {
            throw new SyntaxError('expected ' + punct);
        }
    };
    const value = (depth) => {
        if (depth > DEPTH_MAX) throw new SyntaxError('JSON nested too deeply');
        const token = next();
        if (token.kind === 'string') return JSON.parse(token.text);
        if (token.kind === 'number') return number(token.text);
        if (token.kind === 'literal') return JSON.parse(token.text);
        if (token.text === '[') {
            const array = [];
            if (tokens[index]?.text === ']') {
                index++;
                return array;
            }
            for (;;) {
                array.push(value(depth + 1));
                const separator = next();
                if (separator.text === ']') return array;
                if (separator.text !== ',') throw new SyntaxError('expected , or ]');
            }
        }
        if (token.text === '{') {
            const object = {};
            if (tokens[index]?.text === '}') {
                index++;
                return object;
            }
            for (;;) {
                const key = next();
                if (key.kind !== 'string') throw new SyntaxError('expected a key');
                expect(':');
                Object.defineProperty(object, JSON.parse(key.text), {
                    value: value(depth + 1), enumerable: true, writable: true, configurable: true,
                });
                const separator = next();
                if (separator.text === '}') return object;
                if (separator.text !== ',') throw new SyntaxError('expected , or }');
            }
        }
        throw new SyntaxError('unexpected ' + token.text);
    };
    const result = value(0);
    if (index !== tokens.length) throw new SyntaxError('text after the JSON value');
    return result;
}

// `text` (valid JSON, else SyntaxError) indented by two spaces, its tokens unchanged.
export function prettyJson(text) {
    parseJson(text);  // Validates: only a well-formed body is re-indented.
    const tokens = tokenize(text);
    let out = '';
    let depth = 0;
    const newline = () => '\n' + '  '.repeat(depth);
    for (let i = 0; i < tokens.length; i++) {
        const token = tokens[i].text;
        if (token === '{' || token === '[') {
            const close = token === '{' ? '}' : ']';
            if (tokens[i + 1]?.text === close) {
                out += token + close;
                i++;
            } else {
                depth++;
                out += token + newline();
            }
        } else if (token === '}' || token === ']') {
            depth--;
            out += newline() + token;
        } else if (token === ',') {
            out += ',' + newline();
        } else if (token === ':') {
            out += ': ';
        } else {
            out += token;
        }
    }
    return out;
}

// A parsed value (BigInt included) as indented JSON text.
export function stringify(value, depth = 0) {
    const pad = '  '.repeat(depth + 1);
    const end = '  '.repeat(depth);
    if (typeof value === 'bigint') return value.toString();
    if (Array.isArray(value)) {
        if (value.length === 0) return '[]';
        return '[\n' + value.map((v) => pad + stringify(v, depth + 1)).join(',\n') + '\n' + end + ']';
    }
    if (value !== null && typeof value === 'object') {
        const keys = Object.keys(value);
        if (keys.length === 0) return '{}';
        return '{\n' + keys.map((k) => pad + JSON.stringify(k) + ': ' + stringify(value[k], depth + 1))
            .join(',\n') + '\n' + end + '}';
    }
    return JSON.stringify(value) ?? 'null';
}
