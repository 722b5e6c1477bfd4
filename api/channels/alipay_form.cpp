#include "api/channels/alipay_form.hpp"

#include "ledger/base/bytes.hpp"

namespace payledger::api {
namespace {

constexpr std::size_t kFieldsMax = 256;

int HexValue(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::optional<std::string> PercentDecode(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '+') {
            out += ' ';
        } else if (text[i] != '%') {
            out += text[i];
        } else {
            if (i + 2 >= text.size()) return std::nullopt;
            const int high = HexValue(text[i + 1]);
            const int low = HexValue(text[i + 2]);
            if (high < 0 || low < 0) return std::nullopt;
            out += static_cast<char>(high * 16 + low);
            i += 2;
        }
    }
    return out;
}

bool IsUnreserved(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '*';
}

void AppendEncoded(std::string& out, std::string_view text) {
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (IsUnreserved(c)) {
            out += c;
        } else if (c == ' ') {
            out += '+';
        } else {
            out += '%';
            out += ledger::HexUpper(text.substr(i, 1));
        }
    }
}

}  // namespace

Checked<PlatformFields> DecodeForm(std::string_view body) {
    PlatformFields fields;
    std::size_t start = 0;
    while (start <= body.size()) {
        const std::size_t amp = body.find('&', start);
        const std::string_view pair =
            body.substr(start, amp == std::string_view::npos ? body.npos : amp - start);
        start = amp == std::string_view::npos ? body.size() + 1 : amp + 1;
        if (pair.empty()) continue;  // "a=1&&b=2", a trailing "&".
        const std::size_t equals = pair.find('=');
        const std::optional<std::string> name = PercentDecode(pair.substr(0, equals));
        const std::optional<std::string> value = PercentDecode(
            equals == std::string_view::npos ? std::string_view{} : pair.substr(equals + 1));
        if (!name || !value) return Malformed("the form has an invalid percent-encoding");
        // No platform sends a NUL; it could only be an attack on whatever stores the text.
        if (name->find('\0') != std::string::npos || value->find('\0') != std::string::npos) {
            return Malformed("the form contains a NUL byte");
        }
        if (name->empty()) return Malformed("the form has a field without a name");
        if (fields.size() == kFieldsMax) return Malformed("the form has too many fields");
        if (!fields.emplace(*name, *value).second) {
            return Malformed("the form repeats the field " + *name);
        }
    }
    return fields;
}

std::string EncodeForm(const PlatformFields& fields) {
    std::string out;
    for (const auto& [name, value] : fields) {
        if (!out.empty()) out += '&';
        AppendEncoded(out, name);
        out += '=';
        AppendEncoded(out, value);
    }
    return out;
}

std::string AlipaySignContent(const PlatformFields& fields) {
    std::string content;
    for (const auto& [name, value] : fields) {  // std::map: byte order of the names.
        if (name == "sign" || name == "sign_type" || value.empty()) continue;
        if (!content.empty()) content += '&';
        content += name + "=" + value;
    }
    return content;
}

}  // namespace payledger::api
