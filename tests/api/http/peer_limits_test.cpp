// Who a peer is and what it may do (api/http/peer_limits.hpp): peer keys (IPv4 alone, IPv6 by
// /64, IPv4-mapped as IPv4), address blocks for trusted_proxies, the X-Forwarded-For entry
// that is believed, and the byte budget of unverified deliveries across all peers. Pure: no
// server, no database.
#include "api/http/peer_limits.hpp"

#include <gtest/gtest.h>

#include <boost/asio/ip/address.hpp>

#include "api/config.hpp"
#include "api/http/request_framing.hpp"

namespace payledger::api {
namespace {

using boost::asio::ip::make_address;

TEST(PeerKeyTest, AnIpv6AddressCountsByItsSlash64) {
    EXPECT_EQ(PeerKey(make_address("2001:db8:1:2:aaaa:bbbb:cccc:dddd")), "2001:db8:1:2::/64");
    // Rotating through the /64 stays one peer; the next /64 is another.
    EXPECT_EQ(PeerKey(make_address("2001:db8:1:2::1")),
              PeerKey(make_address("2001:db8:1:2:ffff::")));
    EXPECT_NE(PeerKey(make_address("2001:db8:1:2::1")), PeerKey(make_address("2001:db8:1:3::1")));
    EXPECT_EQ(PeerKey(make_address("::1")), "::/64");
}

TEST(PeerKeyTest, AnIpv4AddressIsOnePeerAndAMappedOneCountsAsIpv4) {
    EXPECT_EQ(PeerKey(make_address("192.0.2.7")), "192.0.2.7");
    EXPECT_NE(PeerKey(make_address("192.0.2.7")), PeerKey(make_address("192.0.2.8")));
    EXPECT_EQ(PeerKey(make_address("::ffff:192.0.2.7")), "192.0.2.7");
}

TEST(CidrTest, ParsesBlocksAndRefusesWhatIsNotOne) {
    for (const char* good : {"10.0.0.0/8", "127.0.0.1/32", "127.0.0.1", "0.0.0.0/0",
                             "2001:db8::/32", "::1/128", "::/0", "192.168.4.0/22"}) {
        EXPECT_TRUE(Cidr::Parse(good).has_value()) << good;
    }
    for (const char* bad :
         {"", "10.0.0.1/8", "10.0.0.0/33", "2001:db8::1/32", "10.0.0.0/", "10.0.0.0/8x",
          "host.example/8", "10.0.0.0/-1", "::/129", "192.168.5.0/22"}) {
        EXPECT_FALSE(Cidr::Parse(bad).has_value()) << bad;
    }
}

TEST(CidrTest, ContainsExactlyTheAddressesOfItsBlock) {
    const Cidr ten = *Cidr::Parse("10.0.0.0/8");
    EXPECT_TRUE(ten.Contains(make_address("10.255.1.2")));
    EXPECT_FALSE(ten.Contains(make_address("11.0.0.0")));
    EXPECT_TRUE(ten.Contains(make_address("::ffff:10.1.2.3")));  // Mapped: the same address.
    EXPECT_FALSE(ten.Contains(make_address("2001:db8::1")));
    const Cidr block = *Cidr::Parse("192.168.4.0/22");
    EXPECT_TRUE(block.Contains(make_address("192.168.7.255")));
    EXPECT_FALSE(block.Contains(make_address("192.168.8.0")));
    const Cidr v6 = *Cidr::Parse("2001:db8:8000::/33");
    EXPECT_TRUE(v6.Contains(make_address("2001:db8:ffff::1")));
    EXPECT_FALSE(v6.Contains(make_address("2001:db8:7fff::1")));
    EXPECT_TRUE(Cidr::Parse("127.0.0.1")->Contains(make_address("127.0.0.1")));
    EXPECT_FALSE(Cidr::Parse("127.0.0.1")->Contains(make_address("127.0.0.2")));
}

TEST(ForwardedClientTest, BelievesOnlyTheLastEntry) {
    EXPECT_EQ(ForwardedClient("198.51.100.7")->to_string(), "198.51.100.7");
    // The entries to the left are the client's own words.
    EXPECT_EQ(ForwardedClient("203.0.113.1, 198.51.100.7")->to_string(), "198.51.100.7");
    EXPECT_EQ(ForwardedClient(" 203.0.113.1 ,\t2001:db8::5 ")->to_string(), "2001:db8::5");
    EXPECT_EQ(ForwardedClient("[2001:db8::5]")->to_string(), "2001:db8::5");
    EXPECT_FALSE(ForwardedClient("").has_value());
    EXPECT_FALSE(ForwardedClient("198.51.100.7, unknown").has_value());
    EXPECT_FALSE(ForwardedClient("198.51.100.7:443").has_value());
}

TEST(UnverifiedBytesBudgetTest, IsASlidingWindowOfBytesOverAllPeers) {
    UnverifiedBytesBudget budget{100};
    const auto t0 = UnverifiedBytesBudget::Clock::time_point{} + std::chrono::hours{1};
    using std::chrono::seconds;
    EXPECT_TRUE(budget.Admit(60, t0));
    EXPECT_TRUE(budget.Admit(40, t0 + seconds{10}));
    EXPECT_FALSE(budget.Admit(1, t0 + seconds{20}));    // 100 in the last 60 s.
    EXPECT_FALSE(budget.Admit(101, t0 + seconds{20}));  // Never fits.
    EXPECT_TRUE(budget.Admit(60, t0 + seconds{60}));    // The first 60 left the window.
    budget.Forget(60, t0 + seconds{60});                // Not stored after all.
    EXPECT_TRUE(budget.Admit(60, t0 + seconds{61}));
    EXPECT_FALSE(budget.Admit(1, t0 + seconds{62}));
}

TEST(ChunkFramingBudgetTest, CountsDataSizeLinesAndExtensions) {
    EXPECT_EQ(ChunkLineBytes(0), 5u);      // "0" CRLF ... CRLF
    EXPECT_EQ(ChunkLineBytes(15), 5u);     // "f"
    EXPECT_EQ(ChunkLineBytes(16), 6u);     // "10"
    EXPECT_EQ(ChunkLineBytes(65536), 9u);  // "10000"
}

TEST(ConfigLimitsTest, NewLimitsAndProxiesAreReadAndCheckedNamingTheField) {
    const auto parse = [](const std::string& extra) {
        return ParseConfig(R"({"database_url": "postgresql:///x")" + extra + "}", std::nullopt,
                           std::nullopt);
    };
    const Config defaults = parse("");
    EXPECT_EQ(defaults.limits.connections_max, 4096u);
    EXPECT_EQ(defaults.limits.unverified_bytes_per_minute, 64u * 1024 * 1024);
    EXPECT_TRUE(defaults.trusted_proxies.empty());
    const Config set = parse(R"(, "limits": {"connections_max": 10,
        "unverified_bytes_per_minute": 1048576}, "trusted_proxies": ["10.0.0.0/8", "::1"])");
    EXPECT_EQ(set.limits.connections_max, 10u);
    EXPECT_EQ(set.limits.unverified_bytes_per_minute, 1048576u);
    ASSERT_EQ(set.trusted_proxies.size(), 2u);
    EXPECT_TRUE(set.trusted_proxies[0].Contains(make_address("10.9.9.9")));
    const auto refused = [&](const std::string& extra, const std::string& field) {
        try {
            (void)parse(extra);
            ADD_FAILURE() << "accepted " << extra;
        } catch (const ConfigError& error) {
            EXPECT_NE(std::string(error.what()).find(field), std::string::npos) << error.what();
        }
    };
    refused(R"(, "limits": {"connections_max": 0})", "limits.connections_max");
    refused(R"(, "limits": {"unverified_bytes_per_minute": 1000})",
            "limits.unverified_bytes_per_minute");
    refused(R"(, "trusted_proxies": "10.0.0.0/8")", "trusted_proxies");
    refused(R"(, "trusted_proxies": ["10.0.0.0/8", "10.0.0.1/8"])", "trusted_proxies[1]");
}

TEST(ConfigLimitsTest, AMerchantTokenMayCarryAnOrderNumberPrefix) {
    const auto parse = [](const std::string& token) {
        return ParseConfig(
            R"({"database_url": "postgresql:///x", "tokens": {"merchant": [)" + token + "]}}",
            std::nullopt, std::nullopt);
    };
    const Config config =
        parse(R"({"token": "tenant-token-0123456789", "out_trade_no_prefix": "S1-"})");
    ASSERT_EQ(config.merchant_tokens.size(), 1u);
    EXPECT_EQ(config.merchant_tokens[0].out_trade_no_prefix, "S1-");
    EXPECT_FALSE(config.merchant_tokens[0].accounts.has_value());  // Any account.
    for (const char* bad : {R"({"token": "tenant-token-0123456789", "out_trade_no_prefix": ""})",
                            R"({"token": "tenant-token-0123456789", "out_trade_no_prefix": "S 1"})",
                            R"({"token": "tenant-token-0123456789", "out_trade_no_prefix": 7})",
                            R"({"token": "tenant-token-0123456789"})"}) {
        EXPECT_THROW((void)parse(bad), ConfigError) << bad;
    }
}

}  // namespace
}  // namespace payledger::api
