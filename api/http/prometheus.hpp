#pragma once

#include <concepts>
#include <deque>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace payledger::api {

// The text of GET /metrics in Prometheus's text exposition format 0.0.4: each family's
// `# HELP` and `# TYPE` lines once, then all its samples, whatever order they were added in;
// label values and help texts escaped as the format requires. Families come out in the order
// they were first added. Not thread-safe: one per rendering.
class PrometheusText {
public:
    enum class Type { kCounter, kGauge, kHistogram };
    // Label names and values, in the order written.
    using Labels = std::initializer_list<std::pair<std::string_view, std::string_view>>;

    // A number as the format writes it: integers in decimal; floating-point values as a C++
    // stream writes them by default (six significant digits: 0.0005, 1, 2.5e-05), NaN as
    // "NaN" and the infinities as "+Inf" and "-Inf".
    [[nodiscard]] static std::string Number(double value);
    [[nodiscard]] static std::string Number(std::integral auto value) {
        return std::to_string(value);
    }

    // The samples of one family.
    class Family {
    public:
        // One sample named as the family: `name{labels} value`.
        void Sample(Labels labels, std::integral auto value) { Append({}, labels, Number(value)); }
        void Sample(Labels labels, double value) { Append({}, labels, Number(value)); }
        // The same for a histogram's series, `suffix` being "_bucket", "_sum" or "_count".
        void Sample(std::string_view suffix, Labels labels, std::integral auto value) {
            Append(suffix, labels, Number(value));
        }
        void Sample(std::string_view suffix, Labels labels, double value) {
            Append(suffix, labels, Number(value));
        }

    private:
        friend class PrometheusText;
        Family(std::string_view name, Type type, std::string_view help);
        void Append(std::string_view suffix, Labels labels, std::string_view value);

        std::string name_;
        Type type_;
        std::string text_;  // The HELP and TYPE lines, then the samples.
    };

    // The family `name`, whose HELP and TYPE lines are written once, before its samples.
    // Asking again for a name returns the same family. REQUIRES: `name` is a valid metric name,
    // and the same `type` every time.
    Family& Add(std::string_view name, Type type, std::string_view help);

    // Every family added so far, in order; empty when none was.
    [[nodiscard]] std::string Text() const;

private:
    std::deque<Family> families_{};  // A deque: the references Add returns stay valid.
};

}  // namespace payledger::api
