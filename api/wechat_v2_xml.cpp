#include "api/wechat_v2_xml.hpp"

#include <pugixml.hpp>

#include "api/platform_crypto.hpp"
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

// The text of one field element; nullopt when it holds an element.
std::optional<std::string> FieldText(const pugi::xml_node& element) {
    std::string value;
    for (const pugi::xml_node& child : element.children()) {
        if (child.type() == pugi::node_pcdata || child.type() == pugi::node_cdata) {
            value += child.value();
        } else if (child.type() == pugi::node_element) {
            return std::nullopt;
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

FlatXml ParseFlatXml(std::string_view text, std::string_view root_name) {
    if (ContainsIgnoringCase(text, "<!DOCTYPE") || ContainsIgnoringCase(text, "<!ENTITY")) {
        return {.error = "XML with a DTD or entity declarations is refused"};
    }
    // pugixml stops at a NUL byte and would accept whatever came before it.
    if (text.find('\0') != std::string_view::npos) return {.error = "the XML holds a NUL byte"};
    pugi::xml_document document;
    // No parse_doctype: no DTD is read, and no entity is ever expanded. The values are the
    // text WeChat signed, byte for byte: no parse_eol (it would turn "\r\n" into "\n"), and
    // parse_ws_pcdata keeps a value of spaces. parse_fragment keeps text outside the root
    // element, which pugixml would otherwise drop silently, so that it can be refused.
    constexpr unsigned kOptions =
        pugi::parse_cdata | pugi::parse_escapes | pugi::parse_ws_pcdata | pugi::parse_fragment;
    const pugi::xml_parse_result parsed =
        document.load_buffer(text.data(), text.size(), kOptions, pugi::encoding_utf8);
    if (!parsed) {
        return {.error = std::string("the body is not well-formed XML: ") + parsed.description()};
    }
    pugi::xml_node root;
    for (const pugi::xml_node& node : document.children()) {
        if (node.type() == pugi::node_pcdata || node.type() == pugi::node_cdata) {
            if (!IsWhitespace(node.value())) return {.error = "text outside the XML root element"};
            continue;
        }
        if (node.type() != pugi::node_element) continue;
        if (root) return {.error = "the XML has more than one root element"};
        root = node;
    }
    if (!root || root_name != root.name()) {
        return {.error = "the XML root element must be <" + std::string(root_name) + ">"};
    }
    PlatformFields fields;
    for (const pugi::xml_node& node : root.children()) {
        if (node.type() == pugi::node_pcdata || node.type() == pugi::node_cdata) {
            if (!IsWhitespace(node.value())) return {.error = "text outside the XML fields"};
            continue;
        }
        if (node.type() != pugi::node_element) continue;
        const std::optional<std::string> value = FieldText(node);
        if (!value) return {.error = std::string("field ") + node.name() + " holds elements"};
        if (fields.size() == kFieldsMax) return {.error = "too many XML fields"};
        if (!fields.emplace(node.name(), *value).second) {
            return {.error = std::string("field ") + node.name() + " appears twice"};
        }
    }
    return {.fields = std::move(fields)};
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
