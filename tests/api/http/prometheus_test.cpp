// Tests of api/http/prometheus.hpp against the text exposition format 0.0.4: HELP and TYPE
// once per family, samples grouped under their family whatever order they come in, label
// values and help texts escaped, numbers as the format spells them. The expected texts are
// written out by hand.

#include "api/http/prometheus.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "projections/assert.hpp"

namespace payledger::api {
namespace {

using Type = PrometheusText::Type;

TEST(PrometheusText, WritesEachFamilyOnceWithItsSamplesTogether) {
    PrometheusText out;
    PrometheusText::Family& lag = out.Add("x_lag_events", Type::kGauge, "Events behind.");
    PrometheusText::Family& failures = out.Add("x_failures_total", Type::kCounter, "Failures.");
    for (const char* name : {"a", "b"}) {
        lag.Sample({{"subscription", name}}, std::int64_t{7});
        failures.Sample({{"subscription", name}}, std::uint64_t{0});
    }
    // Asking again for a family gives the same one: no second HELP.
    out.Add("x_lag_events", Type::kGauge, "Events behind.").Sample({{"subscription", "c"}}, 1);
    EXPECT_EQ(out.Text(),
              "# HELP x_lag_events Events behind.\n"
              "# TYPE x_lag_events gauge\n"
              "x_lag_events{subscription=\"a\"} 7\n"
              "x_lag_events{subscription=\"b\"} 7\n"
              "x_lag_events{subscription=\"c\"} 1\n"
              "# HELP x_failures_total Failures.\n"
              "# TYPE x_failures_total counter\n"
              "x_failures_total{subscription=\"a\"} 0\n"
              "x_failures_total{subscription=\"b\"} 0\n");
    EXPECT_EQ(PrometheusText{}.Text(), "");
}

TEST(PrometheusText, WritesAHistogramsSeriesAndSeveralLabels) {
    PrometheusText out;
    PrometheusText::Family& latency =
        out.Add("x_request_duration_seconds", Type::kHistogram, "Latency.");
    latency.Sample("_bucket", {{"le", PrometheusText::Number(0.0005)}}, 1);
    latency.Sample("_bucket", {{"le", PrometheusText::Number(1.0)}}, 2);
    latency.Sample("_bucket", {{"le", "+Inf"}}, 3);
    latency.Sample("_sum", {}, 1.25);
    latency.Sample("_count", {}, 3);
    out.Add("x_deliveries_total", Type::kCounter, "Deliveries.")
        .Sample({{"channel", "api"}, {"outcome", "appended"}}, 12);
    EXPECT_EQ(out.Text(),
              "# HELP x_request_duration_seconds Latency.\n"
              "# TYPE x_request_duration_seconds histogram\n"
              "x_request_duration_seconds_bucket{le=\"0.0005\"} 1\n"
              "x_request_duration_seconds_bucket{le=\"1\"} 2\n"
              "x_request_duration_seconds_bucket{le=\"+Inf\"} 3\n"
              "x_request_duration_seconds_sum 1.25\n"
              "x_request_duration_seconds_count 3\n"
              "# HELP x_deliveries_total Deliveries.\n"
              "# TYPE x_deliveries_total counter\n"
              "x_deliveries_total{channel=\"api\",outcome=\"appended\"} 12\n");
}

TEST(PrometheusText, EscapesLabelValuesAndHelpTexts) {
    PrometheusText out;
    out.Add("x_up", Type::kGauge, "A \\ backslash\nand a line \"quoted\".")
        .Sample({{"name", "a\"b\\c\nd"}}, 1);
    EXPECT_EQ(out.Text(),
              "# HELP x_up A \\\\ backslash\\nand a line \"quoted\".\n"
              "# TYPE x_up gauge\n"
              "x_up{name=\"a\\\"b\\\\c\\nd\"} 1\n");
}

TEST(PrometheusText, SpellsNumbersAsTheFormatDoes) {
    EXPECT_EQ(PrometheusText::Number(std::uint64_t{18'446'744'073'709'551'615u}),
              "18446744073709551615");
    EXPECT_EQ(PrometheusText::Number(std::int64_t{-3}), "-3");
    EXPECT_EQ(PrometheusText::Number(0.0), "0");
    EXPECT_EQ(PrometheusText::Number(0.25), "0.25");
    EXPECT_EQ(PrometheusText::Number(2.5e-05), "2.5e-05");
    EXPECT_EQ(PrometheusText::Number(std::numeric_limits<double>::quiet_NaN()), "NaN");
    EXPECT_EQ(PrometheusText::Number(std::numeric_limits<double>::infinity()), "+Inf");
    EXPECT_EQ(PrometheusText::Number(-std::numeric_limits<double>::infinity()), "-Inf");
}

TEST(PrometheusText, RefusesInvalidNamesAndAChangedType) {
    PrometheusText out;
    EXPECT_THROW(out.Add("1x", Type::kGauge, "h"), InvariantError);
    EXPECT_THROW(out.Add("x-y", Type::kGauge, "h"), InvariantError);
    out.Add("x_y", Type::kGauge, "h");
    EXPECT_THROW(out.Add("x_y", Type::kCounter, "h"), InvariantError);
    EXPECT_THROW(out.Add("x_y", Type::kGauge, "h").Sample({{"bad-label", "v"}}, 1), InvariantError);
    EXPECT_THROW(out.Add("x_y", Type::kGauge, "h").Sample("_bucket", {}, 1), InvariantError);
}

}  // namespace
}  // namespace payledger::api
