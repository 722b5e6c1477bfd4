// Money exactly (docs/events.md#money-keys-and-time): amounts are integer counts of minor units,
// read as safe integers or BigInt (json.js), formatted digit by digit as text. Never a float: 8880
// fen is "¥88.80" because the last two digits are the fen, not because 8880 / 100 happened to
// round.

// ISO 4217 minor-unit digits where they are not 2.
const MINOR_DIGITS = new Map([
    ['BIF', 0], ['CLP', 0], ['DJF', 0], ['GNF', 0], ['ISK', 0], ['JPY', 0], ['KMF', 0],
    ['KRW', 0], ['PYG', 0], ['RWF', 0], ['UGX', 0], ['VND', 0], ['VUV', 0], ['XAF', 0],
    ['XOF', 0], ['XPF', 0], ['BHD', 3], ['IQD', 3], ['JOD', 3], ['KWD', 3], ['LYD', 3],
    ['OMR', 3], ['TND', 3],
]);
const SYMBOLS = new Map([['CNY', '¥'], ['USD', '$'], ['EUR', '€'], ['GBP', '£'], ['HKD', 'HK$']]);

// The decimal digits of an integer amount (with a leading "-"), or null for anything else: a
// float, an unsafe Number (already rounded), a string that is not an integer.
function integerText(amount) {
    if (typeof amount === 'bigint') return amount.toString();
    if (typeof amount === 'number') return Number.isSafeInteger(amount) ? String(amount) : null;
    if (typeof amount === 'string' && /^-?[0-9]+$/.test(amount)) return amount;
    return null;
}

// formatMoney(8880, 'CNY') is "¥88.80"; formatMoney(-5n, 'CNY') "-¥0.05";
// formatMoney(1000, 'JPY') "JPY 1,000"; null (a close carries no amount) is "—".
export function formatMoney(amount, currency) {
    if (amount === null || amount === undefined) return '—';
    const text = integerText(amount);
    if (text === null) return 'not an amount: ' + String(amount);
    const code = typeof currency === 'string' && /^[A-Z]{3}$/.test(currency) ? currency : '';
    const negative = text.startsWith('-');
    const scale = MINOR_DIGITS.get(code) ?? 2;
    const digits = (negative ? text.slice(1) : text).replace(/^0+(?=[0-9])/, '')
        .padStart(scale + 1, '0');
    const whole = digits.slice(0, digits.length - scale).replace(/\B(?=([0-9]{3})+$)/g, ',');
    const fraction = scale > 0 ? '.' + digits.slice(digits.length - scale) : '';
    const prefix = SYMBOLS.get(code) ?? (code ? code + ' ' : '');
    return (negative && /[1-9]/.test(digits) ? '-' : '') + prefix + whole + fraction;
}
