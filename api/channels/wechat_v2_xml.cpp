#include "api/channels/wechat_v2_xml.hpp"

#include <cstdint>
#include <pugixml.hpp>
#include <utility>

#include "api/channels/platform_crypto.hpp"
#include "projections/assert.hpp"

namespace payledger::api {
namespace {

constexpr std::size_t kFieldsMax = 256;

bool ContainsIgnoringCase(std::string_view text, std::string_view needle) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
    for (std::size_t i = 0; i + needle.size() <= text.size(); ++i) {
        std::size_t k = 0;
        while (k < needle.size() && lower(text[i + k]) == lower(needle[k])) ++k;
        if (k == needle.size()) return true;
    }
    return false;
}

bool IsWhitespace(std::string_view text) {
    return text.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

// The code point of the character reference "&#...;" or "&#x...;" that `text` starts with,
// and its length; 0 length when it is not one. Saturates instead of wrapping (pugixml's
// unsigned arithmetic turns "&#4294967296;" into a NUL).
std::pair<std::uint32_t, std::size_t> CharacterReference(std::string_view text) {
    constexpr std::uint32_t kSaturated = 0x110000;  // Past Unicode: never an XML character.
    const bool hex = text.starts_with("&#x");
    std::size_t i = hex ? 3 : 2;
    std::uint32_t code = 0;
    const std::size_t digits_start = i;
    for (; i < text.size() && text[i] != ';'; ++i) {
        const char c = text[i];
        std::uint32_t digit = 0;
        if (c >= '0' && c <= '9') {
            digit = static_cast<std::uint32_t>(c - '0');
        } else if (hex && c >= 'a' && c <= 'f') {
            digit = static_cast<std::uint32_t>(c - 'a' + 10);
        } else if (hex && c >= 'A' && c <= 'F') {
            digit = static_cast<std::uint32_t>(c - 'A' + 10);
        } else {
            return {0, 0};
        }
        code = code >= kSaturated ? kSaturated : code * (hex ? 16u : 10u) + digit;
    }
    if (i == digits_start || i == text.size()) return {0, 0};
    return {code >= kSaturated ? kSaturated : code, i + 1};
}

// XML 1.0 §2.2 Char: #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF].
bool IsXmlCharacter(std::uint32_t code) {
    return code == 0x9 || code == 0xA || code == 0xD || (code >= 0x20 && code <= 0xD7FF) ||
           (code >= 0xE000 && code <= 0xFFFD) || (code >= 0x10000 && code <= 0x10FFFF);
}

void AppendUtf8(std::string& out, std::uint32_t code) {
    const auto byte = [&out](std::uint32_t value) { out += static_cast<char>(value); };
    if (code < 0x80) {
        byte(code);
    } else if (code < 0x800) {
        byte(0xC0 | (code >> 6));
        byte(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
        byte(0xE0 | (code >> 12));
        byte(0x80 | ((code >> 6) & 0x3F));
        byte(0x80 | (code & 0x3F));
    } else {
        byte(0xF0 | (code >> 18));
        byte(0x80 | ((code >> 12) & 0x3F));
        byte(0x80 | ((code >> 6) & 0x3F));
        byte(0x80 | (code & 0x3F));
    }
}

// The text of a text node (pugixml leaves its references alone) with them decoded.
Checked<std::string> DecodeReferences(std::string_view raw, std::string_view field) {
    static constexpr std::pair<std::string_view, char> kEntities[] = {
        {"&lt;", '<'}, {"&gt;", '>'}, {"&amp;", '&'}, {"&apos;", '\''}, {"&quot;", '"'}};
    std::string out;
    out.reserve(raw.size());
    std::size_t i = 0;
    while (i < raw.size()) {
        const std::size_t amp = raw.find('&', i);
        out.append(raw.substr(i, amp == std::string_view::npos ? raw.npos : amp - i));
        if (amp == std::string_view::npos) break;
        const std::string_view rest = raw.substr(amp);
        std::size_t length = 0;
        for (const auto& [entity, character] : kEntities) {
            if (rest.starts_with(entity)) {
                out += character;
                length = entity.size();
                break;
            }
        }
        if (length == 0 && rest.starts_with("&#")) {
            const auto [code, reference_length] = CharacterReference(rest);
            if (reference_length == 0) {
                return Malformed("field " + std::string(field) +
                                 " holds an invalid character reference");
            }
            if (!IsXmlCharacter(code)) {
                return Malformed("field " + std::string(field) +
                                 " holds a character reference to a control or non-XML "
                                 "character");
            }
            AppendUtf8(out, code);
            length = reference_length;
        }
        if (length == 0) {
            return Malformed("field " + std::string(field) + " holds an undefined entity");
        }
        i = amp + length;
    }
    return out;
}

// The text of one field element, its references decoded; refused when it holds an element.
Checked<std::string> FieldText(const pugi::xml_node& element) {
    std::string value;
    for (const pugi::xml_node& child : element.children()) {
        if (child.type() == pugi::node_cdata) {
            value += child.value();  // CDATA is verbatim: no references inside.
        } else if (child.type() == pugi::node_pcdata) {
            Checked<std::string> text = DecodeReferences(child.value(), element.name());
            if (!text) return text.refusal();
            value += *text;
        } else if (child.type() == pugi::node_element) {
            return Malformed(std::string("field ") + element.name() + " holds elements");
        }
    }
    return value;
}

bool IsDigits(std::string_view text) {
    return !text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos;
}

void AppendCdata(std::string& out, std::string_view value) {
    // "]]>" cannot stand inside CDATA: close the section between "]]" and ">".
    out += "<![CDATA[";
    std::size_t start = 0;
    for (std::size_t end = value.find("]]>"); end != std::string_view::npos;
         end = value.find("]]>", start)) {
        out.append(value.substr(start, end + 2 - start));
        out += "]]><![CDATA[";
        start = end + 2;
    }
    out.append(value.substr(start));
    out += "]]>";
}

}  // namespace

Checked<PlatformFields> ParseFlatXml(std::string_view text, std::string_view root_name) {
    if (ContainsIgnoringCase(text, "<!DOCTYPE") || ContainsIgnoringCase(text, "<!ENTITY")) {
        return Malformed("XML with a DTD or entity declarations is refused");
    }
    // pugixml stops at a NUL byte and would accept whatever came before it.
    if (text.find('\0') != std::string_view::npos) return Malformed("the XML holds a NUL byte");
    pugi::xml_document document;
    // No parse_doctype: no DTD is read, and no entity is ever expanded. No parse_escapes:
    // references are decoded by FieldText, which refuses the ones pugixml would turn into a
    // NUL that ends the value. The values are the text WeChat signed, byte for byte: no
    // parse_eol (it would turn "\r\n" into "\n"), and parse_ws_pcdata keeps a value of
    // spaces. parse_fragment keeps text outside the root element, which pugixml would
    // otherwise drop silently, so that it can be refused.
    constexpr unsigned kOptions = pugi::parse_cdata | pugi::parse_ws_pcdata | pugi::parse_fragment;
    const pugi::xml_parse_result parsed =
        document.load_buffer(text.data(), text.size(), kOptions, pugi::encoding_utf8);
    if (!parsed) {
        return Malformed(std::string("the body is not well-formed XML: ") + parsed.description());
    }
    pugi::xml_node root;
    for (const pugi::xml_node& node : document.children()) {
        if (node.type() == pugi::node_pcdata || node.type() == pugi::node_cdata) {
            if (!IsWhitespace(node.value())) return Malformed("text outside the XML root element");
            continue;
        }
        if (node.type() != pugi::node_element) continue;
        if (root) return Malformed("the XML has more than one root element");
        root = node;
    }
    if (!root || root_name != root.name()) {
        return Malformed("the XML root element must be <" + std::string(root_name) + ">");
    }
    PlatformFields fields;
    for (const pugi::xml_node& node : root.children()) {
        if (node.type() == pugi::node_pcdata || node.type() == pugi::node_cdata) {
            if (!IsWhitespace(node.value())) return Malformed("text outside the XML fields");
            continue;
        }
        if (node.type() != pugi::node_element) continue;
        Checked<std::string> value = FieldText(node);
        if (!value) return value.refusal();
        if (fields.size() == kFieldsMax) return Malformed("too many XML fields");
        if (!fields.emplace(node.name(), std::move(*value)).second) {
            return Malformed(std::string("field ") + node.name() + " appears twice");
        }
    }
    return fields;
}

std::string WechatV2Sign(const PlatformFields& fields, std::string_view api_key,
                         WechatV2SignType sign_type) {
    std::string text;
    for (const auto& [name, value] : fields) {  // std::map: byte order of the names.
        if (name == "sign" || value.empty()) continue;
        if (!text.empty()) text += '&';
        text += name + "=" + value;
    }
    text += text.empty() ? "key=" : "&key=";
    text.append(api_key);
    switch (sign_type) {
        case WechatV2SignType::kMd5:
            return Md5HexUpper(text);
        case WechatV2SignType::kHmacSha256:
            return HmacSha256HexUpper(api_key, text);
    }
    PAYLEDGER_ASSERT(false);
    return {};
}

std::string_view ToString(WechatV2SignType sign_type) {
    switch (sign_type) {
        case WechatV2SignType::kMd5:
            return "MD5";
        case WechatV2SignType::kHmacSha256:
            return "HMAC-SHA256";
    }
    PAYLEDGER_ASSERT(false);
    return {};
}

std::string WechatV2Xml(const PlatformFields& fields, std::string_view root_name) {
    std::string out = "<" + std::string(root_name) + ">";
    for (const auto& [name, value] : fields) {
        out += "<" + name + ">";
        if (IsDigits(value)) {
            out += value;
        } else {
            AppendCdata(out, value);
        }
        out += "</" + name + ">";
    }
    out += "</" + std::string(root_name) + ">";
    return out;
}

std::string WechatV2Answer(bool success, std::string_view reason) {
    std::string out = "<xml><return_code>";
    AppendCdata(out, success ? "SUCCESS" : "FAIL");
    out += "</return_code><return_msg>";
    AppendCdata(out, success ? "OK" : reason);
    out += "</return_msg></xml>";
    return out;
}

}  // namespace payledger::api
