#pragma once

// The fixture of the platform channel tests without a database (wechat_v2_channel_test.cpp,
// wechat_v3_channel_test.cpp, alipay_channel_test.cpp, simulate_test.cpp): the three channels
// built from the shared test configuration (platform_fixtures.hpp), notices built by
// api::BuildNotice (the `payledger simulate` builder) and handed to a channel's Verify().

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "api/channels/alipay_channel.hpp"
#include "api/channels/wechat_v2_channel.hpp"
#include "api/channels/wechat_v3_channel.hpp"
#include "projections/decide.hpp"
#include "tests/api/channels/platform_fixtures.hpp"

namespace payledger::api {

class PlatformChannelTest : public ::testing::Test {
protected:
    ledger::Delivery Deliver(const Channel& channel, const SimulatedNotice& notice,
                             std::int64_t received_offset = 0) const {
        Incoming incoming = testing::ToIncoming(notice, now_ + received_offset);
        return channel.Verify(incoming);
    }

    SimulatedNotice Notice(const std::string& channel, const std::string& kind = "payment",
                           std::int64_t amount = 1999, const Config* config = nullptr) const {
        return BuildNotice(config ? *config : config_, {.channel = channel,
                                                        .out_trade_no = "ORD-1",
                                                        .kind = kind,
                                                        .amount = amount,
                                                        .order_amount = 1999,
                                                        .unix_seconds = now_});
    }

    const std::int64_t now_ = testing::PlatformNowSeconds();
    const Config config_ = testing::WithPlatforms(Config{});
    const WechatV2Channel v2_{*config_.wechat_v2};
    const WechatV3Channel v3_{*config_.wechat_v3};
    const AlipayChannel alipay_{*config_.alipay};
};

inline void ExpectVerdict(const ledger::Delivery& delivery, projections::Outcome verdict) {
    EXPECT_EQ(delivery.outcome, verdict) << delivery.message;
    EXPECT_EQ(delivery.event.has_value(), verdict == projections::Outcome::kAppended);
}

}  // namespace payledger::api
