// `payledger simulate`'s URL for an IPv6 listen address (api/cli/simulate.hpp).

#include <gtest/gtest.h>

#include <stdexcept>

#include "tests/api/channels/platform_channel_fixture.hpp"

namespace payledger::api {
namespace {

// An IPv6 listen address ("::1:<port>", as the server takes it) is a URL host in brackets:
// simulate must try to post there (nothing listens: the request fails), not refuse its own
// default URL as invalid.
TEST_F(PlatformChannelTest, SimulatePostsToAnIpv6ListenAddress) {
    Config config = config_;
    config.listen_host = "::1";
    config.listen_port = 1;
    const SimulateOptions options{.channel = "alipay", .out_trade_no = "ORD-1"};
    EXPECT_THROW(static_cast<void>(RunSimulate(config, options, "")), std::runtime_error);
    EXPECT_THROW(static_cast<void>(RunSimulate(config, options, "http://[::1]:1")),
                 std::runtime_error);
}

}  // namespace
}  // namespace payledger::api
