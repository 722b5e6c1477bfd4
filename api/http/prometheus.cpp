#include "api/http/prometheus.hpp"

#include <algorithm>
#include <cmath>
#include <locale>
#include <sstream>

#include "projections/assert.hpp"

namespace payledger::api {
namespace {

// [a-zA-Z_:][a-zA-Z0-9_:]* for a metric, the same without ':' for a label.
bool IsName(std::string_view name, bool colon_allowed) {
    if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
    return std::all_of(name.begin(), name.end(), [&](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || (colon_allowed && c == ':');
    });
}

const char* TypeName(PrometheusText::Type type) {
    switch (type) {
        case PrometheusText::Type::kCounter:
            return "counter";
        case PrometheusText::Type::kGauge:
            return "gauge";
        case PrometheusText::Type::kHistogram:
            return "histogram";
    }
    PAYLEDGER_ASSERT(false);
    return "";
}

// A backslash and a line feed are escaped in help texts; a double quote too in label values.
void AppendEscaped(std::string_view text, bool quote, std::string& out) {
    for (const char c : text) {
        if (c == '\\') {
            out += "\\\\";
        } else if (c == '\n') {
            out += "\\n";
        } else if (quote && c == '"') {
            out += "\\\"";
        } else {
            out += c;
        }
    }
}

}  // namespace

std::string PrometheusText::Number(double value) {
    if (std::isnan(value)) return "NaN";
    if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
    std::ostringstream out;
    out.imbue(std::locale::classic());
    out << value;
    return out.str();
}

PrometheusText::Family::Family(std::string_view name, Type type, std::string_view help)
    : name_(name), type_(type) {
    text_ += "# HELP ";
    text_ += name;
    text_ += ' ';
    AppendEscaped(help, false, text_);
    text_ += "\n# TYPE ";
    text_ += name;
    text_ += ' ';
    text_ += TypeName(type);
    text_ += '\n';
}

void PrometheusText::Family::Append(std::string_view suffix, Labels labels,
                                    std::string_view value) {
    PAYLEDGER_ASSERT(suffix.empty() == (type_ != Type::kHistogram));
    text_ += name_;
    text_ += suffix;
    if (labels.size() != 0) {
        char separator = '{';
        for (const auto& [label, label_value] : labels) {
            PAYLEDGER_ASSERT(IsName(label, false));
            text_ += separator;
            text_ += label;
            text_ += "=\"";
            AppendEscaped(label_value, true, text_);
            text_ += '"';
            separator = ',';
        }
        text_ += '}';
    }
    text_ += ' ';
    text_ += value;
    text_ += '\n';
}

PrometheusText::Family& PrometheusText::Add(std::string_view name, Type type,
                                            std::string_view help) {
    PAYLEDGER_ASSERT(IsName(name, true));
    for (Family& family : families_) {
        if (family.name_ == name) {
            PAYLEDGER_ASSERT(family.type_ == type);
            return family;
        }
    }
    return families_.emplace_back(Family{name, type, help});
}

std::string PrometheusText::Text() const {
    std::string text;
    for (const Family& family : families_) text += family.text_;
    return text;
}

}  // namespace payledger::api
